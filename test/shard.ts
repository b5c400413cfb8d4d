// One of npm test's processes (test/run.ts starts them): it takes a test file from the queue, runs
// the file's tests as one suite named by the file, and takes the next file once they have finished.
// Imported inside its suite, a file's tests and hooks are the suite's: it ends when the file's
// last test does, and a file that does not load fails by its name.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';

/** Takes `name` from the queue: true for the one process whose folder for it was made. */
function take(queue: string, name: string): boolean {
  try {
    fs.mkdirSync(path.join(queue, name));
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw error;
  }
}

// The queue's folder (set by test/run.ts): files.json, the files in order, and a folder per file
// some process took.
const queue = process.env.RJ_TEST_QUEUE;
if (queue === undefined) throw new Error('test/shard.ts is started by test/run.ts (npm test)');

const dir = path.dirname(fileURLToPath(import.meta.url));
const files = JSON.parse(fs.readFileSync(path.join(queue, 'files.json'), 'utf8')) as string[];
for (const name of files) {
  if (!take(queue, name)) continue;
  const url = pathToFileURL(path.join(dir, name)).href;
  await describe(`test/${name}`, async () => {
    await import(url);
  });
}
