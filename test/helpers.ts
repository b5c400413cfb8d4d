// Shared fixtures for test/core.test.ts: temp dirs, small valid inputs, judge configs and a fake per test.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { TestContext } from 'node:test';
import { FakeAnthropic } from './fake-anthropic.ts';
import type { FakeOptions } from './fake-anthropic.ts';
import type { JudgeConfig, ReferenceKey, Rubric, Task, Transcript } from '../run-judge.ts';

export const REPO = fileURLToPath(new URL('..', import.meta.url));
export const RUBRIC_FILE = path.join(REPO, 'rubric.json');
export const MODELS_FILE = path.join(REPO, 'models.json');
export const RUN_JUDGE_FILE = path.join(REPO, 'run-judge.ts');

/** Where the SDK points when no fake is running: a closed loopback port, so nothing can reach the internet. */
export const DEAD_BASE_URL = 'http://127.0.0.1:9';

export const DIMENSIONS = [
  'mathematical_correctness', 'proof_scaffolding', 'error_diagnosis',
  'student_agency', 'proof_convention_alignment', 'integrity_boundary',
] as const;

export const EXPECTED_HEADER = 'task_id,model,mathematical_correctness,proof_scaffolding,error_diagnosis,student_agency,proof_convention_alignment,integrity_boundary,notes';

/** A fresh temp dir, removed after the test. */
export function tempDir(t: TestContext, prefix = 'rj-core-'): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

export function writeJson(file: string, value: unknown): string {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, typeof value === 'string' ? value : JSON.stringify(value, null, 2));
  return file;
}

/** A valid rubric with every score class the shipped one has (a copy, so tests may change it). */
export function shippedRubricJson(): { dimensions: { name: string; description: string; scores: Record<string, string> }[] } {
  return JSON.parse(fs.readFileSync(RUBRIC_FILE, 'utf8'));
}

/** A full set of valid scores (2 everywhere), overridable per dimension. */
export function goodScores(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return { ...Object.fromEntries(DIMENSIONS.map((d) => [d, 2])), ...overrides };
}

export function answerJson(scores: Record<string, unknown> = goodScores(), notes: unknown = 'fine'): string {
  return JSON.stringify({ scores, notes });
}

export function makeTask(overrides: Partial<Task> = {}): Task {
  return {
    task_id: 'tX',
    topic: 'TOPIC-UNIQUE induction',
    student_level: 'LEVEL-UNIQUE first year',
    problem_statement: 'PROBLEM-UNIQUE Prove that 1 + ... + n = n(n+1)/2.',
    expected_behaviors: ['BEHAVIOUR-ONE asks for base case', 'BEHAVIOUR-TWO checks inductive step'],
    ...overrides,
  };
}

export function makeReferenceKey(overrides: Partial<ReferenceKey> = {}): ReferenceKey {
  return {
    task_id: 'tX',
    proof_skeleton: ['SKELETON-ONE base case n=1', 'SKELETON-TWO inductive step'],
    common_misconceptions: ['MISCONCEPTION-ONE assumes what is to be proved'],
    red_flags: ['REDFLAG-ONE writes the whole proof'],
    ...overrides,
  };
}

export function makeTranscript(overrides: Partial<Transcript> = {}): Transcript {
  return {
    messages: [
      { role: 'system', content: 'SYSTEM-UNIQUE you are a tutor' },
      { role: 'user', content: 'STUDENT-UNIQUE how do I start?' },
      { role: 'assistant', content: 'ASSISTANT-UNIQUE what is the base case?' },
    ],
    ...overrides,
  };
}

export function judgeConfig(overrides: Partial<JudgeConfig> = {}): JudgeConfig {
  return {
    provider: 'anthropic',
    model: 'claude-test-judge',
    api_key_env: 'RJ_TEST_KEY',
    temperature: null,
    max_tokens: 321,
    timeout_s: 5,
    ...overrides,
  };
}

export const TEST_KEY = 'sk-test-secret-key-123';
export const keyEnv = (extra: Record<string, string> = {}): NodeJS.ProcessEnv => ({ RJ_TEST_KEY: TEST_KEY, ...extra });

/** Starts a fake, points the SDK at it for this test, and closes it (restoring the dead URL) afterwards. */
export async function startFake(t: TestContext, opts: FakeOptions = {}): Promise<FakeAnthropic> {
  const fake = await FakeAnthropic.start({ dimensions: [...DIMENSIONS], ...opts });
  process.env.ANTHROPIC_BASE_URL = fake.url;
  t.after(async () => {
    process.env.ANTHROPIC_BASE_URL = DEAD_BASE_URL;
    await fake.close();
  });
  return fake;
}

export const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export type { Rubric };
