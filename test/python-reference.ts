// The Python cross-checks of test/reference/ run once for all of them, their output kept under node_modules/.cache
// keyed by everything it depends on: each file of test/reference/ (the scripts, bootstrap.py, the data sets), the
// interpreter's version and the versions of the libraries they use. Change any of those and the scripts run again;
// RJ_REFERENCE_CACHE=0 runs them regardless. The scripts are deterministic (the bootstrap is seeded), so a cached
// output is the output they would print.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

export const PYTHON = '/usr/bin/python3';
const REFERENCE_DIR = fileURLToPath(new URL('./reference/', import.meta.url));
const CACHE_DIR = fileURLToPath(new URL('../node_modules/.cache/run-judge-test/', import.meta.url));
const LIBRARIES = ['numpy', 'scipy', 'scikit-learn', 'nltk'];
/** The modules the scripts import, checked without importing them (an import costs a second). */
const MODULES = ['numpy', 'scipy', 'sklearn', 'nltk'];

/** What one script did: its exit status, stdout and stderr, as spawnSync would report them. */
export interface ScriptRun {
  status: number;
  stdout: string;
  stderr: string;
}

/** Runs each script in one interpreter, in turn, as `python3 script` would (its own argv, __main__, stdout). */
const RUNNER = String.raw`
import contextlib, io, json, runpy, sys, traceback
out = {}
for script in json.load(sys.stdin):
    stdout, stderr = io.StringIO(), io.StringIO()
    status = 0
    sys.argv = [script]
    saved_path = list(sys.path)
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            runpy.run_path(script, run_name="__main__")
        except SystemExit as exit:
            status = exit.code if isinstance(exit.code, int) else (0 if exit.code is None else 1)
        except BaseException:
            traceback.print_exc()
            status = 1
    sys.path[:] = saved_path
    out[script] = {"status": status, "stdout": stdout.getvalue(), "stderr": stderr.getvalue()}
json.dump(out, sys.stdout)
`;

const PROBE = String.raw`
import importlib.metadata as metadata, importlib.util as util, json, sys
def version(name):
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None
json.dump({"python": sys.version, "missing": [m for m in ${JSON.stringify(MODULES)} if util.find_spec(m) is None],
           "versions": {name: version(name) for name in ${JSON.stringify(LIBRARIES)}}}, sys.stdout)
`;

let probed: { missing: string[]; key: string } | null | undefined;

/** The interpreter's state: null without /usr/bin/python3; which modules are missing; the cache key. */
function probe(): { missing: string[]; key: string } | null {
  if (probed !== undefined) return probed;
  if (!fs.existsSync(PYTHON)) return (probed = null);
  const run = spawnSync(PYTHON, ['-c', PROBE], { encoding: 'utf8' });
  if (run.status !== 0) throw new Error(`${PYTHON} failed to report its libraries: ${run.stderr}`);
  const state = JSON.parse(run.stdout) as { missing: string[] };
  const hash = createHash('sha256').update(run.stdout);
  for (const name of fs.readdirSync(REFERENCE_DIR).sort()) {
    const file = path.join(REFERENCE_DIR, name);
    if (!fs.statSync(file).isFile()) continue;
    hash.update(`\0${name}\0`).update(fs.readFileSync(file));
  }
  hash.update(RUNNER);
  return (probed = { missing: state.missing, key: hash.digest('hex').slice(0, 32) });
}

/** Why the cross-checks cannot run here (false when they can): no /usr/bin/python3, or a library missing. */
export function referenceSkip(): string | false {
  const state = probe();
  if (state === null) return `no ${PYTHON}`;
  if (state.missing.length) return `no ${state.missing.join(', ')} for ${PYTHON}`;
  return false;
}

let runs: Record<string, ScriptRun> | undefined;

/** What `python3 test/reference/<name>` prints: every script of test/reference/ named *-reference.py run at once. */
export function referenceRun(name: string): ScriptRun {
  if (!runs) {
    const state = probe();
    if (state === null) throw new Error(`no ${PYTHON}`);
    const cached = path.join(CACHE_DIR, `reference-${state.key}.json`);
    if (process.env.RJ_REFERENCE_CACHE !== '0' && fs.existsSync(cached)) {
      runs = JSON.parse(fs.readFileSync(cached, 'utf8')) as Record<string, ScriptRun>;
    } else {
      const scripts = fs
        .readdirSync(REFERENCE_DIR)
        .filter((file) => file.endsWith('-reference.py'));
      const run = spawnSync(PYTHON, ['-c', RUNNER], {
        input: JSON.stringify(scripts.sort().map((file) => path.join(REFERENCE_DIR, file))),
        encoding: 'utf8',
        maxBuffer: 64 * 1024 * 1024,
      });
      if (run.status !== 0) throw new Error(`the reference scripts did not run: ${run.stderr}`);
      const byPath = JSON.parse(run.stdout) as Record<string, ScriptRun>;
      runs = Object.fromEntries(
        Object.entries(byPath).map(([file, r]) => [path.basename(file), r]),
      );
      if (Object.values(runs).every((r) => r.status === 0)) {
        // Only a clean run is kept: a failure shows again next time, with whatever changed since.
        fs.mkdirSync(CACHE_DIR, { recursive: true });
        const temp = `${cached}.${process.pid}.tmp`;
        fs.writeFileSync(temp, JSON.stringify(runs));
        fs.renameSync(temp, cached);
      }
    }
  }
  const run = runs[name];
  if (!run) throw new Error(`no script test/reference/${name}`);
  return run;
}
