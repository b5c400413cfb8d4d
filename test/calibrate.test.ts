// The fast calibration run: every interval's and verdict's error rate, measured on seeded simulated
// studies (calibrate/), within the target the report states. `npm run calibrate` runs more studies.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SEED, loadChecks } from '../calibrate/run.ts';

const checks = await loadChecks();

for (const check of checks) {
  test(`calibration: ${check.name} (target ${check.target})`, () => {
    const result = check.run({ studies: check.fastStudies, seed: SEED });
    const measured = `${(result.rate * 100).toFixed(1)}% of ${result.studies} studies`;
    assert.ok(result.pass, `${check.name}: ${measured}, target ${check.target}`);
  });
}
