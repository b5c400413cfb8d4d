// calibrate/types.ts: what one calibration check is. Each module of this folder (but run.ts and
// this file) exports `checks`, the error rates it measures by seeded simulation beside the target
// the report states; `npm run calibrate` prints them all, test/calibrate.test.ts asserts the fast run.

/** How many simulated studies to run, and the seed they start from. */
export type CalibrationRun = { studies: number; seed: number };

/** One measured rate beside its target. */
export type CalibrationResult = {
  /** the measured rate, 0-1 */
  rate: number;
  /** the studies it was measured on */
  studies: number;
  /** whether the rate meets the target */
  pass: boolean;
  /** anything more the table should show (the setting, a second figure) */
  detail?: string;
};

export type CalibrationCheck = {
  /** what is measured, as the table prints it */
  name: string;
  /** the target as the table prints it, e.g. "<= 5%" */
  target: string;
  /** studies for `npm run calibrate` */
  studies: number;
  /** studies for the fast run in `npm test` */
  fastStudies: number;
  run(options: CalibrationRun): CalibrationResult;
};
