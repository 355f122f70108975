// Builds a JavaScript operator into a component: the SDK (weir.js) and the
// operator module as one source, through componentize-js against wit/.
// Usage: node sdk/js/build.mjs <app.js> <out.wasm>
// WEIR_COMPONENTIZE_JS names componentize-js's src/componentize.js.
import { readFile, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const [app, out] = process.argv.slice(2);
const here = dirname(fileURLToPath(import.meta.url));
const { componentize } = await import(pathToFileURL(process.env.WEIR_COMPONENTIZE_JS).href);
const source = (await readFile(join(here, 'weir.js'), 'utf8')) + '\n' + (await readFile(app, 'utf8'));
const { component } = await componentize(source, {
  witPath: join(here, '..', '..', 'wit'),
  worldName: 'operator',
  // The host gives operators no clocks, randomness, network or stdio beyond
  // logging; the engine needs none of them.
  disableFeatures: ['random', 'clocks', 'http', 'stdio', 'fetch-event'],
});
await writeFile(out, component);
