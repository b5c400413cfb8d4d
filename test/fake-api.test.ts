// npm run fake-api: each judge model answers differently (a seeded function of the model id and the
// transcript), the same model always the same, on the rubric's scale, at a port that can be fixed.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import * as path from 'node:path';
import { describe, test } from 'node:test';
import { REPO, RUBRIC_FILE } from './helpers.ts';

const { fakeAnswer, startFakeApi } = await import('../fakes/serve.ts');
const { allowedScores, loadRubric } = await import('../run-judge.ts');

const rubric = loadRubric(RUBRIC_FILE);

/** The prompt of transcript `i` as Anthropic's and as OpenAI's request carry it. */
function prompts(i: number): { anthropic: unknown; openai: unknown } {
  const text = `Transcript ${i}: the student proves the lemma by induction.`;
  return {
    anthropic: [{ role: 'user', content: [{ type: 'text', text, cache_control: { type: 'x' } }] }],
    openai: [{ role: 'user', content: text }],
  };
}

function scoresOf(answer: string): Record<string, number> {
  return (JSON.parse(answer) as { scores: Record<string, number> }).scores;
}

describe('fake-api answers', () => {
  test('one model gives one answer to one transcript, whichever API carries it, on the scale', () => {
    for (let i = 0; i < 20; i += 1) {
      const { anthropic, openai } = prompts(i);
      const first = fakeAnswer(rubric, 0, 'judge-a', anthropic);
      assert.equal(fakeAnswer(rubric, 0, 'judge-a', anthropic), first);
      assert.deepEqual(scoresOf(fakeAnswer(rubric, 0, 'judge-a', openai)), scoresOf(first));
      for (const dimension of rubric.dimensions) {
        assert.ok(allowedScores(dimension).includes(scoresOf(first)[dimension.name]!));
      }
    }
  });

  test('two models agree on some transcripts and differ on others; the seed changes the levels', () => {
    let same = 0;
    let differ = 0;
    let seedMoved = 0;
    for (let i = 0; i < 60; i += 1) {
      const prompt = prompts(i).openai;
      const a = fakeAnswer(rubric, 0, 'claude-opus-4-7', prompt);
      const b = fakeAnswer(rubric, 0, 'gpt-5.1', prompt);
      if (JSON.stringify(scoresOf(a)) === JSON.stringify(scoresOf(b))) {
        same += 1;
      } else {
        differ += 1;
      }
      if (fakeAnswer(rubric, 7, 'gpt-5.1', prompt) !== b) seedMoved += 1;
    }
    assert.ok(same > 0, `no transcript scored alike by both (${differ} differ)`);
    assert.ok(differ > 0, `every transcript scored alike by both (${same})`);
    assert.ok(seedMoved > 0, 'the seed changed nothing');
  });

  test('--port P: Anthropic on P, OpenAI on P + 1', async (t) => {
    // a port found free may be taken by another process before it is used: try another then
    for (let attempt = 1; ; attempt += 1) {
      const probe = await startFakeApi({ rubric: RUBRIC_FILE, seed: 0 });
      const free = Number(new URL(probe.anthropic.url).port);
      await probe.close();

      try {
        const api = await startFakeApi({ rubric: RUBRIC_FILE, seed: 0, port: free });
        t.after(() => api.close());
        assert.equal(api.anthropic.url, `http://127.0.0.1:${free}`);
        assert.equal(api.openai.url, `http://127.0.0.1:${free + 1}/v1`);
        return;
      } catch (error) {
        const inUse = (error as NodeJS.ErrnoException).code === 'EADDRINUSE';
        if (!inUse || attempt === 5) throw error;
      }
    }
  });

  test('a bad --port is refused naming the flag, exit 2', async () => {
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', path.join(REPO, 'fakes', 'serve.ts'), '--port', 'eighty'],
      { cwd: REPO, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let stderr = '';
    child.stderr.on('data', (chunk) => {
      stderr += chunk;
    });
    const code = await new Promise((resolve) => child.on('close', resolve));
    assert.equal(code, 2);
    assert.match(stderr, /--port eighty: give a port from 1 to 65534/);
  });
});
