// npm test's runner. The test files run in SHARDS processes, each importing its files one after
// another: a process a file paid 25 starts of node, tsx and the SDKs and warmed the same code 25
// times (the suite's CPU 130-160 s that way, 88-94 s in three, in runs taken in turn on 2 cores).
// Started as `node --import tsx test/run.ts`: each shard's process inherits the loader.
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { run } from 'node:test';
import { spec, tap } from 'node:test/reporters';
import { fileURLToPath, pathToFileURL } from 'node:url';

/**
 * Seconds each file takes alone (measured 2026-12-04), for sharing the files out evenly; a file not
 * listed counts as DEFAULT_SECONDS. Most of these wait on Chromium, child processes or a real
 * timeout, so three processes keep two cores busy.
 */
const SECONDS: Record<string, number> = {
  'scoring-page.test.ts': 21,
  'cli.test.ts': 19,
  'batches.test.ts': 11,
  'report-page.test.ts': 11,
  'output.test.ts': 10.5,
  'signals.test.ts': 9.6,
  'judge.test.ts': 7.8,
  'report-cli.test.ts': 4.8,
  'human-gate.test.ts': 4.2,
  'pacing.test.ts': 4.1,
};
const DEFAULT_SECONDS = 2;
const SHARDS = 3;
/**
 * What most test files import, loaded in each shard before its first file: a test file's import
 * runs while the files before it are testing (up to 1.5 s of stall seen in a running test).
 */
const SHARED = ['../run-judge.ts', '../report.ts', 'helpers.ts', '../fakes/openai.ts'];

const dir = fileURLToPath(new URL('.', import.meta.url));
const names = fs.readdirSync(dir).filter((name) => name.endsWith('.test.ts'));
const gone = Object.keys(SECONDS).filter((name) => !names.includes(name));
if (gone.length > 0) {
  console.error(`test/run.ts: ${gone.join(', ')} not in test/: update SECONDS`);
  process.exit(1);
}

const stream = run({ files: shardEntries(names), concurrency: SHARDS });
stream.on('test:fail', () => {
  process.exitCode = 1;
});
// node --test's own choice: spec for a person at a terminal, TAP for a log
const reporter = process.stdout.isTTY ? new spec() : tap;
stream.compose(reporter).pipe(process.stdout);

/**
 * The files shared out longest first, each to the shard with the fewest seconds so far, and one
 * entry module a shard. An entry awaits each import before the next, so a file's tests are queued
 * whole, in order, even when it awaits at its top level.
 */
function shardEntries(files: string[]): string[] {
  const seconds = (name: string) => SECONDS[name] ?? DEFAULT_SECONDS;
  const longestFirst = [...files].sort((a, b) => seconds(b) - seconds(a) || a.localeCompare(b));
  const shards = Array.from({ length: SHARDS }, () => ({ seconds: 0, files: [] as string[] }));
  for (const name of longestFirst) {
    const least = shards.reduce((best, shard) => (shard.seconds < best.seconds ? shard : best));
    least.seconds += seconds(name);
    least.files.push(name);
  }

  const cache = path.join(dir, '..', 'node_modules', '.cache', 'run-judge-test');
  fs.mkdirSync(cache, { recursive: true });
  return shards
    .filter((shard) => shard.files.length > 0)
    .map((shard) => {
      const urls = shard.files.map((name) => pathToFileURL(path.join(dir, name)).href);
      const shared = SHARED.map((name) => pathToFileURL(path.join(dir, name)).href);
      const text = [
        "// written by test/run.ts: one process's test files, in turn",
        "import { test } from 'node:test';",
        '// before any test is queued: a later import would stall the tests already running',
        `for (const file of ${JSON.stringify(shared)}) {`,
        '  try {',
        '    await import(file);',
        '  } catch {',
        "    // a module that does not load is said by each test file that imports it, by the file's name",
        '  }',
        '}',
        `for (const file of ${JSON.stringify(urls)}) {`,
        '  try {',
        '    await import(file);',
        '  } catch (error) {',
        "    // a file that does not load fails by its name, and the shard's other files still run",
        '    test(`${file} loads`, () => {',
        '      throw error;',
        '    });',
        '  }',
        '}',
        '',
      ].join('\n');
      const hash = createHash('sha256').update(text).digest('hex').slice(0, 16);
      // .mts: under node_modules a .ts file would be CommonJS, where top-level await fails
      const entry = path.join(cache, `shard-${hash}.mts`);
      // named by its content, and renamed into place: a run beside this one never reads half of it
      if (!fs.existsSync(entry)) {
        const temp = `${entry}.${process.pid}.tmp`;
        fs.writeFileSync(temp, text);
        fs.renameSync(temp, entry);
      }
      return entry;
    });
}
