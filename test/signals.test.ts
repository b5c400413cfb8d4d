// Signals as CI sends them: a SIGTERM to the whole process group of run-judge started as plain node
// (as the README says to start a run a signal may stop), once the server has delivered answers.
// Under `npx tsx` the relay also SIGKILLs a script that has not acknowledged the signal within 30 ms:
// on a machine that leaves it without a core that long no test can hold, so this one does not use it
// (docs/guarantees.md, Signals).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, test, type TestContext } from 'node:test';
import {
  REPO,
  SCRIPT,
  bundled,
  delay,
  hold,
  judgeEntry,
  readLog,
  rowCount,
  runEnv,
  setup,
  waitFor,
} from './helpers.ts';

/**
 * `rounds` runs at `--concurrency n` of `tsx run-judge.ts`, each in its own process group, each
 * cancelled by a group SIGTERM once answers arrived: in even rounds as the first two arrive, in odd
 * rounds once a full `n` arrived together; a few ms later each round. Every answer the fake delivered
 * must have its audit line and row, and the script its summary: it was never killed.
 */
async function cancelAfterAnswers(t: TestContext, concurrency: number, rounds: number) {
  let answers = hold();
  let roundStart = 0;
  // The first two requests of a run (sent before any answer told the limits) are answered at once.
  const until = (index: number) => (index - roundStart < 2 ? undefined : answers.until);
  const { fake, ws } = await setup(
    t,
    {
      responder: (_, index) => ({ text: fake.validAnswer(), until: until(index) }),
      // The limits told on every answer, as the API does: after the first answers the run opens
      // up to --concurrency (without them it starts slowly, and the held answers would hold it).
      buckets: { requests: { capacity: 100_000, perSecond: 100_000 } },
    },
    {
      models: concurrency + 2, // three transcripts each: more than a round judges
      judge: judgeEntry('judge-a', { timeout_s: 120 }),
      fallbacks: [],
    },
  );
  let delivered = 0;
  const onDelivered = () => delivered++;
  subscribe('http.server.response.finish', onDelivered);
  t.after(() => unsubscribe('http.server.response.finish', onDelivered));

  for (let round = 0; round < rounds; round++) {
    answers = hold();
    const output = path.join(ws.dir, `round${round}`, 'scores.csv');
    const log = path.join(ws.dir, `round${round}`, 'log.jsonl');
    const args = ws.args('--concurrency', String(concurrency), '--output', output, '--log', log);
    const sent = fake.requests.length;
    roundStart = sent;
    const deliveredBefore = delivered;
    let stderr = '';
    const child = spawn(process.execPath, [bundled(SCRIPT).main, ...args], {
      cwd: REPO,
      env: runEnv({ baseUrl: fake.url }),
      detached: true, // its own process group, as a CI job's
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const closed = new Promise<string>((resolve) =>
      child.once('close', (code, signal) => resolve(signal ?? String(code))),
    );
    t.after(() => killGroup(child.pid!)); // whatever is left of it, once the test failed

    // Even rounds: the signal as the first two answers arrive, the requests they let start held
    // until after it. Odd rounds: once a full --concurrency of answers arrived together.
    await waitFor(() => delivered >= deliveredBefore + 2, 60_000, 'the first answers');
    if (round % 2 === 1) {
      const first = 2 + concurrency;
      await waitFor(() => fake.requests.length >= sent + first, 10_000, 'every request in flight');
      answers.release(); // these answers arrive at once; later requests are answered at once
      await waitFor(() => delivered >= deliveredBefore + first, 10_000, 'the answers');
    }
    await delay(round % 5);
    process.kill(-child.pid!, 'SIGTERM');
    answers.release();
    const ended = await closed; // stderr closes once the script too has exited

    const at = `round ${round}: ${stderr}`;
    assert.match(ended, /^(143|SIGTERM)$/, `${at}: tsx ended by the signal`);
    assert.equal(fs.existsSync(`${output}.lock`), false, `${at}: the script ended by itself`);
    assert.match(stderr, /^stopping: /m, at);
    assert.match(stderr, /^interrupted: /m, `${at}: the summary`);
    const answered = delivered - deliveredBefore;
    assert.equal(readLog(log).length, answered, `${at}: every delivered answer has its audit line`);
    assert.equal(rowCount(output), answered, `${at}: and its row`);
  }
}

/** SIGKILLs a process group, if any of it is left. */
function killGroup(pgid: number): void {
  try {
    process.kill(-pgid, 'SIGKILL');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error; // none left
  }
}

describe('a group SIGTERM, as CI cancels, to run-judge started as node: every answer the server delivered is written', () => {
  test('--concurrency 8, 10 rounds: the script is never killed, each answer has its audit line and row', async (t) => {
    await cancelAfterAnswers(t, 8, 10);
  });

  test('--concurrency 32, 2 rounds (one at each moment): the same', async (t) => {
    await cancelAfterAnswers(t, 32, 2);
  });
});
