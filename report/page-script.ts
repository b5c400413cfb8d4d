// report/page-script.ts: the pages' browser programs. Each is a file under report/pages/ that tsc
// (checkJs, its types in JSDoc) and Prettier check like the rest; a page inlines it when written.
import * as fs from 'node:fs';
import { EvalError } from '../run-judge.ts';

/** What would end an inline script early (its end tag) or make the parser read on past it. */
const NOT_INLINE = /<\/script|<script|<!--/i;

const read = new Map<string, string>();

/** The program report/pages/<name> as an inline `<script>`'s text (read once). */
export function pageScript(name: string): string {
  let text = read.get(name);
  if (text === undefined) {
    text = inlineScript(name, fs.readFileSync(new URL(`./pages/${name}`, import.meta.url), 'utf8'));
    read.set(name, text);
  }
  return text;
}

/**
 * The text as it can stand between `<script>` and `</script>`: refused when it holds an end tag or
 * a comment opening, which HTML reads before JavaScript does ('<' + '/script' in a string is safe).
 */
export function inlineScript(name: string, text: string): string {
  const found = NOT_INLINE.exec(text);
  if (found !== null) {
    throw new EvalError(
      `report/pages/${name}: "${found[0]}" would end or bend the page's inline script; ` +
        "split it (as '<' + '/script')",
    );
  }
  return text.trimEnd();
}
