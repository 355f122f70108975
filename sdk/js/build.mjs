#!/usr/bin/env node
// weir-build: builds a JavaScript operator into a component. The SDK
// (weir.js) and the operator module go in as one source (componentize-js
// takes one), through componentize-js against the `weir:operator` WIT.
//
// Usage: weir-build <app.js> <out.wasm> [--wit <dir>] [--aot [--weval <path>]]
//   (in the repository: node sdk/js/build.mjs <app.js> <out.wasm>)
//
// --aot compiles the operator's JavaScript ahead of time (componentize-js
// with weval): 1.4 to 2 times the interpreter's throughput on the
// word-count counter, for a larger component (about 20 MiB against 13) and
// a build of 20 to 45 s. weval is --weval, else WEIR_WEVAL, else the one
// componentize-js downloads from weval's GitHub releases.
//
// componentize-js is the pinned dependency of this package, or the one
// WEIR_COMPONENTIZE_JS names (its src/componentize.js). The WIT is
// --wit, else WEIR_WIT, else in the repository its wit/, else the
// package's own copy (wit/, made by its `prepare` script when it is packed
// or installed from a directory).
//
// The batch calls of the WIT take byte lists (an index of fixed-size
// entries beside the bytes), which the bindings componentize-js generates
// lift and lower with one copy each: they are used as generated.
import { readFile, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const usage = 'usage: weir-build <app.js> <out.wasm> [--wit <dir>] [--aot [--weval <path>]]';
const args = process.argv.slice(2);
let wit = process.env.WEIR_WIT;
let weval = process.env.WEIR_WEVAL || undefined;
let aot = false;
const files = [];
// The value after option args[i], which must be there.
const valueOf = (i) => {
  if (i + 1 >= args.length) {
    console.error(`weir-build: ${args[i]} needs a value\n${usage}`);
    process.exit(2);
  }
  return args[i + 1];
};
for (let i = 0; i < args.length; i++) {
  if (args[i] === '--wit') wit = valueOf(i++);
  else if (args[i] === '--weval') weval = valueOf(i++);
  else if (args[i] === '--aot') aot = true;
  else if (args[i] === '-h' || args[i] === '--help') {
    console.log(usage);
    process.exit(0);
  } else files.push(args[i]);
}
if (files.length !== 2 || files.some((f) => f.startsWith('--'))) {
  console.error(usage);
  process.exit(2);
}
if (aot && weval !== undefined && !existsSync(weval)) {
  // componentize-js would quietly fall back to downloading one.
  console.error(`weir-build: no weval at ${weval} (--weval or WEIR_WEVAL)`);
  process.exit(2);
}
const [app, out] = files;
const here = dirname(fileURLToPath(import.meta.url));
// In the repository (this is its sdk/js) its wit/ is the truth; the
// package's copy may be older.
const repo = resolve(here, '..', '..');
const inRepo = resolve(repo, 'sdk', 'js') === resolve(here) && existsSync(join(repo, 'wit', 'world.wit'));
wit = resolve(wit ?? (inRepo ? join(repo, 'wit') : join(here, 'wit')));
if (!existsSync(join(wit, 'world.wit'))) {
  console.error(`weir-build: no WIT at ${wit} (give --wit <dir>, the directory with world.wit)`);
  process.exit(2);
}

const entry = process.env.WEIR_COMPONENTIZE_JS
  ? pathToFileURL(process.env.WEIR_COMPONENTIZE_JS).href
  : import.meta.resolve('@bytecodealliance/componentize-js');
const { componentize } = await import(entry);

let source;
try {
  source = (await readFile(join(here, 'weir.js'), 'utf8')) + '\n' + (await readFile(app, 'utf8'));
} catch (e) {
  console.error(`weir-build: ${e.message}`);
  process.exit(1);
}
const { component } = await componentize(source, {
  ...(aot ? { enableAot: true, wevalBin: weval } : {}),
  witPath: wit,
  worldName: 'operator',
  // The host gives operators no clocks, randomness, network or stdio beyond
  // logging; the engine needs none of them.
  disableFeatures: ['random', 'clocks', 'http', 'stdio', 'fetch-event'],
});
await writeFile(out, component);
