// Parsing stage: a judge answer becomes a verdict only when it is exactly right; everything else is an EvalJudgeResponseError.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  DIMENSIONS,
  RUBRIC_FILE,
  answerJson,
  goodScores,
  mentioning,
  readLog,
  rowCount,
  rubricFile,
  setup,
} from './helpers.ts';
import type { JudgeAnswer } from '../run-judge.ts';

// Destructured, not imported by name: a renamed export then fails its own tests, not the whole file.
const { loadRubric, parseJudgeResponse, verdictFromAnswer } = await import('../run-judge.ts');

const rubric = loadRubric(RUBRIC_FILE);
const fence = (json: string, label = 'json') => `\`\`\`${label}\n${json}\n\`\`\``;
/** 100,000 nested arrays, or objects: JSON.parse reads them, but anything recursive over them overflows the stack. */
const DEEP_ARRAY = `${'['.repeat(100_000)}${']'.repeat(100_000)}`;
const DEEP_OBJECT = `${'{"a":'.repeat(100_000)}1${'}'.repeat(100_000)}`;
/** The JSON text of `value` with `raw` written in place of its string "RAW": a score token, or a deep value. */
const withRaw = (value: Record<string, unknown>, raw: string, space?: number) =>
  JSON.stringify(value, null, space).replace('"RAW"', raw);
/** A good answer whose error_diagnosis score is written as `raw`. */
const withScore = (raw: string, space?: number) =>
  withRaw({ scores: goodScores({ error_diagnosis: 'RAW' }), notes: 'x' }, raw, space);
/** The answer rejected, with a message matching every pattern. */
const assertRejected = (text: string, ...patterns: RegExp[]) =>
  assert.throws(
    () => parseJudgeResponse(text, rubric),
    (error: Error) => {
      assert.equal(error.name, 'EvalJudgeResponseError');
      for (const pattern of patterns) assert.match(error.message, pattern);
      return true;
    },
  );

describe('parseJudgeResponse: accepted answers', () => {
  const expected = { scores: goodScores({ error_diagnosis: 1, student_agency: 0 }), notes: 'fine' };
  const json = answerJson(expected.scores);
  const accepted: [string, string][] = [
    ['plain JSON', json],
    ['plain JSON with surrounding whitespace', `\n\n  ${json}  \n\t`],
    [
      'a ```json fence with prose around it',
      `Here are my scores:\n${fence(json)}\nHope this helps.`,
    ],
    ['an unlabelled ``` fence', fence(json, '')],
    ['a ```json fence opening after prose on the same line', `Here you go: ${fence(json)}`],
    [
      'scores written with a ".0" fraction (2.0) as integers',
      JSON.stringify(expected).replace(/(\d)(?=[,}])/g, '$1.0'),
    ],
    [
      'extra top-level keys, which are dropped',
      JSON.stringify({ ...expected, confidence: 0.9, reasoning: ['a'] }),
    ],
    ...[DEEP_ARRAY, DEEP_OBJECT].map((deep, i): [string, string] => [
      `an extra top-level key holding 100,000 nested ${i ? 'objects' : 'arrays'}, which is dropped`,
      withRaw({ ...expected, extra: 'RAW' }, deep),
    ]),
  ];
  for (const [label, text] of accepted) {
    test(label, () => {
      assert.deepEqual(parseJudgeResponse(text, rubric), expected);
    });
  }

  test('plain JSON whose notes hold backticks and fences is read as plain JSON first', () => {
    const notes = 'the tutor wrote ```python\nx = 1\n``` and `inline` code; ```\n{} \n```';
    assert.deepEqual(parseJudgeResponse(answerJson(expected.scores, notes), rubric), {
      scores: expected.scores,
      notes,
    });
  });

  test('the allowed scores come from the rubric: a dimension with scores {0, 1} rejects 2', (t) => {
    const small = loadRubric(
      rubricFile(t, (rubricJson) => delete rubricJson.dimensions[0]!.scores['2']),
    );
    const verdict = parseJudgeResponse(
      answerJson(goodScores({ mathematical_correctness: 1 })),
      small,
    );
    assert.equal(verdict.scores.mathematical_correctness, 1);
    assert.throws(() => parseJudgeResponse(answerJson(goodScores()), small), {
      name: 'EvalJudgeResponseError',
      message: /mathematical_correctness/,
    });
  });
});

describe('parseJudgeResponse: a fenced answer whose notes quote code', () => {
  // The judge quotes the student's code in its notes; the fence must end at its own closing line, not inside the string.
  const notes = 'the student wrote ```python\nx=1\n``` and then ```\nprint(x)\n```';
  const scores = goodScores({ proof_scaffolding: 0 });
  const answer = JSON.stringify({ scores, notes });
  const pretty = JSON.stringify({ scores, notes }, null, 2);

  for (const [label, text] of [
    ['a ```json fence, one line', fence(answer)],
    [
      'an unlabelled fence, pretty-printed, with prose around it',
      `My verdict:\n${fence(pretty, '')}\nDone.`,
    ],
    ['a ```json fence opening after prose on the same line', `Here you go: ${fence(answer)}`],
    [
      'a pretty-printed fence opening after prose on the same line',
      `My verdict: ${fence(pretty)}\nDone.`,
    ],
  ]) {
    test(`${label}: parses to the verdict with the notes intact`, () => {
      assert.deepEqual(parseJudgeResponse(text!, rubric), { scores, notes });
    });
  }

  test('two separate fenced JSON blocks, one quoting code, are still rejected', () => {
    assertRejected(`${fence(answer)}\nor rather\n${fence(answerJson())}`, /fence/);
  });

  test('prose quoting code in a fence, with no JSON, is still rejected', () => {
    assertRejected('The student wrote:\n```python\nx = 1\n```\nso I cannot score this.', /JSON/);
  });
});

describe('parseJudgeResponse: rejected answers say what is wrong', () => {
  const good = answerJson();
  const cases: [string, string, RegExp[]][] = [
    ['empty', '', [/empty/]],
    ['whitespace only', ' \n\t ', [/empty/]],
    ['prose only', 'The tutor did well overall.', [/not JSON/, /no Markdown JSON fence/]],
    [
      'JSON embedded in prose without a fence',
      `Here are the scores: ${good} Thanks!`,
      [/not JSON/, /no Markdown JSON fence/],
    ],
    ['truncated plain JSON', good.slice(0, 60), [/not JSON/]],
    [
      'truncated fenced JSON (fence closed)',
      fence(good.slice(0, 60)),
      [/fenced block is not valid JSON/],
    ],
    ['truncated fenced JSON (fence cut off)', `\`\`\`json\n${good.slice(0, 60)}`, [/not JSON/]],
    [
      'scores as strings',
      answerJson(goodScores({ error_diagnosis: '2' })),
      [/scores\.error_diagnosis/, /"2"/],
    ],
    [
      'out of range 3',
      answerJson(goodScores({ student_agency: 3 })),
      [/scores\.student_agency/, /got 3\b/],
    ],
    [
      'out of range -1',
      answerJson(goodScores({ student_agency: -1 })),
      [/scores\.student_agency/, /got -1\b/],
    ],
    [
      'fractional 1.5',
      answerJson(goodScores({ proof_scaffolding: 1.5 })),
      [/scores\.proof_scaffolding/, /1\.5/],
    ],
    [
      'a missing dimension',
      answerJson(goodScores({ integrity_boundary: undefined })),
      [/scores\.integrity_boundary/],
    ],
    ['an unknown dimension', answerJson(goodScores({ elegance: 2 })), [/unknown/, /"elegance"/]],
    ['notes not a string', answerJson(goodScores(), 5), [/notes/, /string/]],
    ['scores missing', JSON.stringify({ notes: 'x' }), [/scores/]],
    ['two fences', `${fence(good)}\nand\n${fence(good)}`, [/2 Markdown fences/]],
    ['an array at top level', JSON.stringify([JSON.parse(good)]), [/top level/, /array/]],
    ['a bare number', '2', [/top level/]],
    ['100,000 nested arrays', DEEP_ARRAY, [/top level/, /array/]],
    ['100,000 nested objects', DEEP_OBJECT, [/scores/, /notes/]],
    [
      'notes of 100,000 nested arrays',
      withRaw({ scores: goodScores(), notes: 'RAW' }, DEEP_ARRAY),
      [/notes/, /string/],
    ],
    ['a score of 100,000 nested arrays', withScore(DEEP_ARRAY), [/scores\.error_diagnosis/]],
  ];
  for (const [label, text, patterns] of cases) {
    test(label, () => assertRejected(text, ...patterns));
  }
});

describe('parseJudgeResponse: a score counts only when the answer writes it as an integer', () => {
  // JSON.parse reads each of these as an allowed score (2, 2, 2, 0); 2.5 is no allowed score at all.
  const inexact = ['1.9999999999999999', '2.0000000000000001', '2e0', '-0', '2.5'];
  const forms: [string, (token: string) => string][] = [
    ['plain JSON', (token) => withScore(token)],
    ['pretty-printed in a ```json fence', (token) => `Scores:\n${fence(withScore(token, 2))}`],
  ];
  for (const token of inexact) {
    for (const [form, write] of forms) {
      test(`${token} is rejected, naming the token (${form})`, () => {
        assertRejected(write(token), mentioning(token));
      });
    }
  }

  test('a score-like text inside the notes is no score: the answer is accepted with its notes intact', () => {
    for (const notes of [
      'I first wrote "scores": {"x": 1.5}',
      '{"scores": {"error_diagnosis": 2e0, "x": -0}}',
    ]) {
      for (const text of [
        answerJson(goodScores(), notes),
        fence(JSON.stringify({ scores: goodScores(), notes }, null, 2)),
      ])
        assert.deepEqual(parseJudgeResponse(text, rubric), { scores: goodScores(), notes }, text);
    }
  });
  test('a "scores" key written with a \\u escape is still the scores: its inexact token is rejected', () => {
    const text = withScore('1.9999999999999999').replace('"scores"', '"sc\\u006fres"');
    assert.ok(text.includes('sc\\u006fres'), text);
    assertRejected(text, mentioning('1.9999999999999999'));
  });

  test('a nested object holding "scores" is not the scores: an extra key like it is dropped, the answer accepted', () => {
    const draft = '"draft": {"scores": {"x": 1.5}}';
    const scores = `"scores": ${JSON.stringify(goodScores())}`;
    for (const text of [
      `{${scores}, "notes": "x", ${draft}}`,
      `{${draft}, ${scores}, "notes": "x"}`,
    ]) {
      assert.deepEqual(
        parseJudgeResponse(text, rubric),
        { scores: goodScores(), notes: 'x' },
        text,
      );
    }
  });
});

describe('parseJudgeResponse: a repeated key is rejected, naming it', () => {
  // JSON.parse would silently keep the last value: a contradictory answer must not become a score.
  const dimensionsJson = DIMENSIONS.map((d) => `"${d}": 2`).join(', ');
  const topLevel: [string, string, string][] = [
    [
      'a dimension repeated inside "scores"',
      `{"scores": {${dimensionsJson}, "mathematical_correctness": 0}, "notes": "x"}`,
      'mathematical_correctness',
    ],
    [
      '"notes" repeated at the top level',
      `{"scores": {${dimensionsJson}}, "notes": "good", "notes": "bad"}`,
      'notes',
    ],
    [
      '"scores" repeated at the top level',
      `{"scores": {${dimensionsJson}}, "notes": "x", "scores": {${dimensionsJson}}}`,
      'scores',
    ],
    [
      'a dimension repeated through a \\u escape',
      `{"scores": {${dimensionsJson}, "mathematical_corre\\u0063tness": 0}, "notes": "x"}`,
      'mathematical_correctness',
    ],
  ];
  for (const [label, text, key] of topLevel) {
    test(`${label}, plain or in a Markdown fence`, () => {
      assert.equal(typeof JSON.parse(text), 'object', 'the text is valid JSON');
      for (const answer of [text, `Scores:\n${fence(text)}`])
        assertRejected(answer, new RegExp(`"${key}"`), /repeat/);
    });
  }

  /** An answer carrying `json` as an extra top-level key, which the schema ignores: only the duplicate check can refuse it. */
  const carrying = (json: string) =>
    `{"scores": {${dimensionsJson}}, "notes": "fine", "extra": ${json}}`;

  const repeated: [string, string, RegExp][] = [
    ['after a nested object closes', '{"a": {"b": 1, "c": {}}, "a": 2}', /"a"/],
    ['after nested arrays close', '{"x": [1, [2, {"y": 3}]], "z": {}, "x": null}', /"x"/],
    ['inside a nested object', '{"outer": {"k": 1, "k": 2}}', /"k"/],
    ['after a value that is an escaped backslash', '{"a": "\\\\", "a": 1}', /"a"/],
    ['spelt with a \\u escape ("\\u0041" is "A")', '{"A": 1, "\\u0041": 2}', /"A"/],
    ['"notes" spelt with a \\u escape', '{"notes": "x", "n\\u006ftes": "y"}', /"notes"/],
    ['holding an escaped quote, spelt two ways', '{"a\\"b": 1, "a\\u0022b": 2}', /a\\?"b/],
  ];
  for (const [label, json, key] of repeated) {
    test(`a key repeated ${label} is found`, () => {
      assertRejected(carrying(json), key, /repeat/);
    });
  }

  const distinct: [string, string][] = [
    ['the same key in nested and sibling objects', '{"a": {"x": 1}, "b": {"x": 2, "y": {"x": 3}}}'],
    ['the same key in objects of an array', '[{"a": 1}, {"a": 2}]'],
    ['the same key at several depths of arrays', '{"a": [{"a": 1}, {"a": [1, {"a": 2}]}], "b": 1}'],
    ['"scores" and "notes" inside a nested object', '{"scores": 1, "notes": 2}'],
    ['an empty object', '{}'],
    ['a plain string', '"just a string"'],
    ['a string value equal to a later key', '{"a": "b", "b": 1}'],
    [
      'quotes and braces inside a string',
      '{"note": "say \\"note\\": again, {\\"note\\": 1}", "x": 1}',
    ],
    ['an escaped backslash ending a string', '{"a": "\\\\", "b": "}, \\"a\\": 1"}'],
    ['escaped quotes and brackets inside strings', '{"a": "x,\\"a\\"", "c": "[{\\"a\\": 2}]"}'],
    ['keys that differ only in case ("\\u0061" is "a", not "A")', '{"A": 1, "\\u0061": 2}'],
  ];
  for (const [label, json] of distinct) {
    test(`not a repeat: ${label}`, () => {
      assert.deepEqual(parseJudgeResponse(carrying(json), rubric), {
        scores: goodScores(),
        notes: 'fine',
      });
    });
  }
});

describe('verdictFromAnswer: only a finished turn is a usable answer', () => {
  const answer = (overrides: Partial<JudgeAnswer>): JudgeAnswer => ({
    judge: 'judge-x',
    text: answerJson(),
    stopReason: 'end_turn',
    usage: { input_tokens: 1, output_tokens: 1 },
    latencyMs: 1,
    ...overrides,
  });

  for (const stopReason of ['end_turn', 'stop_sequence']) {
    test(`stop_reason "${stopReason}" with a good answer becomes a verdict`, () => {
      assert.deepEqual(verdictFromAnswer(answer({ stopReason }), rubric), {
        scores: goodScores(),
        notes: 'fine',
      });
    });
  }

  for (const stopReason of [
    'max_tokens',
    'pause_turn',
    'tool_use',
    'refusal',
    'model_context_window_exceeded',
    null,
  ]) {
    test(`stop_reason ${JSON.stringify(stopReason)} is unusable although the text parses; the raw text is kept`, () => {
      assert.deepEqual(
        parseJudgeResponse(answerJson(), rubric).scores,
        goodScores(),
        'the text alone would be a verdict',
      );
      assert.throws(() => verdictFromAnswer(answer({ stopReason }), rubric), {
        name: 'EvalJudgeResponseError',
        message: mentioning('judge-x', String(stopReason)),
        judge: 'judge-x',
        rawText: answerJson(),
      });
    });
  }

  test('a parse failure is re-raised naming the judge and keeping the raw text', () => {
    assert.throws(() => verdictFromAnswer(answer({ text: 'no idea' }), rubric), {
      name: 'EvalJudgeResponseError',
      message: mentioning('judge-x', 'not JSON'),
      judge: 'judge-x',
      rawText: 'no idea',
    });
  });
});

describe("a judge answer nested 100,000 levels deep is that attempt's failure: the fallback judge scores", () => {
  // Answers whose body is not JSON, or whose content is [null], are covered in judge.test.ts.
  const message = (content: string) =>
    withRaw(
      { type: 'message', role: 'assistant', content: 'RAW', stop_reason: 'end_turn' },
      content,
    );
  const BODIES: [string, string][] = [
    ['a body of nested arrays', DEEP_ARRAY],
    ['a body of nested objects', DEEP_OBJECT],
    ['a message whose content is nested arrays', message(DEEP_ARRAY)],
    [
      'a message whose text block holds nested arrays instead of a string',
      message(`[{"type": "text", "text": ${DEEP_ARRAY}}]`),
    ],
    [
      'a message whose answer text is nested arrays',
      message(JSON.stringify([{ type: 'text', text: DEEP_ARRAY }])),
    ],
  ];
  for (const [label, body] of BODIES) {
    test(`${label}: no crash, no stack trace; judge-b scores`, async (t) => {
      const { fake, ws, run } = await setup(
        t,
        {
          responder: (req) =>
            req.body?.model === 'judge-a' ? { kind: 'raw', status: 200, body } : undefined,
        },
        { models: 1, tasks: ['proof01'] },
      );
      const result = await run();
      assert.equal(result.code, 0, result.stderr);
      assert.doesNotMatch(result.stderr, /^\s+at /m, 'no stack trace');
      assert.deepEqual(
        fake.requests.map((req) => req.body?.model),
        ['judge-a', 'judge-b'],
      );
      const [entry, ...more] = readLog(ws.log);
      assert.deepEqual([entry!.status, entry!.judge, more.length], ['scored', 'judge-b', 0]);
      assert.deepEqual(
        entry!.attempts.map((attempt) => attempt.judge),
        ['judge-a'],
      );
      assert.match(entry!.attempts[0]!.error, /^Eval\w+Error$/);
      assert.match(
        result.stderr,
        /^m01\/proof01: scored by fallback judge judge-b after judge judge-a: /m,
      );
      assert.equal(rowCount(ws.output), 1);
    });
  }
});
