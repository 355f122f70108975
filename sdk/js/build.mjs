#!/usr/bin/env node
// weir-build: builds a JavaScript operator into a component. The SDK
// (weir.js) and the operator module go in as one source (the engines take
// one), against the `weir:operator` WIT.
//
// Usage: weir-build <app.js> <out.wasm> [--wit <dir>] [--engine quickjs|spidermonkey] [--aot [--weval <path>]]
//   (in the repository: node sdk/js/build.mjs <app.js> <out.wasm>)
//
// --engine picks the JavaScript engine the component carries:
// - quickjs (the default): QuickJS, through componentize-qjs. A component
//   of about 2 MiB, built in a second or two, that starts (compiled) in
//   about a second and from the module cache in under 10 ms, and runs the
//   word-count counter faster than SpiderMonkey interpreted
//   (docs/benchmarks.md). QuickJS has no console: the SDK makes one over
//   WASI's stdout and stderr, which the build imports (wasi/, a subset of
//   WASI 0.2, added to the contract's world as `operator-console`), and
//   the host sends to its log.
// - spidermonkey: SpiderMonkey, through componentize-js. About 13 MiB,
//   15 to 30 s to build, 7 to 9 s to compile; its console.log reaches the
//   host's log.
// --aot (SpiderMonkey only) compiles the operator's JavaScript ahead of
// time with weval: 1.4 to 2 times SpiderMonkey's interpreter on the
// word-count counter, for about 20 MiB and a build of 20 to 45 s. weval is
// --weval, else WEIR_WEVAL, else the one componentize-js downloads from
// weval's GitHub releases.
//
// The engines are the pinned dependencies of this package, or those
// WEIR_COMPONENTIZE_QJS (componentize-qjs's index.js) and
// WEIR_COMPONENTIZE_JS (componentize-js's src/componentize.js) name. The
// WIT is --wit, else WEIR_WIT, else in the repository its wit/, else the
// package's own copy (wit/, made by its `prepare` script when it is packed
// or installed from a directory).
//
// The batch calls of the WIT take byte lists (an index of fixed-size
// entries beside the bytes), which both engines' bindings lift and lower
// with one copy each: they are used as generated.
import { cp, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { existsSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const usage = 'usage: weir-build <app.js> <out.wasm> [--wit <dir>] [--engine quickjs|spidermonkey] [--aot [--weval <path>]]';
const ENGINES = ['quickjs', 'spidermonkey'];
const args = process.argv.slice(2);
let wit = process.env.WEIR_WIT;
let weval = process.env.WEIR_WEVAL || undefined;
let aot = false;
let engine;
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
  else if (args[i] === '--engine') engine = valueOf(i++);
  else if (args[i] === '-h' || args[i] === '--help') {
    console.log(usage);
    process.exit(0);
  } else files.push(args[i]);
}
if (files.length !== 2 || files.some((f) => f.startsWith('--'))) {
  console.error(usage);
  process.exit(2);
}
if (engine !== undefined && !ENGINES.includes(engine)) {
  console.error(`weir-build: --engine is quickjs or spidermonkey, not '${engine}'`);
  process.exit(2);
}
if (aot && engine === 'quickjs') {
  console.error('weir-build: --aot compiles with SpiderMonkey (weval); QuickJS has no ahead-of-time mode');
  process.exit(2);
}
engine = engine ?? (aot ? 'spidermonkey' : 'quickjs');
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

// In front of weir.js: the engine's name, which weir.js reads as it is
// evaluated (imports are hoisted, so set first); on QuickJS also the WASI
// streams its console writes to, and the source's layout (WEIR_SOURCE,
// filled in below once the lines are counted), with which that console
// names an error's stack lines as the operator's or weir.js's, as build
// errors are named (sourceLines).
const prelude =
  engine === 'quickjs'
    ? [
        "import { getStdout as __weirGetStdout } from 'wasi:cli/stdout@0.2.0';",
        "import { getStderr as __weirGetStderr } from 'wasi:cli/stderr@0.2.0';",
        "globalThis.WEIR_ENGINE = 'quickjs';",
        'globalThis.WEIR_STDIO = { stdout: __weirGetStdout, stderr: __weirGetStderr };',
        'globalThis.WEIR_SOURCE = undefined;',
      ]
    : [`globalThis.WEIR_ENGINE = '${engine}';`];
let source;
// The lines in front of the operator's: the prelude, then weir.js.
let before;
try {
  const sdk = await readFile(join(here, 'weir.js'), 'utf8');
  before = prelude.length + sdk.split('\n').length;
  if (engine === 'quickjs') {
    const where = { file: basename(app), app, before, prelude: prelude.length };
    prelude[prelude.length - 1] = `globalThis.WEIR_SOURCE = ${JSON.stringify(where)};`;
  }
  source = `${prelude.join('\n')}\n${sdk}\n${await readFile(app, 'utf8')}`;
} catch (e) {
  console.error(`weir-build: ${e.message}`);
  process.exit(1);
}
let component;
try {
  component = engine === 'quickjs' ? await quickjs(source) : await spidermonkey(source);
} catch (e) {
  // componentize-qjs's messages start with ': '.
  const message = String(e && e.message ? e.message : e).replace(/^:\s*/, '');
  console.error(`weir-build: ${app}: ${sourceLines(message)}`);
  process.exit(1);
}
await writeFile(out, component);

// An engine's error names a line of the one source (SpiderMonkey calls it
// source.js, QuickJS by the operator's file name): as the operator's own
// line, or weir.js's. Other files (QuickJS resolves relative imports) keep
// their lines.
function sourceLines(message) {
  const name = basename(app).replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return message.replace(new RegExp(`/?(?:source\\.js|${name}):(\\d+)`, 'g'), (_, n) => {
    const line = Number(n);
    return line > before ? `${app}:${line - before}` : `weir.js:${line - prelude.length}`;
  });
}

async function quickjs(source) {
  const entry = process.env.WEIR_COMPONENTIZE_QJS ? pathToFileURL(process.env.WEIR_COMPONENTIZE_QJS).href : 'componentize-qjs';
  const { componentize } = await import(entry);
  const dir = await consoleWit();
  try {
    const built = await componentize({
      witPath: dir,
      jsSource: source,
      jsPath: resolve(app),
      world: 'operator-console',
      // The host does not run component-model async.
      sync: true,
    });
    return built.component;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

// A copy of the WIT with world `operator-console`: the contract's
// `operator` and WASI's stdout and stderr (wasi/), in a directory of its
// own, removed after the build.
async function consoleWit() {
  const text = await readFile(join(wit, 'world.wit'), 'utf8');
  const pkg = /^package\s+([^;\s]+)\s*;/m.exec(text);
  if (!pkg) throw new Error(`${join(wit, 'world.wit')} declares no package`);
  const dir = await mkdtemp(join(tmpdir(), 'weir-build-'));
  await cp(wit, dir, { recursive: true });
  for (const name of ['io', 'cli']) {
    await mkdir(join(dir, 'deps', `wasi-${name}`), { recursive: true });
    await cp(join(here, 'wasi', `${name}.wit`), join(dir, 'deps', `wasi-${name}`, `${name}.wit`));
  }
  await writeFile(
    join(dir, 'weir-build-console.wit'),
    `package ${pkg[1]};\n\nworld operator-console {\n    include operator;\n    import wasi:cli/stdout@0.2.0;\n    import wasi:cli/stderr@0.2.0;\n}\n`,
  );
  return dir;
}

async function spidermonkey(source) {
  const entry = process.env.WEIR_COMPONENTIZE_JS
    ? pathToFileURL(process.env.WEIR_COMPONENTIZE_JS).href
    : import.meta.resolve('@bytecodealliance/componentize-js');
  const { componentize } = await import(entry);
  const built = await componentize(source, {
    ...(aot ? { enableAot: true, wevalBin: weval } : {}),
    witPath: wit,
    worldName: 'operator',
    // The host gives operators no clocks, randomness or network; the engine
    // needs none of them. Its stdio stays: console output goes to the
    // host's log, tagged with the operator.
    disableFeatures: ['random', 'clocks', 'http', 'fetch-event'],
  });
  return built.component;
}
