#!/usr/bin/env node
// `npx run-judge` from a checkout: run-judge.ts through tsx, in this one process (so signals reach it directly).
import { register } from 'tsx/esm/api';

register();
const { ignoreClosedPipes, main } = await import('../run-judge.ts');
ignoreClosedPipes([process.stdout, process.stderr]);
process.exitCode = await main(process.argv.slice(2), process);
