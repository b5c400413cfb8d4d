// Summarizes a V8 .cpuprofile (node --cpu-prof): where the process spent its CPU time.
// Usage: npx tsx test/bench/profile-summary.ts FILE.cpuprofile [TOP]
// Prints the top self-time functions, self time by where the code lives (run-judge.ts, the SDK, undici, node's
// internals, tsx, GC), each sample given to the innermost run-judge.ts function on its stack, and run-judge.ts's
// functions by inclusive time (their own time and all they call).
import * as fs from 'node:fs';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

const [file, topArg] = process.argv.slice(2);
if (!file) throw new Error('usage: profile-summary.ts FILE.cpuprofile [TOP]');
const top = Number(topArg ?? 10);
const profile = JSON.parse(fs.readFileSync(file, 'utf8')) as Profile;

const byId = new Map(profile.nodes.map((node) => [node.id, node]));
const parent = new Map<number, number>();
for (const node of profile.nodes)
  for (const child of node.children ?? []) parent.set(child, node.id);

/** Where a frame's code lives, as a short name. */
function place(frame: CallFrame): string {
  const url = frame.url;
  if (!url) return frame.functionName.startsWith('(') ? frame.functionName : '(native)';
  if (url.endsWith('/run-judge.ts')) return 'run-judge.ts';
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg) return pkg[1]!;
  if (url.startsWith('node:internal/deps/')) return `node:internal/deps/${url.split('/')[2]}`;
  if (url.startsWith('node:')) return url.split('/').slice(0, 2).join('/');
  return url.replace(/^file:\/\/\/work\/main\//, '');
}
const label = (frame: CallFrame) =>
  `${frame.functionName || '(anonymous)'} ${place(frame)}${frame.url && place(frame) !== 'run-judge.ts' ? `:${frame.lineNumber + 1}` : ''}`;

const self = new Map<string, number>();
const selfByPlace = new Map<string, number>();
const inclusive = new Map<string, number>();
/** Each sample's time, given to the innermost run-judge.ts function on its stack (else to where it ran). */
const attributed = new Map<string, number>();
let total = 0;
profile.samples.forEach((id, i) => {
  const ms = (profile.timeDeltas[i] ?? 0) / 1000;
  const node = byId.get(id)!;
  total += ms;
  self.set(label(node.callFrame), (self.get(label(node.callFrame)) ?? 0) + ms);
  const where = place(node.callFrame);
  selfByPlace.set(where, (selfByPlace.get(where) ?? 0) + ms);
  // Inclusive time of run-judge.ts's functions: each function on the sample's stack, once.
  const seen = new Set<string>();
  let innermost: string | undefined;
  for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
    const frame = byId.get(at)!.callFrame;
    if (place(frame) !== 'run-judge.ts') continue;
    const name = label(frame);
    innermost ??= name;
    if (seen.has(name)) continue;
    seen.add(name);
    inclusive.set(name, (inclusive.get(name) ?? 0) + ms);
  }
  const cause =
    innermost ??
    `outside run-judge.ts: ${label(node.callFrame).startsWith('(') ? label(node.callFrame) : where}`;
  attributed.set(cause, (attributed.get(cause) ?? 0) + ms);
});
const idle = self.get('(idle) (idle)') ?? 0;
const busy = total - idle;

const print = (title: string, map: Map<string, number>, n: number) => {
  console.log(title);
  for (const [name, ms] of [...map].sort((a, b) => b[1] - a[1]).slice(0, n))
    console.log(
      `  ${ms.toFixed(0).padStart(6)} ms ${((100 * ms) / busy).toFixed(1).padStart(5)}%  ${name}`,
    );
};
console.log(
  `${file}: ${total.toFixed(0)} ms sampled, ${idle.toFixed(0)} ms idle, ${busy.toFixed(0)} ms busy (shares below are of busy)`,
);
self.delete('(idle) (idle)');
selfByPlace.delete('(idle)');
print(`top ${top} self time, all code:`, self, top);
print('self time by where the code lives:', selfByPlace, 12);
const ownSelf = new Map([...self].filter(([name]) => name.endsWith(' run-judge.ts')));
print(`top ${top} self time, run-judge.ts's functions:`, ownSelf, top);
attributed.delete('outside run-judge.ts: (idle) (idle)');
print(
  `top ${top} causes: each sample given to the innermost run-judge.ts function on its stack (what it calls included):`,
  attributed,
  top,
);
print(`top ${top} inclusive time, run-judge.ts's functions:`, inclusive, top);
