// Packs the batch records in the bindings componentize-js generates.
//
// Its bindings lift and lower a `list<record>` in interpreted JavaScript,
// one DataView call per field, one object per record: for the batch calls
// of the `weir:operator` WIT that costs more than the operator's own work.
// packBindings rewrites the four hot lists so that they cross as one copy
// of the records in their canonical ABI layout, seen by the SDK as an
// Int32Array:
// - `handler.process-batch`'s elements (lifted; 40-byte `element-ref`s),
// - `value-state.get-batch` and `accumulator-state.get-batch`'s spans
//   (lifted; 12-byte `value-span`s),
// - `collector.emit-batch`'s elements and the `set-batch` spans (lowered;
//   a typed array is copied, an array of objects takes the generated path).
// A binding that is not where this expects it is an error naming it, not a
// silently slower component: componentize-js is pinned (package.json).

// The record-lifting loop of a generated function: `var resultN = [];` and
// a loop over the list's records, then the list's deallocation.
const LIFT =
  /var (result\d+) = \[\];\n\s*for \(let i = 0; i < (len\d+); i\+\+\) \{\n\s*const base = (base\d+) \+ i \* (\d+);\n[\s\S]*?\n\s*\}\n(\s*)if \(\2 !== 0\) \$dealloc\(\3, \2 \* \4, (\d+)\);/;

// The record-lowering loop: allocate `len * size` bytes, then a loop
// writing each record's fields, up to its closing brace (at the loop's
// indentation).
const LOWER =
  /var (vec\d+) = ([\w$]+);\n( *)var (len\d+) = \1\.length;\n\3var (result\d+) = \$realloc\(0, 0, (\d+), \4 \* (\d+)\);\n\3for \(let i = 0; i < \1\.length; i\+\+\) \{\n[\s\S]*?\n\3\}\n/;

// Where each rewrite applies: the text that opens the function (after an
// optional enclosing class), the rewrite, and the record size it expects.
const SITES = [
  { at: ['async function export_handler_0_1_0$processBatch('], rewrite: LIFT, size: 40 },
  { at: ['class import_keyedState_0_1_0$ValueState {', '  getBatch() {'], rewrite: LIFT, size: 12 },
  { at: ['class import_keyedState_0_1_0$ValueState {', '  setBatch('], rewrite: LOWER, size: 12 },
  { at: ['class import_keyedState_0_1_0$AccumulatorState {', '  getBatch() {'], rewrite: LIFT, size: 12 },
  { at: ['class import_keyedState_0_1_0$AccumulatorState {', '  setBatch('], rewrite: LOWER, size: 12 },
  { at: ['function import_weir_operator_collector_0_1_0$emitBatch('], rewrite: LOWER, size: 40 },
];

const lifted = (m, result, len, base, size, indent, align) =>
  `var ${result} = new Int32Array($memory.buffer.slice(${base}, ${base} + ${len} * ${size}));\n` +
  `${indent}if (${len} !== 0) $dealloc(${base}, ${len} * ${size}, ${align});`;

const lowered = (m, vec, arg, indent, len, result, align, size) =>
  `var ${vec} = ${arg};\n` +
  `${indent}if (ArrayBuffer.isView(${vec})) {\n` +
  `${indent}  var ${len} = ${vec}.byteLength / ${size};\n` +
  `${indent}  var ${result} = $realloc(0, 0, ${align}, ${vec}.byteLength);\n` +
  `${indent}  new Uint8Array($memory.buffer, ${result}, ${vec}.byteLength).set(new Uint8Array(${vec}.buffer, ${vec}.byteOffset, ${vec}.byteLength));\n` +
  `${indent}} else {\n` +
  m.slice(`var ${vec} = ${arg};\n`.length) +
  `${indent}}\n`;

/** The bindings with the batch records packed; throws naming the binding
 * it cannot find. */
export function packBindings(js) {
  for (const site of SITES) {
    let from = 0;
    for (const marker of site.at) {
      from = js.indexOf(marker, from);
      if (from < 0) throw new Error(`weir-build: the generated bindings have no '${marker.trim()}' (is componentize-js the pinned version?)`);
    }
    // The function ends where the next one (or method) starts.
    const rest = js.slice(from + 1);
    const next = rest.search(/\n(async )?function |\n {2}[a-zA-Z]\w*\(.*\) \{\n|\nclass /);
    const end = next < 0 ? js.length : from + 1 + next;
    const body = js.slice(from, end);
    const m = site.rewrite.exec(body);
    const size = m && Number(site.rewrite === LIFT ? m[4] : m[7]);
    if (!m || size !== site.size) {
      throw new Error(`weir-build: cannot pack the records of '${site.at.at(-1).trim()}' in the generated bindings (is componentize-js the pinned version?)`);
    }
    const replaced = site.rewrite === LIFT ? body.replace(site.rewrite, lifted) : body.replace(site.rewrite, lowered);
    js = js.slice(0, from) + replaced + js.slice(end);
  }
  return js;
}
