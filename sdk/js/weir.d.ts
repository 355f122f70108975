// Type declarations of Weir's JavaScript SDK (weir.js). weir-build puts the
// SDK in front of the operator module, so `weir` is in scope there without
// an import; reference these declarations with
// `/// <reference types="@weir/sdk" />` (or list the package in a
// tsconfig's `types`).

declare namespace Weir {
  /** A value type: encodes a JavaScript value into postcard bytes, the Rust
   * SDK's encoding, and decodes it back. */
  interface Type<T> {
    readonly name: string;
    /** @internal */ enc(writer: unknown, value: T): void;
    /** @internal */ dec(reader: unknown): T;
  }

  /** A type, or a shorthand: `Number` (u64), `String`, `Uint8Array` (bytes),
   * `Boolean` (bool), or an array of types (a tuple). */
  type TypeLike =
    | Type<any>
    | NumberConstructor
    | StringConstructor
    | BooleanConstructor
    | Uint8ArrayConstructor
    | readonly unknown[];

  /** The JavaScript value of a type or shorthand. */
  type ValueOf<K> = K extends Type<infer T>
    ? T
    : K extends NumberConstructor
      ? Integer
      : K extends StringConstructor
        ? string
        : K extends BooleanConstructor
          ? boolean
          : K extends Uint8ArrayConstructor
            ? Uint8Array
            : K extends readonly unknown[]
              ? { -readonly [I in keyof K]: ValueOf<K[I]> }
              : never;

  /** An integer: a number up to 2^53 - 1 in magnitude, a BigInt beyond. */
  type Integer = number | bigint;

  /** Time-to-live of keyed state entries, in processing time: milliseconds,
   * or the full form. */
  type Ttl =
    | number
    | {
        ms: number;
        /** Reads renew the entry too (default: only writes). */
        renewOnRead?: boolean;
        /** An expired entry may be returned until clean-up removes it. */
        returnExpired?: boolean;
      };

  /** A state's options: its value-format version (default 1), or the
   * version and a TTL. */
  type StateOptions = number | { version?: number; ttl?: Ttl };

  /** Refused by the host (a state or timer call), or a value that cannot be
   * encoded or decoded. The message names the state. */
  class WeirError extends Error {
    /** The host's `error-code` tag (`no-current-key`, `kind-mismatch`, ...),
     * undefined for encoding errors. */
    readonly code?: string;
  }

  /** One input record. */
  interface Element {
    readonly payload: Uint8Array;
    /** Undefined on an unkeyed input. */
    readonly key: Uint8Array | undefined;
    /** Whether the record has a key; cheaper than reading `key`, which
     * makes a view of its bytes. */
    readonly hasKey: boolean;
    /** Event time in ms since the Unix epoch, if the record has one. */
    readonly timestamp: number | undefined;
    readonly payloadStr: string;
    /** The key as text; '' without a key. */
    readonly keyStr: string;
  }

  /** A timer that fired. */
  interface Timer {
    readonly time: number;
    readonly domain: 'event-time' | 'processing-time';
    readonly key: Uint8Array;
    readonly keyStr: string;
  }

  interface OperatorInfo {
    readonly uid: string;
    readonly subtaskIndex: number;
    readonly parallelism: number;
    readonly maxParallelism: number;
    readonly attemptNumber: number;
  }

  /** One value per key. */
  interface ValueState<T> {
    get(): T | undefined;
    set(value: T): void;
    clear(): void;
  }

  /** An ordered list per key (or per subtask: operator list state). */
  interface ListState<T> extends Iterable<T> {
    add(value: T): void;
    addAll(values: T[]): void;
    /** Replaces the list; an empty array clears it. */
    update(values: T[]): void;
    /** The whole list, read a page at a time. */
    get(): T[];
    len(): number;
    clear(): void;
  }

  /** A map per key (or replicated: broadcast map state). Entries iterate in
   * the order of their encoded keys' bytes. */
  interface MapState<K, V> extends Iterable<[K, V]> {
    get(key: K): V | undefined;
    put(key: K, value: V): void;
    remove(key: K): void;
    contains(key: K): boolean;
    isEmpty(): boolean;
    entries(): IterableIterator<[K, V]>;
    keys(): IterableIterator<K>;
    values(): IterableIterator<V>;
    clear(): void;
  }

  /** One accumulator per key, folded with a reduce function. */
  interface ReducingState<T> {
    /** Folds `value` in; returns the new accumulator. */
    add(value: T): T;
    get(): T | undefined;
    clear(): void;
  }

  /** How an aggregating state folds inputs into its accumulator. */
  interface AggregateFunction<In, Acc, Out> {
    create(): Acc;
    add(input: In, accumulator: Acc): Acc;
    result(accumulator: Acc): Out;
  }

  interface AggregatingState<In, Out> {
    add(input: In): void;
    /** The result, or undefined before the first input. */
    get(): Out | undefined;
    clear(): void;
  }

  /** Passed to `open`: who the subtask is, its params, state registration. */
  interface OpenContext {
    readonly info: OperatorInfo;
    /** The operator's `[operators.params]` from `job.toml`, as strings. */
    readonly params: ReadonlyMap<string, string>;
    param(name: string): string | undefined;
    param<F>(name: string, fallback: F): string | F;
    /** Param `name` as a number; a value that is not one is an error. */
    paramNumber<F>(name: string, fallback: F): number | F;
    valueState<K extends TypeLike = NumberConstructor>(name: string, type?: K, options?: StateOptions): ValueState<ValueOf<K>>;
    listState<K extends TypeLike = NumberConstructor>(name: string, type?: K, options?: StateOptions): ListState<ValueOf<K>>;
    mapState<KK extends TypeLike = StringConstructor, VK extends TypeLike = NumberConstructor>(
      name: string,
      keyType?: KK,
      valueType?: VK,
      options?: StateOptions,
    ): MapState<ValueOf<KK>, ValueOf<VK>>;
    reducingState<K extends TypeLike>(
      name: string,
      type: K,
      reduce: (accumulator: ValueOf<K>, value: ValueOf<K>) => ValueOf<K>,
      options?: StateOptions,
    ): ReducingState<ValueOf<K>>;
    aggregatingState<K extends TypeLike, In, Out>(
      name: string,
      accumulatorType: K,
      fn: AggregateFunction<In, ValueOf<K>, Out>,
      options?: StateOptions,
    ): AggregatingState<In, Out>;
    /** A list per subtask, split on rescale as `redistribution` says
     * (default even-split). No TTL. */
    operatorListState<K extends TypeLike = NumberConstructor>(
      name: string,
      type?: K,
      options?: { redistribution?: 'even-split' | 'union'; version?: number },
    ): ListState<ValueOf<K>>;
    /** A map replicated on every subtask, writable only in
     * `processBroadcast`. No TTL. */
    broadcastMapState<KK extends TypeLike = StringConstructor, VK extends TypeLike = NumberConstructor>(
      name: string,
      keyType?: KK,
      valueType?: VK,
      options?: number | { version?: number },
    ): MapState<ValueOf<KK>, ValueOf<VK>>;
    /** Emits as `Context.emit` does, before any input (e.g. the operator or
     * broadcast state this subtask was restored with). */
    emit(payload: string | Uint8Array, key?: string | Uint8Array, timestamp?: number | bigint): void;
  }

  /** Passed to every call after `open`. */
  interface Context {
    /** Emits `payload`, under `key` if given, with `timestamp` (ms) if given. */
    emit(payload: string | Uint8Array, key?: string | Uint8Array, timestamp?: number | bigint): void;
    currentKey(): Uint8Array | undefined;
    /** The event-time watermark in ms (-2^63 before the first). */
    watermark(): number;
    /** The host's wall clock in ms since the Unix epoch. */
    processingTime(): number;
    registerEventTimeTimer(time: number): void;
    registerProcessingTimeTimer(time: number): void;
    deleteEventTimeTimer(time: number): void;
    deleteProcessingTimeTimer(time: number): void;
  }

  /** An operator instance: one per parallel subtask. */
  interface Operator {
    process(ctx: Context, element: Element): void;
    processBroadcast?(ctx: Context, element: Element): void;
    onTimer?(ctx: Context, timer: Timer): void;
    endOfInput?(ctx: Context): void;
  }

  /** What `weir.export` takes: a class (or object) whose static `open`
   * registers state and returns the operator. */
  interface OperatorClass {
    open(ctx: OpenContext): Operator;
    /** Converts a stored value written with value-format version
     * `fromVersion` to the current one. */
    migrateValue?(state: string, fromVersion: number, value: Uint8Array): Uint8Array;
  }

  interface Sdk {
    /** The component's `handler` export: `export const handler = weir.export(MyOperator);` */
    export(operator: OperatorClass): unknown;
    encode<K extends TypeLike>(type: K, value: ValueOf<K>): Uint8Array;
    decode<K extends TypeLike>(type: K, bytes: Uint8Array): ValueOf<K>;
    /** A `migrateValue` body: `value` of type `from`, through `f`, as `to`. */
    convertValue<F extends TypeLike, T extends TypeLike>(
      value: Uint8Array,
      from: F,
      to: T,
      f: (old: ValueOf<F>) => ValueOf<T>,
    ): Uint8Array;
    WeirError: typeof WeirError;

    u8: Type<number>;
    u16: Type<number>;
    u32: Type<number>;
    u64: Type<Integer>;
    i8: Type<number>;
    i16: Type<number>;
    i32: Type<number>;
    i64: Type<Integer>;
    f32: Type<number>;
    f64: Type<number>;
    bool: Type<boolean>;
    string: Type<string>;
    bytes: Type<Uint8Array>;
    /** Any JSON value, stored as a postcard string of its JSON text. */
    json: Type<unknown>;
    /** Rust's Option: null (or undefined) is None. */
    option<K extends TypeLike>(type: K): Type<ValueOf<K> | null>;
    /** Rust's Vec. */
    list<K extends TypeLike>(type: K): Type<ValueOf<K>[]>;
    /** Rust's HashMap or BTreeMap; read as a Map, written from a Map or a
     * plain object. */
    map<KK extends TypeLike, VK extends TypeLike>(key: KK, value: VK): Type<Map<ValueOf<KK>, ValueOf<VK>>>;
    /** A map with string keys, read as a plain object. */
    dict<VK extends TypeLike>(value: VK): Type<Record<string, ValueOf<VK>>>;
    /** Rust's tuple: an array. */
    tuple<K extends TypeLike[]>(...items: K): Type<{ [I in keyof K]: ValueOf<K[I]> }>;
    /** Rust's struct: a plain object, fields encoded in the order given. */
    struct<F extends Record<string, TypeLike>>(fields: F): Type<{ [N in keyof F]: ValueOf<F[N]> }>;
  }
}

declare const weir: Weir.Sdk;
