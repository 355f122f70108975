// Weir's JavaScript SDK: idiomatic state handles over the `weir:operator`
// WIT, for componentize-js. `build.mjs` puts this file in front of an
// operator module (componentize-js takes one source), which ends with
// `export const handler = weir.export(MyOperator);`.
//
// Values are encoded as postcard, the Rust SDK's encoding, for the types the
// languages share: a non-negative integer `number` (an unsigned LEB128
// varint, Rust's `u64`, exact up to 2^53), a `string` (varint length, then
// UTF-8: Rust's `String`), a `Uint8Array` (Rust's `Vec<u8>`) and a
// `boolean`, and arrays of them (Rust tuples: the kind is an array of kinds,
// such as `[Number, Number]`). A state written by one language is read by
// the others. Times (timestamps, watermarks, timers) are numbers of
// milliseconds.

import { registerValue, registerList, registerMap } from 'weir:operator/keyed-state@0.1.0';
import { emit as hostEmit } from 'weir:operator/collector@0.1.0';
import {
  registerEventTimeTimer,
  registerProcessingTimeTimer,
  deleteEventTimeTimer,
  deleteProcessingTimeTimer,
} from 'weir:operator/timers@0.1.0';
import {
  setCurrentElement,
  currentWatermark,
  currentProcessingTime,
} from 'weir:operator/context@0.1.0';

const weir = (() => {
  const utf8 = new TextEncoder();
  const fromUtf8 = new TextDecoder();

  function varint(n) {
    if (!Number.isInteger(n) || n < 0) throw new Error('only non-negative integers are encoded (Rust u64)');
    const out = [];
    for (;;) {
      const b = n % 128;
      n = Math.floor(n / 128);
      if (n) out.push(b | 0x80);
      else {
        out.push(b);
        return out;
      }
    }
  }

  function readVarint(b, at) {
    let n = 0;
    let mul = 1;
    for (;;) {
      const byte = b[at++];
      n += (byte & 0x7f) * mul;
      mul *= 128;
      if (!(byte & 0x80)) return [n, at];
    }
  }

  function encode(value) {
    if (Array.isArray(value)) {
      const parts = value.map(encode);
      const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
      let at = 0;
      for (const p of parts) {
        out.set(p, at);
        at += p.length;
      }
      return out;
    }
    if (typeof value === 'boolean') return new Uint8Array([value ? 1 : 0]);
    if (typeof value === 'number') return new Uint8Array(varint(value));
    const bytes = typeof value === 'string' ? utf8.encode(value) : value;
    if (!(bytes instanceof Uint8Array)) throw new Error(`cannot encode ${typeof value}: use number, string, Uint8Array or boolean`);
    const head = varint(bytes.length);
    const out = new Uint8Array(head.length + bytes.length);
    out.set(head, 0);
    out.set(bytes, head.length);
    return out;
  }

  function decodeAt(kind, b, at) {
    if (Array.isArray(kind)) {
      const items = [];
      for (const k of kind) {
        const [v, next] = decodeAt(k, b, at);
        items.push(v);
        at = next;
      }
      return [items, at];
    }
    if (kind === Boolean) return [b[at] !== 0, at + 1];
    if (kind === Number) return readVarint(b, at);
    const [n, start] = readVarint(b, at);
    const raw = b.subarray(start, start + n);
    if (kind === String) return [fromUtf8.decode(raw), start + n];
    if (kind === Uint8Array) return [raw.slice(), start + n];
    throw new Error('decode: use Number, String, Uint8Array, Boolean or an array of them');
  }

  const decode = (kind, b) => decodeAt(kind, b, 0)[0];

  const descriptor = (name, version) => ({ name, version, encoding: 'postcard', ttl: undefined });

  class ValueState {
    constructor(handle, kind) { this.h = handle; this.kind = kind; }
    get() { const v = this.h.get(); return v === undefined ? undefined : decode(this.kind, v); }
    set(value) { this.h.set(encode(value)); }
    clear() { this.h.clear(); }
  }

  class ListState {
    constructor(handle, kind) { this.h = handle; this.kind = kind; }
    add(value) { this.h.add(encode(value)); }
    get() {
      const out = [];
      for (let start = 0; ; ) {
        const page = this.h.read(start, 1024);
        for (const v of page) out.push(decode(this.kind, v));
        if (page.length < 1024) return out;
        start += page.length;
      }
    }
    clear() { this.h.clear(); }
  }

  class MapState {
    constructor(handle, keyKind, valueKind) { this.h = handle; this.keyKind = keyKind; this.valueKind = valueKind; }
    get(key) { const v = this.h.get(encode(key)); return v === undefined ? undefined : decode(this.valueKind, v); }
    put(key, value) { this.h.put(encode(key), encode(value)); }
    remove(key) { this.h.remove(encode(key)); }
    *entries() {
      for (let after; ; ) {
        const page = this.h.entries(after, 1024);
        for (const [k, v] of page) yield [decode(this.keyKind, k), decode(this.valueKind, v)];
        if (page.length < 1024) return;
        after = page[page.length - 1][0];
      }
    }
    clear() { this.h.clear(); }
  }

  class OpenContext {
    constructor(info) { this.info = info; this.params = new Map(info.params); }
    param(name, fallback) { return this.params.has(name) ? this.params.get(name) : fallback; }
    valueState(name, kind = Number, version = 1) { return new ValueState(registerValue(descriptor(name, version)), kind); }
    listState(name, kind = Number, version = 1) { return new ListState(registerList(descriptor(name, version)), kind); }
    mapState(name, keyKind = String, valueKind = Number, version = 1) {
      return new MapState(registerMap(descriptor(name, version)), keyKind, valueKind);
    }
  }

  // A WIT s64 (time in ms) as a number. componentize-js hands some s64
  // values over as if unsigned (i64::MIN, "no watermark yet", arrives as
  // 2^63): reinterpret the 64 bits as signed.
  const time = (t) => (t === undefined ? undefined : Number(BigInt.asIntN(64, BigInt(t))));

  const bytes = (v) => (v === undefined || v instanceof Uint8Array ? v : utf8.encode(String(v)));

  class Context {
    emit(payload, key, timestamp) {
      hostEmit({ payload: bytes(payload), key: bytes(key), timestamp: timestamp === undefined ? undefined : BigInt(timestamp) });
    }
    watermark() { return time(currentWatermark()); }
    processingTime() { return time(currentProcessingTime()); }
    registerEventTimeTimer(time) { registerEventTimeTimer(BigInt(time)); }
    registerProcessingTimeTimer(time) { registerProcessingTimeTimer(BigInt(time)); }
    deleteEventTimeTimer(time) { deleteEventTimeTimer(BigInt(time)); }
    deleteProcessingTimeTimer(time) { deleteProcessingTimeTimer(BigInt(time)); }
  }

  class Element {
    constructor(payload, key, timestamp) {
      this.payload = payload;
      this.key = key;
      this.timestamp = time(timestamp);
    }
    get keyStr() { return this.key === undefined ? '' : fromUtf8.decode(this.key); }
    get payloadStr() { return fromUtf8.decode(this.payload); }
  }

  // A JavaScript exception fails the call with its message.
  const guard = (f) => {
    try {
      return f();
    } catch (e) {
      throw typeof e === 'string' ? e : `${e && e.name ? e.name : 'Error'}: ${e && e.message ? e.message : e}`;
    }
  };

  function exportOperator(Operator) {
    const ctx = new Context();
    let op;
    return {
      open(info) { op = guard(() => Operator.open(new OpenContext(info))); },
      process(input) { guard(() => op.process(ctx, new Element(input.payload, input.key, input.timestamp))); },
      processBatch(batch) {
        const data = batch.data;
        batch.elements.forEach((e, i) => {
          setCurrentElement(i);
          const key = e.hasKey ? data.subarray(e.keyStart, e.keyStart + e.keyLen) : undefined;
          const payload = data.subarray(e.payloadStart, e.payloadStart + e.payloadLen);
          guard(() => op.process(ctx, new Element(payload, key, e.timestamp)));
        });
      },
      processBroadcast(input) {
        if (!op.processBroadcast) throw 'this operator does not take a broadcast input';
        guard(() => op.processBroadcast(ctx, new Element(input.payload, input.key, input.timestamp)));
      },
      onTimer(timer) {
        if (op.onTimer) guard(() => op.onTimer(ctx, { time: time(timer.time), key: timer.key, domain: timer.domain }));
      },
      endOfInput() { if (op.endOfInput) guard(() => op.endOfInput(ctx)); },
      migrateValue(state, fromVersion, value) {
        if (!Operator.migrateValue) throw `state '${state}': no migration from version ${fromVersion} (define migrateValue)`;
        return guard(() => Operator.migrateValue(state, fromVersion, value));
      },
    };
  }

  return { export: exportOperator, encode, decode };
})();
