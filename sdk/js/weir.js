// Weir's JavaScript SDK: state handles, output and time over the
// `weir:operator` WIT. `weir-build` (build.mjs) puts this file in front of
// an operator module (the engines take one source), which ends with
// `export const handler = weir.export(MyOperator);`, and builds the two into
// a component with QuickJS (componentize-qjs, the default) or SpiderMonkey
// (componentize-js). It sets `globalThis.WEIR_ENGINE` first: the engines'
// generated bindings differ in how they take 64-bit integers.
//
// What it owns:
// - The value mapping (`weir.u64`, `weir.i64`, `weir.f64`, `weir.string`,
//   `weir.option(T)`, `weir.list(T)`, `weir.map(K, V)`, `weir.struct({...})`,
//   ...): JavaScript values to and from postcard, the Rust SDK's encoding,
//   so that a state written in one language is read in the others
//   (docs/writing-operators.md has the table).
// - The batch path. The host hands over batches (`process-batch`); inside
//   one, value, reducing and aggregating state are read for the whole batch
//   with one `get-batch` call per state and written back with one
//   `set-batch` when it ends; output is buffered and sent with one
//   `emit-batch` (or `emit-text-batch`) per call; other keyed calls (list
//   and map state, timers) tell the host which element is current only
//   when they are used. The operator still sees one `process(ctx,
//   element)` call per record, with the semantics of per-record calls (a
//   later record of a key sees an earlier one's write). This is the Rust
//   SDK's design (sdk/src/batch.rs).
// - Host errors (`error-code`s) thrown as `weir.WeirError`s carrying the
//   host's message, and operator exceptions turned into the failing call's
//   message.
//
// The batch calls (`process-batch`, `emit-batch`, `get-batch`,
// `set-batch`) take two byte lists: the bytes (`emit-text-batch`: text),
// and an index of fixed-size little-endian entries (wit/types.wit). A byte
// list crosses with one copy, and the SDK reads and writes the index as an
// Int32Array: no object per element or value on either side.

import {
  registerValue,
  registerList,
  registerMap,
  registerReducing,
  registerAggregating,
} from 'weir:operator/keyed-state@0.2.0';
import { registerList as registerOperatorList } from 'weir:operator/operator-state@0.2.0';
import { registerMap as registerBroadcastMap } from 'weir:operator/broadcast-state@0.2.0';
import { emitBatch, emitTextBatch } from 'weir:operator/collector@0.2.0';
import {
  registerEventTimeTimer,
  registerProcessingTimeTimer,
  deleteEventTimeTimer,
  deleteProcessingTimeTimer,
} from 'weir:operator/timers@0.2.0';
import {
  setCurrentElement,
  batchSlots,
  currentKey,
  currentWatermark,
  currentProcessingTime,
} from 'weir:operator/context@0.2.0';

const weir = (() => {
  const QUICKJS = globalThis.WEIR_ENGINE === 'quickjs';
  const TWO32 = 4294967296;
  const MAX_SAFE = Number.MAX_SAFE_INTEGER;

  // ------------------------------------------------------------- UTF-8

  // SpiderMonkey has TextEncoder and TextDecoder; QuickJS has neither, so
  // there UTF-8 is done here, with their semantics: a lone surrogate is
  // encoded as U+FFFD, and invalid bytes decode to U+FFFD (one per maximal
  // invalid subpart) or, in fatal mode, throw a TypeError. Text that is
  // ASCII, the common case, takes the engine's own string functions:
  // String.fromCharCode over the bytes and a regular expression that looks
  // for anything else, both native.
  const NOT_ASCII = /[^\x00-\x7f]/;
  const CHUNK = 8192;

  // Bytes as a string of their codes (Latin-1), CHUNK at a time (an
  // engine caps a call's arguments).
  function latin1(b) {
    if (b.length <= CHUNK) return String.fromCharCode.apply(null, b);
    let s = '';
    for (let i = 0; i < b.length; i += CHUNK) s += String.fromCharCode.apply(null, b.subarray(i, i + CHUNK));
    return s;
  }

  // Writes `s` as UTF-8 into `b` from `at` (room for 3 bytes per UTF-16
  // unit is the caller's); returns where it ended.
  function utf8Into(s, b, at) {
    const n = s.length;
    for (let i = 0; i < n; i++) {
      let c = s.charCodeAt(i);
      if (c < 0x80) {
        b[at++] = c;
        continue;
      }
      if (c < 0x800) {
        b[at++] = 0xc0 | (c >> 6);
        b[at++] = 0x80 | (c & 0x3f);
        continue;
      }
      if (c >= 0xd800 && c <= 0xdfff) {
        const d = i + 1 < n ? s.charCodeAt(i + 1) : 0;
        if (c <= 0xdbff && d >= 0xdc00 && d <= 0xdfff) {
          c = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
          i++;
          b[at++] = 0xf0 | (c >> 18);
          b[at++] = 0x80 | ((c >> 12) & 0x3f);
          b[at++] = 0x80 | ((c >> 6) & 0x3f);
          b[at++] = 0x80 | (c & 0x3f);
          continue;
        }
        c = 0xfffd;
      }
      b[at++] = 0xe0 | (c >> 12);
      b[at++] = 0x80 | ((c >> 6) & 0x3f);
      b[at++] = 0x80 | (c & 0x3f);
    }
    return at;
  }

  const encoder = {
    encode(s) {
      const n = s.length;
      if (!NOT_ASCII.test(s)) {
        // Four at a time: the loop's own test and step cost about what a
        // character does in this interpreter.
        const b = new Uint8Array(n);
        let i = 0;
        for (; i + 4 <= n; i += 4) {
          b[i] = s.charCodeAt(i);
          b[i + 1] = s.charCodeAt(i + 1);
          b[i + 2] = s.charCodeAt(i + 2);
          b[i + 3] = s.charCodeAt(i + 3);
        }
        for (; i < n; i++) b[i] = s.charCodeAt(i);
        return b;
      }
      const b = new Uint8Array(n * 3);
      return b.slice(0, utf8Into(s, b, 0));
    },
    // As TextEncoder's when `b` has room for all of `s`, which is how it is
    // used here.
    encodeInto(s, b) {
      return { read: s.length, written: utf8Into(s, b, 0) };
    },
  };

  // The WHATWG UTF-8 decoder; a leading byte order mark is dropped unless
  // `keepBom`, as TextDecoder does.
  function decodeUtf8(b, fatal, keepBom = false) {
    const s = latin1(b);
    if (!NOT_ASCII.test(s)) return s;
    const units = [];
    let text = '';
    let needed = 0;
    let seen = 0;
    let cp = 0;
    let lower = 0x80;
    let upper = 0xbf;
    const invalid = () => {
      if (fatal) throw new TypeError('The encoded data was not valid for encoding utf-8');
      units.push(0xfffd);
    };
    for (let i = 0; i < b.length; i++) {
      const x = b[i];
      if (needed === 0) {
        if (x < 0x80) units.push(x);
        else if (x >= 0xc2 && x <= 0xdf) {
          needed = 1;
          cp = x & 0x1f;
        } else if (x >= 0xe0 && x <= 0xef) {
          if (x === 0xe0) lower = 0xa0;
          if (x === 0xed) upper = 0x9f;
          needed = 2;
          cp = x & 0xf;
        } else if (x >= 0xf0 && x <= 0xf4) {
          if (x === 0xf0) lower = 0x90;
          if (x === 0xf4) upper = 0x8f;
          needed = 3;
          cp = x & 0x7;
        } else invalid();
      } else if (x < lower || x > upper) {
        // The sequence so far is one error; this byte starts afresh.
        needed = seen = cp = 0;
        lower = 0x80;
        upper = 0xbf;
        invalid();
        i--;
      } else {
        lower = 0x80;
        upper = 0xbf;
        cp = (cp << 6) | (x & 0x3f);
        if (++seen === needed) {
          if (cp > 0xffff) units.push(0xd800 + ((cp - 0x10000) >> 10), 0xdc00 + ((cp - 0x10000) & 0x3ff));
          else units.push(cp);
          needed = seen = cp = 0;
        }
      }
      if (units.length >= CHUNK) {
        text += String.fromCharCode.apply(null, units);
        units.length = 0;
      }
    }
    if (needed !== 0) invalid();
    text += String.fromCharCode.apply(null, units);
    return !keepBom && text.charCodeAt(0) === 0xfeff ? text.substring(1) : text;
  }

  const native = typeof TextEncoder === 'function' && typeof TextDecoder === 'function';
  const utf8 = native ? new TextEncoder() : encoder;
  const fromUtf8 = native ? new TextDecoder('utf-8', { fatal: true }) : { decode: (b) => decodeUtf8(b, true) };
  const lossy = native ? new TextDecoder() : { decode: (b) => decodeUtf8(b, false) };

  // Operators use them too: where the engine has none, UTF-8 ones.
  if (!native) {
    const bytesOf = (input) => {
      if (input === undefined) return new Uint8Array(0);
      if (input instanceof Uint8Array) return input;
      if (ArrayBuffer.isView(input)) return new Uint8Array(input.buffer, input.byteOffset, input.byteLength);
      if (input instanceof ArrayBuffer) return new Uint8Array(input);
      throw new TypeError('TextDecoder.decode takes an ArrayBuffer or a view of one');
    };
    globalThis.TextEncoder = class TextEncoder {
      get encoding() {
        return 'utf-8';
      }
      encode(s = '') {
        return encoder.encode(String(s));
      }
      encodeInto(s, dest) {
        s = String(s);
        if (dest.length >= s.length * 3) return { read: s.length, written: utf8Into(s, dest, 0) };
        // Whole characters while they fit.
        const one = new Uint8Array(4);
        let read = 0;
        let written = 0;
        for (const ch of s) {
          const n = utf8Into(ch, one, 0);
          if (written + n > dest.length) break;
          dest.set(one.subarray(0, n), written);
          written += n;
          read += ch.length;
        }
        return { read, written };
      }
    };
    globalThis.TextDecoder = class TextDecoder {
      constructor(label = 'utf-8', options = {}) {
        const l = String(label).trim().toLowerCase();
        if (l !== 'utf-8' && l !== 'utf8' && l !== 'unicode-1-1-utf-8') {
          throw new RangeError(`TextDecoder: only utf-8 is available in this engine, not '${label}'`);
        }
        this.fatal = !!options.fatal;
        this.ignoreBOM = !!options.ignoreBOM;
      }
      get encoding() {
        return 'utf-8';
      }
      decode(input, options) {
        if (options && options.stream) throw new TypeError('TextDecoder: stream is not available in this engine');
        return decodeUtf8(bytesOf(input), this.fatal, this.ignoreBOM);
      }
    };
  }

  // ----------------------------------------------------------- console

  // QuickJS has no console. weir-build's QuickJS builds import WASI's
  // stdout and stderr (`globalThis.WEIR_STDIO`, set in front of this
  // file), which the host sends to its log, a line per line, tagged with
  // the operator: `console.log`, `info`, `debug` and `dir` write to stdout
  // (logged at INFO), `warn`, `error`, `trace` and a failed `assert` to
  // stderr (WARN). Without them (a build by other means) console output is
  // dropped.
  if (typeof console === 'undefined') {
    const stdio = globalThis.WEIR_STDIO;
    const drop = () => {};
    globalThis.console =
      stdio === undefined
        ? { log: drop, info: drop, debug: drop, dir: drop, warn: drop, error: drop, trace: drop, assert: drop }
        : consoleOver(stdio);
  }

  // A console writing lines to WASI streams. Each stream is asked for once
  // (each `get-stdout` makes a new handle). A write that fails (a closed
  // stream) drops the line: logging never fails the operator.
  function consoleOver(stdio) {
    const streams = {};
    const writer = (name) => (...args) => {
      try {
        if (streams[name] === undefined) streams[name] = stdio[name]();
        const bytes = utf8.encode(`${args.map(shown).join(' ')}\n`);
        // WASI takes at most 4096 bytes a call.
        for (let at = 0; at < bytes.length; at += 4096) {
          streams[name].blockingWriteAndFlush(bytes.subarray(at, at + 4096));
        }
      } catch {
        // Dropped, as above.
      }
    };
    const out = writer('stdout');
    const err = writer('stderr');
    const assert = (ok, ...args) => {
      if (!ok) err('Assertion failed' + (args.length > 0 ? ':' : ''), ...args);
    };
    return { log: out, info: out, debug: out, dir: out, warn: err, error: err, trace: err, assert };
  }

  // A console argument as text, as engines show them: strings as they
  // are, errors with their name and message, plain objects and arrays as
  // JSON (where it can be made), anything else as String() does.
  function shown(v) {
    if (typeof v === 'string') return v;
    if (typeof v === 'bigint') return `${v}n`;
    if (v instanceof Error) {
      const head = `${v.name}: ${v.message}`;
      const stack = typeof v.stack === 'string' ? v.stack.trimEnd() : '';
      return stack === '' ? head : `${head}\n${stackLines(stack)}`;
    }
    if (v !== null && typeof v === 'object' && !ArrayBuffer.isView(v)) {
      try {
        const json = JSON.stringify(v, (_, x) => (typeof x === 'bigint' ? `${x}n` : x));
        if (json !== undefined) return json;
      } catch {
        // A cycle: String() below.
      }
    }
    try {
      return String(v);
    } catch {
      return Object.prototype.toString.call(v);
    }
  }

  // A stack's lines name lines of the one source weir-build made (the
  // prelude, weir.js, the operator): as the operator's own lines, or
  // weir.js's, as build errors are (weir-build sets WEIR_SOURCE).
  function stackLines(stack) {
    const where = globalThis.WEIR_SOURCE;
    if (where === undefined || where === null) return stack;
    return stack.replace(/\(([^()]*):(\d+):(\d+)\)/g, (all, file, line, column) => {
      if (!file.endsWith(where.file)) return all;
      const n = Number(line);
      return n > where.before ? `(${where.app}:${n - where.before}:${column})` : `(weir.js:${n - where.prelude}:${column})`;
    });
  }

  // A WIT s64 or u64 argument: a BigInt for SpiderMonkey's bindings, a
  // number for QuickJS's (which take no BigInt), so there only a value a
  // number holds exactly (any integer up to 2^53 in size, and -2^63, the
  // watermark before the first).
  function int64(what, t) {
    const big = BigInt.asIntN(64, BigInt(t));
    if (!QUICKJS) return big;
    const n = Number(big);
    if (BigInt(n) !== big) throw new WeirError(`${what}: ${t} is not exactly a JavaScript number, which this engine passes`);
    return n;
  }

  // ---------------------------------------------------------------- errors

  /** An error from the host (a refused state or timer call), or a value that
   * cannot be encoded or decoded. `code` is the host's `error-code` tag. */
  class WeirError extends Error {
    constructor(message, code) {
      super(message);
      this.name = 'WeirError';
      this.code = code;
    }
  }

  const DESCRIBE = {
    'not-in-open': (v) => `states are registered only in open (${v})`,
    'kind-mismatch': (v) => `kind mismatch: ${v}`,
    'invalid-name': (v) => `invalid state name: ${v}`,
    'no-current-key': () => 'no current key (keyed state and timers need a keyed input)',
    'read-only': (v) => `read-only here: ${v}`,
    'out-of-range': (v) => `element index ${v} is past the batch`,
    backend: (v) => `state backend failed: ${v}`,
  };

  // componentize-js throws an import's `err` as an error whose `payload` is
  // the WIT `error-code` ({ tag, val }); `what` names the state or `timer`.
  function hostError(what, e) {
    const code = e !== null && typeof e === 'object' ? e.payload : undefined;
    if (!code || typeof code.tag !== 'string') return e;
    const describe = DESCRIBE[code.tag];
    return new WeirError(`${what}: ${describe ? describe(code.val) : code.tag}`, code.tag);
  }

  function host(what, call) {
    try {
      return call();
    } catch (e) {
      throw hostError(what, e);
    }
  }

  // --------------------------------------------------------------- buffers

  /** A growable byte buffer that values are encoded into. */
  class Writer {
    constructor(size = 256) {
      this.buf = new Uint8Array(size);
      this.at = 0;
    }
    room(n) {
      if (this.at + n > this.buf.length) {
        const grown = new Uint8Array(Math.max(this.buf.length * 2, this.at + n));
        grown.set(this.buf.subarray(0, this.at));
        this.buf = grown;
      }
    }
    bytes() {
      return this.buf.slice(0, this.at);
    }
  }

  // One reader serves every decode: decoding never calls user code.
  const reader = { buf: new Uint8Array(0), at: 0, end: 0 };

  function need(r, n) {
    if (r.at + n > r.end) throw new WeirError('value ends early');
  }

  function writeVarint(w, n) {
    w.room(10);
    const b = w.buf;
    let at = w.at;
    if (n < 0x80000000) {
      while (n >= 0x80) {
        b[at++] = (n & 0x7f) | 0x80;
        n >>>= 7;
      }
    } else {
      while (n >= 0x80) {
        b[at++] = (n % 128) | 0x80;
        n = Math.floor(n / 128);
      }
    }
    b[at++] = n;
    w.at = at;
  }

  function writeBigVarint(w, n) {
    w.room(10);
    while (n >= 0x80n) {
      w.buf[w.at++] = Number(n & 0x7fn) | 0x80;
      n >>= 7n;
    }
    w.buf[w.at++] = Number(n);
  }

  // An unsigned LEB128 varint of at most `bytes` bytes: a number when it is
  // at most 2^53 - 1, else a BigInt.
  function readVarint(r, bytes) {
    const b = r.buf;
    let at = r.at;
    if (at < r.end && b[at] < 0x80) {
      r.at = at + 1;
      return b[at];
    }
    let n = 0;
    let mul = 1;
    for (let i = 0; i < bytes; i++) {
      if (at >= r.end) throw new WeirError('value ends early');
      const byte = b[at++];
      n += (byte & 0x7f) * mul;
      if (byte < 0x80) {
        if (n > MAX_SAFE) {
          let big = 0n;
          for (let j = at - 1; j >= r.at; j--) big = (big << 7n) | BigInt(b[j] & 0x7f);
          n = big;
        }
        r.at = at;
        return n;
      }
      mul *= 128;
    }
    throw new WeirError('varint too long');
  }

  // ------------------------------------------------------------ the types

  // A type encodes a JavaScript value into postcard and decodes it back:
  // { name, enc(writer, value), dec(reader), small }. `small` tells the
  // batch cache how a value of 0 to 127 (SMALL_UNSIGNED: u8 and the unsigned
  // varints) or of -64 to 63 (SMALL_SIGNED: the zigzag varints) encodes:
  // as one byte, which it then reads and writes inline (CachedValue).
  const SMALL_NONE = 0;
  const SMALL_UNSIGNED = 1;
  const SMALL_SIGNED = 2;
  const type = (name, enc, dec, small = SMALL_NONE) => Object.freeze({ name, enc, dec, small });

  function bad(t, v) {
    const shown = typeof v === 'bigint' ? `${v}n` : typeof v === 'string' ? JSON.stringify(v) : String(v);
    return new WeirError(`expected ${t}, got ${shown}`);
  }

  function unsigned(name, bits) {
    const max = 2 ** bits - 1;
    const bigMax = (1n << BigInt(bits)) - 1n;
    const bytes = Math.ceil(bits / 7);
    return type(
      name,
      (w, v) => {
        // Plain comparisons, no built-in calls: this runs for every write.
        if (typeof v === 'number' && v >= 0 && v <= max && v <= MAX_SAFE && v % 1 === 0) writeVarint(w, v);
        else if (typeof v === 'bigint' && v >= 0n && v <= bigMax) writeBigVarint(w, v);
        else throw bad(`an integer from 0 to ${bits === 64 ? '2^64 - 1' : max} (${name})`, v);
      },
      (r) => {
        const n = readVarint(r, bytes);
        if (typeof n === 'number' ? n > max : n > bigMax) throw new WeirError(`${name} out of range: ${n}`);
        return n;
      },
      SMALL_UNSIGNED,
    );
  }

  function signed(name, bits) {
    const limit = 2 ** (bits - 1);
    const bigLimit = 1n << BigInt(bits - 1);
    const bytes = Math.ceil(bits / 7);
    return type(
      name,
      (w, v) => {
        if (typeof v === 'number' && Number.isInteger(v) && Math.abs(v) <= 2 ** 52 && v >= -limit && v < limit) {
          writeVarint(w, v >= 0 ? v * 2 : -v * 2 - 1);
        } else if ((typeof v === 'bigint' || Number.isSafeInteger(v)) && BigInt(v) >= -bigLimit && BigInt(v) < bigLimit) {
          const n = BigInt(v);
          writeBigVarint(w, n >= 0n ? n << 1n : ((-n) << 1n) - 1n);
        } else throw bad(`an integer from -2^${bits - 1} to 2^${bits - 1} - 1 (${name})`, v);
      },
      (r) => {
        const z = readVarint(r, bytes);
        if (typeof z === 'number') return z % 2 === 0 ? z / 2 : -(z + 1) / 2;
        const n = z & 1n ? -((z + 1n) >> 1n) : z >> 1n;
        return n >= -BigInt(MAX_SAFE) && n <= BigInt(MAX_SAFE) ? Number(n) : n;
      },
      SMALL_SIGNED,
    );
  }

  const scratch = new DataView(new ArrayBuffer(8));

  function float(name, size) {
    return type(
      name,
      (w, v) => {
        if (typeof v !== 'number') throw bad(`a number (${name})`, v);
        if (size === 8) scratch.setFloat64(0, v, true);
        else scratch.setFloat32(0, v, true);
        w.room(size);
        for (let i = 0; i < size; i++) w.buf[w.at++] = scratch.getUint8(i);
      },
      (r) => {
        need(r, size);
        for (let i = 0; i < size; i++) scratch.setUint8(i, r.buf[r.at++]);
        return size === 8 ? scratch.getFloat64(0, true) : scratch.getFloat32(0, true);
      },
    );
  }

  const u8 = type(
    'u8',
    (w, v) => {
      if (!(Number.isInteger(v) && v >= 0 && v <= 255)) throw bad('an integer from 0 to 255 (u8)', v);
      w.room(1);
      w.buf[w.at++] = v;
    },
    (r) => {
      need(r, 1);
      return r.buf[r.at++];
    },
    SMALL_UNSIGNED,
  );

  const i8 = type(
    'i8',
    (w, v) => {
      if (!(Number.isInteger(v) && v >= -128 && v <= 127)) throw bad('an integer from -128 to 127 (i8)', v);
      w.room(1);
      w.buf[w.at++] = v & 0xff;
    },
    (r) => {
      need(r, 1);
      return (r.buf[r.at++] << 24) >> 24;
    },
  );

  const bool = type(
    'bool',
    (w, v) => {
      if (typeof v !== 'boolean') throw bad('a boolean (bool)', v);
      w.room(1);
      w.buf[w.at++] = v ? 1 : 0;
    },
    (r) => {
      need(r, 1);
      const b = r.buf[r.at++];
      if (b > 1) throw new WeirError(`bool out of range: ${b}`);
      return b === 1;
    },
  );

  function writeBytes(w, bytes) {
    writeVarint(w, bytes.length);
    w.room(bytes.length);
    w.buf.set(bytes, w.at);
    w.at += bytes.length;
  }

  function readLength(r) {
    const n = readVarint(r, 5);
    need(r, n);
    return n;
  }

  const string = type(
    'string',
    (w, v) => {
      if (typeof v !== 'string') throw bad('a string (string)', v);
      // At most 3 bytes per UTF-16 unit; a string of fewer than 43 units
      // has a one-byte length, so it is encoded in place.
      const max = v.length * 3;
      w.room(5 + max);
      if (max < 128) {
        const { written } = utf8.encodeInto(v, new Uint8Array(w.buf.buffer, w.at + 1));
        w.buf[w.at] = written;
        w.at += 1 + written;
      } else writeBytes(w, utf8.encode(v));
    },
    (r) => {
      const n = readLength(r);
      const start = r.at;
      r.at += n;
      try {
        return fromUtf8.decode(r.buf.subarray(start, start + n));
      } catch {
        throw new WeirError('string is not UTF-8');
      }
    },
  );

  const bytes = type(
    'bytes',
    (w, v) => {
      if (!ArrayBuffer.isView(v)) throw bad('a Uint8Array (bytes)', v);
      writeBytes(w, new Uint8Array(v.buffer, v.byteOffset, v.byteLength));
    },
    (r) => {
      const n = readLength(r);
      r.at += n;
      return r.buf.slice(r.at - n, r.at);
    },
  );

  const json = type(
    'json',
    (w, v) => string.enc(w, JSON.stringify(v)),
    (r) => JSON.parse(string.dec(r)),
  );

  function option(t) {
    t = typeOf(t);
    return type(
      `option(${t.name})`,
      (w, v) => {
        w.room(1);
        if (v === null || v === undefined) w.buf[w.at++] = 0;
        else {
          w.buf[w.at++] = 1;
          t.enc(w, v);
        }
      },
      (r) => (bool.dec(r) ? t.dec(r) : null),
    );
  }

  function list(t) {
    t = typeOf(t);
    return type(
      `list(${t.name})`,
      (w, v) => {
        if (!Array.isArray(v)) throw bad(`an array (list(${t.name}))`, v);
        writeVarint(w, v.length);
        for (let i = 0; i < v.length; i++) t.enc(w, v[i]);
      },
      (r) => {
        const n = readVarint(r, 5);
        const out = [];
        for (let i = 0; i < n; i++) out.push(t.dec(r));
        return out;
      },
    );
  }

  // A map's entries: a Map's, or a plain object's (keys converted to the
  // key type when it is a number type).
  function entriesOf(v, k) {
    if (v instanceof Map) return [...v];
    if (v !== null && typeof v === 'object' && !Array.isArray(v)) {
      const numeric = k !== string && k !== json;
      return Object.entries(v).map(([key, val]) => [numeric ? Number(key) : key, val]);
    }
    return undefined;
  }

  function map(k, v) {
    k = typeOf(k);
    v = typeOf(v);
    const name = `map(${k.name}, ${v.name})`;
    return type(
      name,
      (w, m) => {
        const entries = entriesOf(m, k);
        if (!entries) throw bad(`a Map or a plain object (${name})`, m);
        writeVarint(w, entries.length);
        for (const [key, val] of entries) {
          k.enc(w, key);
          v.enc(w, val);
        }
      },
      (r) => {
        const n = readVarint(r, 5);
        const out = new Map();
        for (let i = 0; i < n; i++) {
          const key = k.dec(r);
          out.set(key, v.dec(r));
        }
        return out;
      },
    );
  }

  // A map with string keys, read as a plain object.
  function dict(v) {
    const m = map(string, v);
    return type(`dict(${m.name.slice(12, -1)})`, m.enc, (r) => Object.fromEntries(m.dec(r)));
  }

  function tuple(...items) {
    const ts = items.map(typeOf);
    const name = `tuple(${ts.map((t) => t.name).join(', ')})`;
    return type(
      name,
      (w, v) => {
        if (!Array.isArray(v) || v.length !== ts.length) throw bad(`an array of ${ts.length} (${name})`, v);
        for (let i = 0; i < ts.length; i++) ts[i].enc(w, v[i]);
      },
      (r) => ts.map((t) => t.dec(r)),
    );
  }

  // A Rust struct: its fields in declaration order, as a plain object.
  function struct(fields) {
    const names = Object.keys(fields);
    const ts = names.map((n) => typeOf(fields[n]));
    const name = `struct { ${names.map((n, i) => `${n}: ${ts[i].name}`).join(', ')} }`;
    return type(
      name,
      (w, v) => {
        if (v === null || typeof v !== 'object') throw bad(`an object (${name})`, v);
        for (let i = 0; i < ts.length; i++) {
          try {
            ts[i].enc(w, v[names[i]]);
          } catch (e) {
            throw new WeirError(`field '${names[i]}': ${e.message}`);
          }
        }
      },
      (r) => {
        const out = {};
        for (let i = 0; i < ts.length; i++) out[names[i]] = ts[i].dec(r);
        return out;
      },
    );
  }

  const types = {
    u8,
    u16: unsigned('u16', 16),
    u32: unsigned('u32', 32),
    u64: unsigned('u64', 64),
    i8,
    i16: signed('i16', 16),
    i32: signed('i32', 32),
    i64: signed('i64', 64),
    f32: float('f32', 4),
    f64: float('f64', 8),
    bool,
    string,
    bytes,
    json,
    option,
    list,
    map,
    dict,
    tuple,
    struct,
  };

  // A type, or one of the shorthands: Number (u64), String, Uint8Array
  // (bytes), Boolean (bool), an array of types (a tuple).
  function typeOf(t) {
    if (t && typeof t.enc === 'function' && typeof t.dec === 'function') return t;
    if (t === Number) return types.u64;
    if (t === String) return string;
    if (t === Uint8Array) return bytes;
    if (t === Boolean) return bool;
    if (Array.isArray(t)) return tuple(...t);
    throw new TypeError(`not a value type: ${t && t.name ? t.name : t} (use weir.u64, weir.string, ...)`);
  }

  const shared = new Writer();

  /** `value` as postcard bytes of type `t`. */
  function encode(t, value) {
    t = typeOf(t);
    shared.at = 0;
    t.enc(shared, value);
    return shared.bytes();
  }

  function decodeAt(t, buf, start, len) {
    reader.buf = buf;
    reader.at = start;
    reader.end = start + len;
    const v = t.dec(reader);
    if (reader.at !== reader.end) throw new WeirError(`${reader.end - reader.at} bytes left after the value`);
    return v;
  }

  /** The value of type `t` that postcard bytes `b` hold. */
  function decode(t, b) {
    return decodeAt(typeOf(t), b, 0, b.length);
  }

  // The same, naming the state in the error.
  function encodeFor(name, t, value) {
    try {
      return encode(t, value);
    } catch (e) {
      throw new WeirError(`state '${name}': cannot encode value: ${e.message}`);
    }
  }

  function decodeFor(name, t, buf, start = 0, len = buf.length) {
    try {
      return decodeAt(t, buf, start, len);
    } catch (e) {
      throw new WeirError(`state '${name}': cannot decode value: ${e.message}`);
    }
  }

  /** A `migrateValue` body: stored `value` of type `from`, through `f`, as
   * type `to`. */
  const convertValue = (value, from, to, f) => encode(to, f(decode(from, value)));

  // ------------------------------------------------------------- the batch

  // The batch in progress: `index` is the element user code is on,
  // `hostIndex` the one the host has current; `slots` (key slot per
  // element) is fetched when a state first needs it.
  // `live` is `generation` while a batch runs and -2 between batches (a
  // state's generation is -1 when it holds no batch's values), so that one
  // comparison tells a state that its cache is this batch's.
  const batch = { active: false, generation: 0, live: -2, index: 0, hostIndex: 0, slots: null };
  // Cached states written during the batch.
  const dirty = [];

  function syncHost() {
    if (batch.active && batch.hostIndex !== batch.index) {
      try {
        setCurrentElement(batch.index);
      } catch (e) {
        throw hostError('batch', e);
      }
      batch.hostIndex = batch.index;
    }
  }

  function fetchSlots() {
    batch.slots = host('batch', () => batchSlots());
    return batch.slots;
  }

  // A lifted byte list (an index) as an Int32Array over the same bytes, or
  // over a copy when it does not start on a 4-byte boundary (componentize-js
  // lifts a list into a fresh ArrayBuffer, so it does; a copy keeps other
  // callers right). Entries are little-endian, as are typed arrays in wasm.
  function int32View(b) {
    if (b.byteLength % 4 !== 0) throw new WeirError(`batch index of ${b.byteLength} bytes is not whole entries`);
    if (b.byteOffset % 4 === 0) return new Int32Array(b.buffer, b.byteOffset, b.byteLength >> 2);
    return new Int32Array(b.slice().buffer);
  }

  // An Int32Array as the byte list the bindings lower (one copy).
  const asBytes = (r) => new Uint8Array(r.buffer, r.byteOffset, r.byteLength);

  // `start[slot]` of a CachedValue: 0 when the slot was not written in this
  // batch, WRITTEN_CLEAR when it was cleared, else 1 + the value's offset in
  // the arena. A new batch gets a new, zeroed array: the engine's
  // TypedArray.fill is interpreted, a new array is not.
  const WRITTEN_NONE = 0;
  const WRITTEN_CLEAR = -1;

  /** A value-shaped state (value, reducing, aggregating) with its batch
   * cache: the batch's values as the host had them (`data`, and `spans`,
   * the `value-batch` index: slot, start, len, flags per slot), and the
   * values written since, per slot, in `arena`.
   *
   * `get` and `set` run for every record, in an interpreter where each
   * call and allocation costs about as much as a dozen property reads: they
   * inline the slot lookup, and a `small` value (one byte of postcard, e.g.
   * a count up to 127) is read and written in place, without a codec call. */
  class CachedValue {
    constructor(name, handle, t) {
      this.name = name;
      this.what = `state '${name}'`;
      this.h = handle;
      this.t = t;
      this.small = t.small;
      this.generation = -1;
      this.data = null;
      this.spans = null;
      this.slots = null;
      this.n = 0;
      this.start = new Int32Array(0);
      this.len = new Int32Array(0);
      this.arena = new Writer();
      // Whether the state is on `dirty`, written in this batch.
      this.touched = false;
    }

    // This batch's values, and its key slots (fetched once per batch for
    // every state).
    load() {
      this.slots = batch.slots === null ? fetchSlots() : batch.slots;
      const values = host(this.what, () => this.h.getBatch());
      this.data = values.data;
      this.spans = int32View(values.index);
      const n = this.spans.length >> 2;
      this.n = n;
      this.start = new Int32Array(n);
      if (this.len.length < n) this.len = new Int32Array(n);
      this.arena.at = 0;
      this.generation = batch.generation;
    }

    badSlot() {
      const slot = this.slots[batch.index];
      return new WeirError(slot === undefined ? `no key slot for element ${batch.index}` : `${this.what}: bad slot ${slot}`);
    }

    // The hot path of a batch: no host call, one decode from the batch's
    // buffer or the arena.
    get() {
      const b = batch;
      if (this.generation !== b.live) {
        if (!b.active) {
          const v = host(this.what, () => this.h.get());
          return v == null ? undefined : decodeFor(this.name, this.t, v);
        }
        this.load();
      }
      const slot = this.slots[b.index];
      // Also false for undefined (no slot for this element).
      if (!(slot < this.n)) throw this.badSlot();
      const w = this.start[slot];
      let buf;
      let at;
      let len;
      if (w > 0) {
        buf = this.arena.buf;
        at = w - 1;
        len = this.len[slot];
      } else {
        const spans = this.spans;
        const e = slot * 4;
        if (w === WRITTEN_CLEAR || !(spans[e + 3] & 1)) return undefined;
        buf = this.data;
        at = spans[e + 1];
        len = spans[e + 2];
      }
      if (len === 1 && this.small !== SMALL_NONE) {
        const x = buf[at];
        if (x < 0x80) return this.small === SMALL_UNSIGNED ? x : (x >>> 1) ^ -(x & 1);
      }
      return decodeFor(this.name, this.t, buf, at, len);
    }

    set(value) {
      const b = batch;
      if (this.generation !== b.live) {
        if (!b.active) {
          const v = encodeFor(this.name, this.t, value);
          host(this.what, () => this.h.set(v));
          return;
        }
        this.load();
      }
      const slot = this.slots[b.index];
      if (!(slot < this.n)) throw this.badSlot();
      if (!this.touched) {
        this.touched = true;
        dirty.push(this);
      }
      const start = this.start;
      const a = this.arena;
      const at = a.at;
      if (this.small !== SMALL_NONE && typeof value === 'number' && (value | 0) === value) {
        const x = this.small === SMALL_UNSIGNED ? value : value >= 0 ? value * 2 : -value * 2 - 1;
        if (x >= 0 && x < 0x80) {
          if (at === a.buf.length) a.room(1);
          a.buf[at] = x;
          a.at = at + 1;
          start[slot] = at + 1;
          this.len[slot] = 1;
          return;
        }
      }
      try {
        this.t.enc(a, value);
      } catch (e) {
        a.at = at;
        throw new WeirError(`${this.what}: cannot encode value: ${e.message}`);
      }
      start[slot] = at + 1;
      this.len[slot] = a.at - at;
    }

    clear() {
      const b = batch;
      if (this.generation !== b.live) {
        if (!b.active) {
          host(this.what, () => this.h.clear());
          return;
        }
        this.load();
      }
      const slot = this.slots[b.index];
      if (!(slot < this.n)) throw this.badSlot();
      if (!this.touched) {
        this.touched = true;
        dirty.push(this);
      }
      this.start[slot] = WRITTEN_CLEAR;
    }

    // One `set-batch` entry per written slot, in slot order: the slot,
    // the value's start and length in the arena and flag bit 0, or all
    // zeros but the slot when it was cleared. The slots are found by a scan
    // of `start` here rather than listed as they are first written: in
    // QuickJS both cost the same (0.5 µs a record of the word-count
    // counter, measured), and the scan keeps `set` short.
    flush() {
      const start = this.start;
      const len = this.len;
      const n = this.n;
      const index = new Int32Array(n * 4);
      let at = 0;
      for (let slot = 0; slot < n; slot++) {
        const w = start[slot];
        if (w === WRITTEN_NONE) continue;
        index[at] = slot;
        if (w > 0) {
          index[at + 1] = w - 1;
          index[at + 2] = len[slot];
          index[at + 3] = 1;
        }
        at += 4;
      }
      const data = new Uint8Array(this.arena.buf.buffer, 0, this.arena.at);
      this.touched = false;
      // The host now holds these values: the next batch reads them again.
      this.generation = -1;
      host(this.what, () => this.h.setBatch({ data, index: asBytes(index.subarray(0, at)) }));
    }
  }

  function beginBatch() {
    batch.active = true;
    batch.generation++;
    batch.live = batch.generation;
    batch.index = 0;
    batch.hostIndex = 0;
    batch.slots = null;
  }

  // Ends the batch: writes every changed state back, or after a failure
  // drops the changes (the task fails anyway).
  function endBatch(writeBack) {
    batch.active = false;
    batch.live = -2;
    const states = dirty.splice(0);
    if (!writeBack) {
      for (const s of states) {
        s.touched = false;
        s.generation = -1;
      }
      return;
    }
    for (const s of states) s.flush();
  }

  // ---------------------------------------------------------------- output

  // Output of one export call, sent with one `emit-batch`, or, when it is
  // all ASCII text, one `emit-text-batch`. String payloads and keys are
  // joined and encoded at once;
  // byte payloads and keys are copied to `bytes`. `refs` is the index, 8
  // int32s per element (wit/types.wit): payload start, payload len, key
  // start, key len, flags (bit 0 has key, bit 1 has timestamp), 0, the
  // timestamp's low and high 32 bits. Offsets are first in UTF-16 units of
  // the joined strings, or in `bytes` for the fields `inBytes` lists
  // (their word in `refs`), and are made byte offsets in `data` when the
  // call ends. Unused entries are all zeros: an entry sets only its
  // non-zero words.
  //
  // While every output of the call is a plain string (no key, no
  // timestamp), `plain` is true and `emit` only pushes it to `strings`;
  // `placePlain` makes their entries when another kind comes or the call
  // ends, in one loop (in QuickJS each property read in `emit` costs about
  // 50 ns).
  const out = { plain: true, strings: [], chars: 0, bytes: new Writer(), inBytes: [], refs: new Int32Array(8 * 1024), n: 0 };

  function placePlain() {
    const s = out.strings;
    const n = s.length;
    if (out.refs.length < n * 8) out.refs = new Int32Array(Math.max(n * 8, out.refs.length * 2));
    const r = out.refs;
    let chars = 0;
    for (let k = 0; k < n; k++) {
      const len = s[k].length;
      r[k * 8] = chars;
      r[k * 8 + 1] = len;
      chars += len;
    }
    out.chars = chars;
    out.n = n;
    out.plain = false;
  }

  // Places a payload (at = its entry's word 0) or key (word 2).
  function place(value, at) {
    const r = out.refs;
    if (typeof value === 'string') {
      r[at] = out.chars;
      r[at + 1] = value.length;
      out.strings.push(value);
      out.chars += value.length;
    } else if (value instanceof Uint8Array) {
      const n = value.length;
      const b = out.bytes;
      const to = b.at;
      r[at] = to;
      r[at + 1] = n;
      out.inBytes.push(at);
      if (to + n > b.buf.length) b.room(n);
      b.buf.set(value, to);
      b.at = to + n;
    } else if (ArrayBuffer.isView(value)) place(new Uint8Array(value.buffer, value.byteOffset, value.byteLength), at);
    else place(String(value), at);
  }

  function pushOutput(payload, key, timestamp) {
    if (out.refs.length < (out.n + 1) * 8) {
      const grown = new Int32Array(out.refs.length * 2);
      grown.set(out.refs);
      out.refs = grown;
    }
    const b = out.n * 8;
    let flags = 0;
    let high = 0;
    let low = 0;
    if (timestamp !== undefined && timestamp !== null) {
      const t = typeof timestamp === 'bigint' ? Number(BigInt.asIntN(64, timestamp)) : timestamp;
      if (!Number.isSafeInteger(t)) throw new WeirError(`emit: timestamp ${timestamp} is not an integer number of ms`);
      high = Math.floor(t / TWO32);
      low = t - high * TWO32;
      flags = 2;
    }
    place(payload, b);
    if (key !== undefined && key !== null) {
      place(key, b + 2);
      flags |= 1;
    }
    const r = out.refs;
    r[b + 4] = flags;
    r[b + 6] = low;
    r[b + 7] = high;
    out.n++;
  }

  // The strings' bytes, with the string fields' offsets moved from UTF-16
  // units to bytes when some string is not ASCII. Each string field is one
  // of `out.strings`, pushed in the order the fields come (payload, then
  // key, output by output), so one pass pairs them; each is encoded on its
  // own (a lone surrogate at the end of one and the start of the next are
  // two characters, not a pair). No Map or Set keyed by numbers: QuickJS
  // hashes small integers into few buckets.
  function encodeStrings(r, n, joined) {
    if (!NOT_ASCII.test(joined)) return utf8.encode(joined);
    // Indexed loops throughout: a for-of calls the iterator per item.
    const strings = out.strings;
    const parts = new Array(strings.length);
    let total = 0;
    for (let k = 0; k < strings.length; k++) {
      parts[k] = utf8.encode(strings[k]);
      total += parts[k].length;
    }
    const isBytes = new Uint8Array(n * 8);
    const inBytes = out.inBytes;
    for (let i = 0; i < inBytes.length; i++) isBytes[inBytes[i]] = 1;
    const head = new Uint8Array(total);
    let k = 0;
    let bytes = 0;
    const toBytes = (at) => {
      const p = parts[k++];
      head.set(p, bytes);
      r[at] = bytes;
      r[at + 1] = p.length;
      bytes += p.length;
    };
    for (let i = 0; i < n; i++) {
      const at = i * 8;
      if (!isBytes[at]) toBytes(at);
      // A key's words are zeros without a key (flags bit 0).
      if (r[at + 4] & 1 && !isBytes[at + 2]) toBytes(at + 2);
    }
    return head;
  }

  function flushOutput() {
    if (out.plain) {
      if (out.strings.length === 0) return;
      placePlain();
    }
    const n = out.n;
    if (n === 0) return;
    const r = out.refs;
    const joined = out.strings.join('');
    // Text only, and ASCII (offsets in characters are offsets in bytes):
    // the text goes over as it is, and the engine's bindings encode it
    // natively. QuickJS has no encoder; the SDK's costs about 0.1 µs a
    // character, the larger share of an output line.
    if (out.bytes.at === 0 && !NOT_ASCII.test(joined)) {
      emitTextBatch(joined, takeIndex(n));
      return;
    }
    const head = encodeStrings(r, n, joined);
    let data = head;
    if (out.bytes.at > 0) {
      data = new Uint8Array(head.length + out.bytes.at);
      data.set(head);
      data.set(out.bytes.buf.subarray(0, out.bytes.at), head.length);
      // An indexed loop: for-of calls the iterator per item.
      const inBytes = out.inBytes;
      for (let i = 0; i < inBytes.length; i++) r[inBytes[i]] += head.length;
    }
    emitBatch({ data, index: takeIndex(n) });
  }

  // The index of the `n` buffered outputs, as bytes; the buffer is emptied.
  function takeIndex(n) {
    const r = out.refs;
    out.strings.length = 0;
    out.chars = 0;
    out.bytes.at = 0;
    out.inBytes.length = 0;
    out.n = 0;
    out.plain = true;
    // The next call's entries start from zeros (see `out`).
    out.refs = new Int32Array(r.length);
    return asBytes(r.subarray(0, n * 8));
  }

  // ------------------------------------------------------- the input view

  // A WIT s64 (time in ms) as a number. componentize-js hands some s64
  // values over as if unsigned (i64::MIN, "no watermark yet", arrives as
  // 2^63): reinterpret the 64 bits as signed.
  const time = (t) => (t === undefined ? undefined : Number(BigInt.asIntN(64, BigInt(t))));

  // The elements of one call: their bytes, their index (8 int32s per
  // element, as `out.refs`), and the bytes as text when first asked (one
  // decode for the whole batch; keys and payloads are then substrings when
  // the bytes are ASCII).
  const fromCharCode = String.fromCharCode;

  // Bytes `s` to `s + n` of `b`, ASCII, as text, for n up to 8: in
  // SpiderMonkey String.fromCharCode with the bytes as arguments costs less
  // than half of a substring (measured in the component: about 0.55 µs
  // against 1.3), and most keys are that short. In QuickJS a substring
  // costs less (about 0.17 µs against 0.24).
  function shortText(b, s, n) {
    switch (n) {
      case 0:
        return '';
      case 1:
        return fromCharCode(b[s]);
      case 2:
        return fromCharCode(b[s], b[s + 1]);
      case 3:
        return fromCharCode(b[s], b[s + 1], b[s + 2]);
      case 4:
        return fromCharCode(b[s], b[s + 1], b[s + 2], b[s + 3]);
      case 5:
        return fromCharCode(b[s], b[s + 1], b[s + 2], b[s + 3], b[s + 4]);
      case 6:
        return fromCharCode(b[s], b[s + 1], b[s + 2], b[s + 3], b[s + 4], b[s + 5]);
      case 7:
        return fromCharCode(b[s], b[s + 1], b[s + 2], b[s + 3], b[s + 4], b[s + 5], b[s + 6]);
      default:
        return fromCharCode(b[s], b[s + 1], b[s + 2], b[s + 3], b[s + 4], b[s + 5], b[s + 6], b[s + 7]);
    }
  }

  class Input {
    constructor(data, refs) {
      this.data = data;
      this.refs = refs;
      const text = lossy.decode(data);
      // ASCII when every byte made one character and none was replaced (a
      // lone invalid byte also makes one, U+FFFD); then a field's text is
      // its bytes' character codes (see shortText), or a substring.
      this.text = text.length === data.length && text.indexOf('\uFFFD') < 0 ? text : null;
    }
    str(start, len) {
      return this.text === null ? lossy.decode(this.data.subarray(start, start + len)) : this.text.substring(start, start + len);
    }
  }

  /** One input record: `payload` and `key` bytes (`key` undefined on an
   * unkeyed input), `timestamp` in ms (or undefined), and both as text.
   *
   * `hasKey` (what `key !== undefined` says, without making a view of the
   * key's bytes) and `keyStr` (the key as text, '' without a key) are
   * fields, not getters: every keyed operator reads its key, and in this
   * interpreter two getter calls cost more than the work (0.6 µs a record
   * of the word-count counter's 8.4, in three paired runs). `hasKey` is
   * true on the prototype and an own field only on an unkeyed element:
   * each field made costs about 0.1 µs a record in QuickJS. */
  class Element {
    constructor(input, at, keyStr) {
      this.input = input;
      this.at = at;
      this.keyStr = keyStr;
    }
    get payload() {
      const r = this.input.refs;
      return this.input.data.subarray(r[this.at], r[this.at] + r[this.at + 1]);
    }
    get key() {
      const r = this.input.refs;
      if (!(r[this.at + 4] & 1)) return undefined;
      return this.input.data.subarray(r[this.at + 2], r[this.at + 2] + r[this.at + 3]);
    }
    get timestamp() {
      const r = this.input.refs;
      return r[this.at + 4] & 2 ? r[this.at + 7] * TWO32 + (r[this.at + 6] >>> 0) : undefined;
    }
    get payloadStr() {
      const input = this.input;
      const r = input.refs;
      const at = this.at;
      const start = r[at];
      const n = r[at + 1];
      if (input.text === null) return input.str(start, n);
      return n <= 8 && !QUICKJS ? shortText(input.data, start, n) : input.text.substring(start, start + n);
    }
  }

  Element.prototype.hasKey = true;

  // Element `i` of `input`.
  function elementAt(input, i) {
    const at = i * 8;
    const r = input.refs;
    if (!(r[at + 4] & 1)) {
      const e = new Element(input, at, '');
      e.hasKey = false;
      return e;
    }
    const start = r[at + 2];
    const n = r[at + 3];
    if (input.text === null) return new Element(input, at, input.str(start, n));
    return new Element(input, at, n <= 8 && !QUICKJS ? shortText(input.data, start, n) : input.text.substring(start, start + n));
  }

  // A single element (`process`, `process-broadcast`: a WIT `element`
  // record) as a one-element input.
  function single(e) {
    const key = e.key;
    const data = new Uint8Array(e.payload.length + (key ? key.length : 0));
    data.set(e.payload);
    const refs = new Int32Array(8);
    refs[1] = e.payload.length;
    if (key !== undefined && key !== null) {
      data.set(key, e.payload.length);
      refs[2] = e.payload.length;
      refs[3] = key.length;
      refs[4] = 1;
    }
    if (e.timestamp !== undefined && e.timestamp !== null) {
      const t = BigInt.asIntN(64, BigInt(e.timestamp));
      refs[4] |= 2;
      refs[6] = Number(BigInt.asIntN(32, t));
      refs[7] = Number(t >> 32n);
    }
    return elementAt(new Input(data, refs), 0);
  }

  // ------------------------------------------------------- state handles

  /** One value per key (get, set, clear). Inside a batch, reads and writes
   * go through the batch cache: one host call per batch and state, not per
   * record. */
  class ValueState extends CachedValue {}

  /** One accumulator per key, folded with `reduce(accumulator, value)`. */
  class ReducingState extends CachedValue {
    constructor(name, handle, t, reduce) {
      super(name, handle, t);
      this.reduce = reduce;
    }
    /** Folds `value` in and returns the new accumulator. */
    add(value) {
      const acc = this.get();
      const next = acc === undefined ? value : this.reduce(acc, value);
      this.set(next);
      return next;
    }
  }

  /** One accumulator per key, folded with an aggregate function
   * `{ create(), add(input, acc), result(acc) }`. */
  class AggregatingState extends CachedValue {
    constructor(name, handle, t, fn) {
      super(name, handle, t);
      this.fn = fn;
    }
    add(input) {
      const acc = super.get();
      this.set(this.fn.add(input, acc === undefined ? this.fn.create() : acc));
    }
    /** The current key's result, or undefined before the first input. */
    get() {
      const acc = super.get();
      return acc === undefined ? undefined : this.fn.result(acc);
    }
  }

  const PAGE = 256;

  // A list or map handle: its host calls sync the host's current element
  // first when the state is keyed (operator and broadcast state have no key).
  class Handle {
    constructor(name, handle, keyed) {
      this.name = name;
      this.what = `state '${name}'`;
      this.h = handle;
      this.keyed = keyed;
    }
    call(f) {
      if (this.keyed) syncHost();
      return host(this.what, f);
    }
    // A host error as a WeirError naming the state. The calls an operator
    // makes per record (add, get, put, remove, contains) catch it
    // themselves rather than pass a closure to `call`: an allocation and
    // two calls less, about a microsecond in this engine.
    fail(e) {
      return hostError(this.what, e);
    }
  }

  // The methods keyed and operator lists share.
  class Listing extends Handle {
    constructor(name, handle, t, keyed) {
      super(name, handle, keyed);
      this.t = t;
    }
    add(value) {
      const b = encodeFor(this.name, this.t, value);
      if (this.keyed) syncHost();
      try {
        this.h.add(b);
      } catch (e) {
        throw this.fail(e);
      }
    }
    addAll(values) {
      const bs = values.map((v) => encodeFor(this.name, this.t, v));
      this.call(() => this.h.addAll(bs));
    }
    /** Replaces the list (an empty array clears it). */
    update(values) {
      const bs = values.map((v) => encodeFor(this.name, this.t, v));
      this.call(() => this.h.update(bs));
    }
    /** The whole list, read a page at a time. */
    get() {
      return [...this];
    }
    *[Symbol.iterator]() {
      for (let start = 0; ; ) {
        const page = this.call(() => this.h.read(start, PAGE));
        for (const b of page) yield decodeFor(this.name, this.t, b);
        if (page.length < PAGE) return;
        start += page.length;
      }
    }
    len() {
      return this.call(() => this.h.len());
    }
    clear() {
      this.call(() => this.h.clear());
    }
  }

  /** An ordered list of values per key. */
  class ListState extends Listing {}

  /** A list per parallel subtask, redistributed on rescale (even-split or
   * union). */
  class OperatorListState extends Listing {}

  // The methods keyed and broadcast maps share.
  class Mapping extends Handle {
    constructor(name, handle, k, v, keyed) {
      super(name, handle, keyed);
      this.k = k;
      this.v = v;
    }
    get(key) {
      const k = encodeFor(this.name, this.k, key);
      if (this.keyed) syncHost();
      let b;
      try {
        b = this.h.get(k);
      } catch (e) {
        throw this.fail(e);
      }
      return b == null ? undefined : decodeFor(this.name, this.v, b);
    }
    put(key, value) {
      const k = encodeFor(this.name, this.k, key);
      const v = encodeFor(this.name, this.v, value);
      if (this.keyed) syncHost();
      try {
        this.h.put(k, v);
      } catch (e) {
        throw this.fail(e);
      }
    }
    remove(key) {
      const k = encodeFor(this.name, this.k, key);
      if (this.keyed) syncHost();
      try {
        this.h.remove(k);
      } catch (e) {
        throw this.fail(e);
      }
    }
    contains(key) {
      const k = encodeFor(this.name, this.k, key);
      if (this.keyed) syncHost();
      try {
        return this.h.contains(k);
      } catch (e) {
        throw this.fail(e);
      }
    }
    isEmpty() {
      return this.call(() => this.h.isEmpty());
    }
    /** [key, value] pairs in the order of the encoded keys' bytes, read a
     * page at a time. */
    *entries() {
      for (let after; ; ) {
        const page = this.call(() => this.h.entries(after, PAGE));
        for (const [k, v] of page) yield [decodeFor(this.name, this.k, k), decodeFor(this.name, this.v, v)];
        if (page.length < PAGE) return;
        after = page[page.length - 1][0];
      }
    }
    *keys() {
      for (let after; ; ) {
        const page = this.call(() => this.h.keys(after, PAGE));
        for (const k of page) yield decodeFor(this.name, this.k, k);
        if (page.length < PAGE) return;
        after = page[page.length - 1];
      }
    }
    *values() {
      for (const [, v] of this.entries()) yield v;
    }
    [Symbol.iterator]() {
      return this.entries();
    }
    clear() {
      this.call(() => this.h.clear());
    }
  }

  /** A map per key; entries iterate in the order of their encoded keys. */
  class MapState extends Mapping {}

  /** A map replicated on every subtask, writable only in
   * `processBroadcast`. */
  class BroadcastMapState extends Mapping {}

  // ------------------------------------------------------------- contexts

  // A state's options: a version number, or { version, ttl }, where ttl is
  // milliseconds or { ms, renewOnRead, returnExpired }.
  function descriptor(name, options) {
    const o = typeof options === 'number' ? { version: options } : options || {};
    const version = o.version === undefined ? 1 : o.version;
    if (!Number.isInteger(version) || version < 1) throw new WeirError(`state '${name}': version must be a positive integer`);
    let ttl;
    if (o.ttl !== undefined) {
      const t = typeof o.ttl === 'number' ? { ms: o.ttl } : o.ttl;
      if (!Number.isSafeInteger(t.ms) || t.ms < 1) throw new WeirError(`state '${name}': ttl must be a positive number of ms`);
      ttl = {
        ttlMs: int64(`state '${name}': ttl`, t.ms),
        update: t.renewOnRead ? 'on-read-and-write' : 'on-create-and-write',
        visibility: t.returnExpired ? 'return-expired-if-not-cleaned-up' : 'never-return-expired',
      };
    }
    return { name, version, encoding: 'postcard', ttl };
  }

  function register(name, options, f) {
    const d = descriptor(name, options);
    return host(`state '${name}'`, () => f(d));
  }

  /** Passed to `open`: who the subtask is, its params, and the functions that
   * register state. */
  class OpenContext {
    constructor(info) {
      this.info = {
        uid: info.uid,
        subtaskIndex: info.subtaskIndex,
        parallelism: info.parallelism,
        maxParallelism: info.maxParallelism,
        attemptNumber: info.attemptNumber,
      };
      this.params = new Map(info.params);
    }
    /** Param `name` from `job.toml` as a string, or `fallback`. */
    param(name, fallback) {
      return this.params.has(name) ? this.params.get(name) : fallback;
    }
    /** Param `name` as a number, or `fallback`; a value that is not a
     * number is an error naming the param. */
    paramNumber(name, fallback) {
      if (!this.params.has(name)) return fallback;
      const v = this.params.get(name);
      const n = Number(v);
      if (v.trim() === '' || Number.isNaN(n)) throw new WeirError(`param '${name}': cannot parse '${v}' as a number`);
      return n;
    }
    valueState(name, t = Number, options) {
      return new ValueState(name, register(name, options, registerValue), typeOf(t));
    }
    listState(name, t = Number, options) {
      return new ListState(name, register(name, options, registerList), typeOf(t), true);
    }
    mapState(name, keyType = String, valueType = Number, options) {
      return new MapState(name, register(name, options, registerMap), typeOf(keyType), typeOf(valueType), true);
    }
    reducingState(name, t, reduce, options) {
      if (typeof reduce !== 'function') throw new TypeError(`state '${name}': reducingState needs a reduce function`);
      return new ReducingState(name, register(name, options, registerReducing), typeOf(t), reduce);
    }
    aggregatingState(name, accumulatorType, fn, options) {
      for (const m of ['create', 'add', 'result']) {
        if (!fn || typeof fn[m] !== 'function') throw new TypeError(`state '${name}': the aggregate function needs ${m}()`);
      }
      return new AggregatingState(name, register(name, options, registerAggregating), typeOf(accumulatorType), fn);
    }
    /** Options: { redistribution: 'even-split' (default) or 'union',
     * version }. */
    operatorListState(name, t = Number, options = {}) {
      const mode = options.redistribution || 'even-split';
      if (mode !== 'even-split' && mode !== 'union') {
        throw new WeirError(`state '${name}': redistribution must be 'even-split' or 'union', not '${mode}'`);
      }
      const h = register(name, { version: options.version }, (d) => registerOperatorList(d, mode));
      return new OperatorListState(name, h, typeOf(t), false);
    }
    broadcastMapState(name, keyType = String, valueType = Number, options) {
      const h = register(name, options, registerBroadcastMap);
      return new BroadcastMapState(name, h, typeOf(keyType), typeOf(valueType), false);
    }
    /** Emits as `Context.emit` does, before any input: e.g. what operator
     * or broadcast state this subtask was restored with. */
    emit(payload, key, timestamp) {
      Context.prototype.emit.call(this, payload, key, timestamp);
    }
  }

  const timer = (f, t) => {
    syncHost();
    if (typeof t !== 'bigint' && !Number.isInteger(t)) throw new WeirError(`timer: ${t} is not an integer number of ms`);
    const at = int64('timer', t);
    try {
      f(at);
    } catch (e) {
      throw hostError('timer', e);
    }
  };

  /** Passed to every call after `open`: output, time, timers. */
  class Context {
    /** Emits `payload` (a string or a Uint8Array), under `key` if given (a
     * keyed downstream sees it as that key), with `timestamp` (ms) if given. */
    emit(payload, key, timestamp) {
      const o = out;
      if (o.plain) {
        if (typeof payload === 'string' && key == null && timestamp === undefined) {
          o.strings.push(payload);
          return;
        }
        placePlain();
      }
      const b = o.n * 8;
      // The common cases inline (a call costs as much as a dozen
      // instructions): a string without timestamp, with no key or a
      // string key; a key of bytes is placed by a call.
      if (typeof payload === 'string' && timestamp === undefined && b + 8 <= o.refs.length) {
        const r = o.refs;
        r[b] = o.chars;
        r[b + 1] = payload.length;
        o.strings.push(payload);
        o.chars += payload.length;
        if (key !== undefined && key !== null) {
          if (typeof key === 'string') {
            r[b + 2] = o.chars;
            r[b + 3] = key.length;
            o.strings.push(key);
            o.chars += key.length;
          } else place(key, b + 2);
          r[b + 4] = 1;
        }
        o.n++;
      } else pushOutput(payload, key, timestamp);
    }
    /** The current key's bytes, if any. */
    currentKey() {
      syncHost();
      // QuickJS's bindings give a WIT `none` as null.
      return currentKey() ?? undefined;
    }
    /** The operator's event-time watermark in ms (-2^63 before the first). */
    watermark() {
      return time(currentWatermark());
    }
    /** The host's wall clock in ms since the Unix epoch. */
    processingTime() {
      return time(currentProcessingTime());
    }
    registerEventTimeTimer(t) {
      timer(registerEventTimeTimer, t);
    }
    registerProcessingTimeTimer(t) {
      timer(registerProcessingTimeTimer, t);
    }
    deleteEventTimeTimer(t) {
      timer(deleteEventTimeTimer, t);
    }
    deleteProcessingTimeTimer(t) {
      timer(deleteProcessingTimeTimer, t);
    }
  }

  // -------------------------------------------------------------- exports

  // A JavaScript exception fails the call with its message: a WeirError's
  // message as it is (it names the state), any other error's with its name.
  function message(e) {
    if (typeof e === 'string') return e;
    if (e instanceof WeirError) return e.message;
    return `${e && e.name ? e.name : 'Error'}: ${e && e.message !== undefined ? e.message : e}`;
  }

  // Runs one export call; output is flushed whatever happens.
  function call(f) {
    let failure;
    try {
      f();
    } catch (e) {
      failure = message(e);
    }
    try {
      flushOutput();
    } catch (e) {
      failure = failure || message(e);
    }
    if (failure !== undefined) throw failure;
  }

  function exportOperator(Operator) {
    const ctx = new Context();
    let op;
    const opened = () => {
      if (op === undefined) throw 'operator called before open';
      return op;
    };
    return {
      open(info) {
        call(() => {
          op = Operator.open(new OpenContext(info));
          if (op === null || typeof op !== 'object') throw new TypeError(`${Operator.name}.open must return the operator`);
        });
      },
      process(input) {
        const o = opened();
        call(() => o.process(ctx, single(input)));
      },
      processBatch(b) {
        const o = opened();
        const input = new Input(b.data, int32View(b.index));
        const n = input.refs.length >> 3;
        call(() => {
          beginBatch();
          let ok = false;
          try {
            // The common case inline (a call per record costs about 0.1
            // µs): keyed elements of ASCII text, on QuickJS.
            const r = input.refs;
            const text = QUICKJS ? input.text : null;
            for (let i = 0; i < n; i++) {
              batch.index = i;
              const at = i * 8;
              if (text !== null && r[at + 4] & 1) {
                const s = r[at + 2];
                o.process(ctx, new Element(input, at, text.substring(s, s + r[at + 3])));
              } else o.process(ctx, elementAt(input, i));
            }
            ok = true;
          } finally {
            // On failure, let the host name the record.
            if (!ok) {
              try {
                setCurrentElement(batch.index);
              } catch {
                // The failure itself is what the host reports.
              }
            }
            endBatch(ok);
          }
        });
      },
      processBroadcast(input) {
        const o = opened();
        if (typeof o.processBroadcast !== 'function') throw 'this operator does not take a broadcast input';
        call(() => o.processBroadcast(ctx, single(input)));
      },
      onTimer(fired) {
        const o = opened();
        if (typeof o.onTimer !== 'function') return;
        const key = fired.key;
        call(() =>
          o.onTimer(ctx, {
            time: time(fired.time),
            domain: fired.domain,
            key,
            get keyStr() {
              return lossy.decode(key);
            },
          }),
        );
      },
      endOfInput() {
        const o = opened();
        if (typeof o.endOfInput === 'function') call(() => o.endOfInput(ctx));
      },
      migrateValue(state, fromVersion, value) {
        if (typeof Operator.migrateValue !== 'function') {
          throw `state '${state}': no migration from version ${fromVersion} (define static migrateValue)`;
        }
        let result;
        call(() => {
          result = Operator.migrateValue(state, fromVersion, value);
          if (!ArrayBuffer.isView(result)) throw new WeirError(`state '${state}': migrateValue must return a Uint8Array`);
        });
        return result;
      },
    };
  }

  return {
    export: exportOperator,
    encode,
    decode,
    convertValue,
    WeirError,
    ...types,
  };
})();
