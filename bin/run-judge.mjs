#!/usr/bin/env node
// `npx run-judge` from a checkout: run-judge.ts through tsx, in this one process (so signals reach it directly).
import { register } from 'tsx/esm/api';

register();
const { guardOutputStreams, main } = await import('../run-judge.ts');
guardOutputStreams('run-judge', process);
process.exitCode = await main(process.argv.slice(2), process);
