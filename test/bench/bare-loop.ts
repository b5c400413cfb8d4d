// The bare fetch loop figures `loop1000` and `loop120` of test/bench.ts compare run-judge with: no SDK, no
// validation. For each transcript under TRANSCRIPTS it reads the file, POSTs a request of about BYTES bytes to
// $ANTHROPIC_BASE_URL/v1/messages with fetch, CONCURRENCY at a time (a simple pool), parses the JSON answer and
// appends one line to OUTPUT.
// Usage: node --import tsx/esm test/bench/bare-loop.ts TRANSCRIPTS OUTPUT CONCURRENCY BYTES
import * as fs from 'node:fs';
import * as path from 'node:path';

const [transcripts, output, concurrencyArg, bytesArg] = process.argv.slice(2);
if (!transcripts || !output || !concurrencyArg || !bytesArg)
  throw new Error('usage: bare-loop.ts TRANSCRIPTS OUTPUT CONCURRENCY BYTES');
const root = transcripts;
const concurrency = Number(concurrencyArg);
const bytes = Number(bytesArg);
const url = `${process.env.ANTHROPIC_BASE_URL}/v1/messages`;
const headers = {
  'content-type': 'application/json',
  'x-api-key': process.env.ANTHROPIC_API_KEY ?? '',
  'anthropic-version': '2023-06-01',
};

const files: string[] = [];
for (const model of fs.readdirSync(transcripts).sort())
  for (const file of fs.readdirSync(path.join(transcripts, model)).sort())
    files.push(path.join(transcripts, model, file));

const out = await fs.promises.open(output, 'a');
let next = 0;
async function worker(): Promise<void> {
  while (next < files.length) {
    const file = files[next++]!;
    const transcript = await fs.promises.readFile(file, 'utf8');
    const request = {
      model: 'judge-primary',
      max_tokens: 512,
      system: '',
      messages: [] as unknown[],
    };
    request.messages.push({ role: 'user', content: transcript });
    // Padded to the size of run-judge's requests (the bench measures theirs and passes it in BYTES).
    request.system = 'x'.repeat(Math.max(0, bytes - JSON.stringify(request).length));
    const response = await fetch(url, { method: 'POST', headers, body: JSON.stringify(request) });
    const answer = (await response.json()) as { content: { type: string; text?: string }[] };
    const text = answer.content.find((block) => block.type === 'text')?.text ?? '';
    const scores = JSON.parse(text) as { scores: Record<string, number> };
    const key = path.relative(root, file);
    await out.appendFile(`${key},${Object.values(scores.scores).join(',')}\n`);
  }
}
await Promise.all(Array.from({ length: concurrency }, worker));
await out.close();
