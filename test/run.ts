// npm test's runner: node's test runner starts SHARDS processes (test/shard.ts), and each takes the
// next test file from one queue once the last file it took has finished. So node, tsx and the SDKs
// start SHARDS times rather than once a file, and no process waits idle while files are left.
// Started as `node --import tsx test/run.ts`: each process inherits the loader.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { run } from 'node:test';
import { spec, tap } from 'node:test/reporters';
import { fileURLToPath } from 'node:url';

/** Files wait on Chromium, child processes and sockets part of the time: 3 keep 2 cores busy. */
const SHARDS = 3;

const dir = path.dirname(fileURLToPath(import.meta.url));
// Largest first: a long file taken last would leave the other processes idle at the end.
const files = fs
  .readdirSync(dir)
  .filter((name) => name.endsWith('.test.ts'))
  .map((name) => ({ name, size: fs.statSync(path.join(dir, name)).size }))
  .sort((a, b) => b.size - a.size || a.name.localeCompare(b.name))
  .map((file) => file.name);

const queue = fs.mkdtempSync(path.join(os.tmpdir(), 'rj-test-queue-'));
fs.writeFileSync(path.join(queue, 'files.json'), JSON.stringify(files));
process.on('exit', () => fs.rmSync(queue, { recursive: true, force: true }));
process.env.RJ_TEST_QUEUE = queue; // read by test/shard.ts

const shard = path.join(dir, 'shard.ts');
const stream = run({ files: Array.from({ length: SHARDS }, () => shard), concurrency: SHARDS });
stream.on('test:fail', () => {
  process.exitCode = 1;
});
// node --test's own choice: spec for a person at a terminal, TAP for a log
const reporter = process.stdout.isTTY ? new spec() : tap;
stream.compose(reporter).pipe(process.stdout);
