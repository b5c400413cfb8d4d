// report/html-escape.ts: untrusted text as HTML text, for both pages (report/html.ts, report/scoring-page.ts), so
// neither page imports the other.

/** Untrusted text (transcripts, notes, every name) as HTML text: `<script>` shows, never runs. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (char) => `&#${char.charCodeAt(0)};`);
}
