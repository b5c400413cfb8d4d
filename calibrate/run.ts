// calibrate/run.ts: `npm run calibrate`, the error rates of the report's intervals and verdicts
// measured on seeded simulated studies, each beside the target the report states. The same seed
// gives the same table. `--fast` runs the smaller count that `npm test` asserts.
import * as fs from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { isEntryModule } from '../run-judge.ts';
import type { CalibrationCheck } from './types.ts';

export const SEED = 20261206;

/** Every check of every module in this folder, in the modules' name order. */
export async function loadChecks(): Promise<CalibrationCheck[]> {
  const dir = fileURLToPath(new URL('.', import.meta.url));
  const names = fs
    .readdirSync(dir)
    .filter((name) => name.endsWith('.ts'))
    .filter((name) => name !== 'run.ts' && name !== 'types.ts')
    .sort();

  const checks: CalibrationCheck[] = [];
  for (const name of names) {
    const module = (await import(pathToFileURL(`${dir}/${name}`).href)) as {
      checks: CalibrationCheck[];
    };
    checks.push(...module.checks);
  }
  return checks;
}

function percent(rate: number): string {
  return `${(rate * 100).toFixed(1)}%`;
}

async function main(argv: string[]): Promise<number> {
  const fast = argv.includes('--fast');
  const checks = await loadChecks();
  let failed = 0;

  for (const check of checks) {
    const studies = fast ? check.fastStudies : check.studies;
    const result = check.run({ studies, seed: SEED });
    if (!result.pass) failed += 1;
    const mark = result.pass ? 'ok  ' : 'MISS';
    const detail = result.detail === undefined ? '' : `  (${result.detail})`;
    const line = `${mark} ${percent(result.rate).padStart(6)}  target ${check.target.padEnd(8)}`;
    process.stdout.write(`${line} ${check.name}, ${result.studies} studies${detail}\n`);
  }

  process.stdout.write(`${checks.length - failed} of ${checks.length} within target\n`);
  return failed === 0 ? 0 : 1;
}

if (isEntryModule(import.meta.url)) {
  process.exitCode = await main(process.argv.slice(2));
}
