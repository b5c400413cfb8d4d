// run-judge.ts's map holds: every call goes down the file, and the table of contents at its head
// names the section banners, in order.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { createRequire } from 'node:module';
import { test } from 'node:test';
import type * as TS from 'typescript5';

// typescript 7, which type-checks the project, has no JavaScript API: typescript 5's reads the
// file. Required, not imported: through tsx's ESM loader it loads in twice the time.
const ts = createRequire(import.meta.url)('typescript5') as typeof TS;

const source = fs.readFileSync(new URL('../run-judge.ts', import.meta.url), 'utf8');

/**
 * Each top-level function or class used by a top-level statement below it, as "user -> used".
 * A use is the function's or class's name anywhere but in a type or an `extends` (a call, a `new`,
 * an `instanceof`, a callback passed on), or a call of any top-level name (a constant holding a
 * function). The file's last statement, the `if` that starts main, may use what is above it.
 */
function upwardCalls(text: string): string[] {
  const file = 'run-judge.ts';
  const sourceFile = ts.createSourceFile(file, text, ts.ScriptTarget.ES2022, true);
  const host = ts.createCompilerHost({});
  host.getSourceFile = (name) => (name === file ? sourceFile : undefined);
  const options = { noLib: true, noResolve: true, types: [] };
  const checker = ts.createProgram([file], options, host).getTypeChecker();
  const statements = [...sourceFile.statements];
  const topLevel = (node: TS.Node): TS.Node => {
    return ts.isSourceFile(node.parent) ? node : topLevel(node.parent);
  };
  const nameOf = (statement: TS.Node) => {
    if (ts.isVariableStatement(statement)) {
      return statement.declarationList.declarations[0]!.name.getText();
    }
    return (statement as TS.DeclarationStatement).name?.getText() ?? 'the last statement';
  };

  const found = new Set<string>();
  const last = statements.at(-1);
  const checked = last && ts.isIfStatement(last) ? statements.slice(0, -1) : statements;
  for (const [index, statement] of checked.entries()) {
    const visit = (node: TS.Node): void => {
      if (ts.isTypeNode(node) || ts.isHeritageClause(node)) return;
      // a property's name (`x.name`) is never a top-level name, and resolving one types `x`
      const property = ts.isPropertyAccessExpression(node.parent) && node.parent.name === node;
      if (ts.isIdentifier(node) && !property) {
        const shorthand = ts.isShorthandPropertyAssignment(node.parent);
        const symbol = shorthand
          ? checker.getShorthandAssignmentValueSymbol(node.parent)
          : checker.getSymbolAtLocation(node);
        const declaration = symbol?.declarations?.[0];
        const called =
          (ts.isCallExpression(node.parent) || ts.isNewExpression(node.parent)) &&
          node.parent.expression === node;
        const callable =
          declaration !== undefined &&
          (ts.isFunctionDeclaration(declaration) ||
            ts.isClassDeclaration(declaration) ||
            (ts.isVariableDeclaration(declaration) && called));
        if (callable && statements.indexOf(topLevel(declaration) as TS.Statement) < index) {
          found.add(`${nameOf(statement)} -> ${node.text}`);
        }
      }
      ts.forEachChild(node, visit);
    };
    visit(statement);
  }
  return [...found];
}

/**
 * Where the table of contents (the head's "N. Title" lines) and the banners ("// ---- N. Title
 * ----") disagree; the sections must be numbered 1, 2, 3... in order.
 */
function tocMismatches(text: string): string[] {
  const head = text.slice(0, text.search(/^import /m));
  const table = [...head.matchAll(/^\/\/ +(\d+\. .+)$/gm)].map((match) => match[1]);
  const bannerLines = text.split('\n').filter((line) => line.startsWith('// ----'));
  const banners = bannerLines.map((line) => /^\/\/ ---- (\d+\. .+?) -+$/.exec(line)?.[1] ?? line);

  const found: string[] = [];
  const count = Math.max(table.length, banners.length);
  for (let i = 0; i < count; i++) {
    const listed = table[i];
    const banner = banners[i];
    if (listed !== banner) {
      found.push(`table: ${listed ?? '(nothing)'}; banner: ${banner ?? '(nothing)'}`);
    } else if (!banner!.startsWith(`${i + 1}. `)) {
      found.push(`section ${banner} is number ${i + 1}`);
    }
  }
  return found;
}

/** The source with `code` inserted before its last statement. */
function plantedAtEnd(code: string): string {
  const at = source.lastIndexOf('\nif (isEntryModule(');
  assert.ok(at > 0, 'run-judge.ts ends with the if that starts main');
  return `${source.slice(0, at)}\n${code}\n${source.slice(at)}`;
}

test('run-judge.ts: every call goes down the file', () => {
  assert.deepEqual(upwardCalls(source), []);
});

test('run-judge.ts: the table of contents matches the section banners', () => {
  assert.match(source, /^\/\/ ---- 1\. /m);
  assert.deepEqual(tocMismatches(source), []);
});

test('the check finds a call up, a new up and a callback passed up', () => {
  const planted = plantedAtEnd(
    [
      'function plantedCall(): string {',
      "  return pairKey('task', 'model');",
      '}',
      'function plantedNew(): unknown {',
      "  return new EvalInputError('x');",
      '}',
      'function plantedCallback(items: string[]): string[] {',
      '  return items.map(oneLine);',
      '}',
    ].join('\n'),
  );

  assert.deepEqual(upwardCalls(planted), [
    'plantedCall -> pairKey',
    'plantedNew -> EvalInputError',
    'plantedCallback -> oneLine',
  ]);
});

test('the check counts no type, no constant, no recursion and no local name', () => {
  const planted = plantedAtEnd(
    [
      'function plantedOthers(n: number, pairKey: (n: number) => number): RunSummary | number {',
      '  const concurrency: typeof DEFAULTS.concurrency = DEFAULTS.concurrency;',
      '  return n > 0 ? plantedOthers(n - 1, pairKey) + pairKey(concurrency) : 0;',
      '}',
    ].join('\n'),
  );

  assert.deepEqual(upwardCalls(planted), []);
});

test('the check finds a banner the table does not list', () => {
  const renamed = source.replace(/^\/\/ ---- 2\. /m, '// ---- 2. Renamed: ');
  assert.notEqual(renamed, source);

  const [mismatch, ...more] = tocMismatches(renamed);
  assert.match(mismatch ?? '', /^table: 2\. .*; banner: 2\. Renamed: /);
  assert.deepEqual(more, []);
});

test('the check finds sections numbered out of order, the table agreeing', () => {
  const renumbered = source
    .replace(/^\/\/ {3}3\. /m, '//   9. ')
    .replace(/^\/\/ ---- 3\. /m, '// ---- 9. ');
  assert.equal(renumbered.length, source.length);

  const found = tocMismatches(renumbered);
  assert.equal(found.length, 1, found.join('\n'));
  assert.match(found[0]!, /^section 9\. .* is number 3$/);
});
