// npm test's runner: node --test sorts its files by name, so the four that take longest started last
// and ran on after the rest had finished; run() keeps the order it is given.
// Started as `node --import tsx test/run.ts`: each test file's process inherits the loader.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { run } from 'node:test';
import { spec, tap } from 'node:test/reporters';
import { fileURLToPath } from 'node:url';

/** The files that wait longest on Chromium and child processes (10-25 s each alone), longest first. */
const LONGEST_FIRST = [
  'scoring-page.test.ts',
  'cli.test.ts',
  'signals.test.ts',
  'report-page.test.ts',
];

/** Four files at a time: on 2 cores, files waiting on Chromium or a child leave a core idle at two. */
const CONCURRENCY = 4;

const dir = fileURLToPath(new URL('.', import.meta.url));
const names = fs.readdirSync(dir).filter((name) => name.endsWith('.test.ts'));
const gone = LONGEST_FIRST.filter((name) => !names.includes(name));
if (gone.length > 0) {
  console.error(`test/run.ts: ${gone.join(', ')} not in test/: update LONGEST_FIRST`);
  process.exit(1);
}
const rest = names.filter((name) => !LONGEST_FIRST.includes(name)).sort();
const files = [...LONGEST_FIRST, ...rest].map((name) => path.join(dir, name));

const stream = run({ files, concurrency: CONCURRENCY });
stream.on('test:fail', () => {
  process.exitCode = 1;
});
// node --test's own choice: spec for a person at a terminal, TAP for a log
const reporter = process.stdout.isTTY ? new spec() : tap;
stream.compose(reporter).pipe(process.stdout);
