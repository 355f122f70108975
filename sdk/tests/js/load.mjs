// Evaluates the JavaScript SDK (sdk/js/weir.js) on Node, outside a
// component, as build.mjs bundles it: each `import { a, b as c } from '...'`
// is replaced by the fake of the local name, and `globals` (by name)
// shadow what the module reads of its engine, e.g. `globalThis`,
// `TextEncoder` and `TextDecoder`. Returns the module's `weir`.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

const source = readFileSync(new URL('../../js/weir.js', import.meta.url), 'utf8');

export function loadWeir(fakes, globals = {}) {
  const locals = [];
  const body = source.replace(/import\s*\{([^}]*)\}\s*from\s*'[^']+';/g, (_, names) => {
    for (const n of names.split(',').map((s) => s.trim()).filter(Boolean)) locals.push(n.split(/\s+as\s+/).pop());
    return '';
  });
  for (const n of locals) assert.ok(n in fakes, `no fake for the import ${n}`);
  const names = [...Object.keys(globals), ...locals];
  const values = [...Object.values(globals), ...locals.map((n) => fakes[n])];
  return new Function(...names, `${body}\nreturn weir;`)(...values);
}
