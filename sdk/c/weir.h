/*
 * weir.h: write Weir stream operators in C (or C++), over the
 * `weir:operator` WIT contract (wit/ at the repository root).
 *
 * An operator is a C file that defines weir_open() and weir_process() (and,
 * if it needs them, the optional callbacks below); sdk/c/build.sh compiles
 * it with this SDK and the bindings wit-bindgen generated from wit/
 * (sdk/c/bindings/) into a component that `host run` loads:
 *
 *     sdk/c/build.sh counter.wasm counter.c
 *
 * The SDK owns the component's exports. It hands the operator one element
 * at a time, and does the batching itself: inside a batch, value and
 * accumulator state is read with one host call per state (get-batch) and written back with one
 * (set-batch), and output is sent with one emit-batch call.
 *
 * Conventions:
 *  - Functions that can fail return bool: true on success; false after
 *    recording a message (weir_error()) that names the state and carries
 *    the host's reason. A callback that returns false fails the task with
 *    the current message, and the host reports it with the operator's uid
 *    and the record being processed. weir_fail() records a message of your
 *    own and returns false, so `return weir_fail("...")` ends a callback.
 *  - Bytes are (pointer, length) pairs (weir_bytes), not NUL-terminated.
 *    Bytes the SDK returns stay valid until the next call on the same state
 *    (or, for input, until the callback returns); copy what you keep.
 *  - Values are stored as bytes; the u64/i64 helpers encode them as
 *    postcard varints, as the Rust SDK stores u64/i64 (and the Python and
 *    JavaScript SDKs their integers), so any of them can read the state.
 *  - Keyed state and timers act on the current key: the key of the element
 *    being processed, or of the timer that fired.
 *  - Running out of memory traps the instance (the task fails).
 *
 * Every state kind of the contract is here: keyed value, list and map
 * state, reducing and aggregating state (accumulators the operator
 * combines itself), operator list state (even-split or union) and
 * broadcast map state; and timers, output, params and time. The generated
 * bindings (bindings/operator.h) follow the WIT one to one, for what this
 * header leaves out.
 */
#ifndef WEIR_H
#define WEIR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes borrowed from the SDK or the host: `len` bytes at `ptr`. */
typedef struct weir_bytes {
    const uint8_t *ptr;
    size_t len;
} weir_bytes;

/* One input or output record. */
typedef struct weir_element {
    /* The record's bytes. */
    weir_bytes payload;
    /* Its key, on a keyed input (`partition = "key"`); an empty key is a key. */
    bool has_key;
    weir_bytes key;
    /* Its event time in milliseconds since the Unix epoch, if any. */
    bool has_timestamp;
    int64_t timestamp;
} weir_element;

/* Which clock a timer fires on. */
typedef enum weir_time_domain {
    WEIR_EVENT_TIME = 0,
    WEIR_PROCESSING_TIME = 1,
} weir_time_domain;

/* A timer that fired. */
typedef struct weir_timer {
    /* The time it was registered for (milliseconds since the epoch). */
    int64_t time;
    weir_time_domain domain;
    /* Its key, which is also the current key during weir_on_timer(). */
    weir_bytes key;
} weir_timer;

/* Who this subtask is, given to weir_open(). */
typedef struct weir_info {
    /* The operator's uid from job.toml (NUL-terminated). */
    const char *uid;
    /* This subtask's index, 0 to parallelism - 1. */
    uint32_t subtask_index;
    uint32_t parallelism;
    /* The number of key groups of the job. */
    uint32_t max_parallelism;
    /* 0 on the first run; 1, 2, ... after each restart from a checkpoint. */
    uint32_t attempt_number;
} weir_info;

/* ---- The callbacks an operator defines ---------------------------------- */

/* Required. Called once per subtask before anything else: register state
 * here (weir_register_value(), ...) and read params (weir_param()). */
bool weir_open(const weir_info *info);

/* Required. Processes one element of the main input; its key is the
 * current key. */
bool weir_process(const weir_element *input);

/* Optional. A timer fired; its key is the current key. Default: ignore. */
bool weir_on_timer(const weir_timer *timer);

/* Optional. Every input ended (bounded sources); emit final results here.
 * Default: nothing. */
bool weir_end_of_input(void);

/* Optional. Processes one element of a broadcast input (no current key).
 * Default: fail, the operator takes no broadcast input. */
bool weir_process_broadcast(const weir_element *input);

/* Optional. Converts a value of state `state` written with value-format
 * version `from_version` to the version this operator registers. Set *out
 * to bytes from malloc() (the SDK frees them). Default: refuse, which
 * aborts the restore or swap and keeps the old state. */
bool weir_migrate_value(const char *state, uint32_t from_version, weir_bytes value, weir_bytes *out);

/* ---- Errors ------------------------------------------------------------- */

/* Records a message (printf format) as the reason the callback fails, and
 * returns false. */
bool weir_fail(const char *format, ...) __attribute__((format(printf, 1, 2)));

/* The message of the last failure (empty if none). */
const char *weir_error(void);

/* ---- Params and time ---------------------------------------------------- */

/* The value of param `name` from the operator's [operators.params] in
 * job.toml (NUL-terminated), or NULL when absent. Valid for the life of the
 * instance. */
const char *weir_param(const char *name);

/* The operator's event-time watermark (INT64_MIN before the first). */
int64_t weir_watermark(void);

/* The host's wall clock, in milliseconds since the Unix epoch. */
int64_t weir_processing_time(void);

/* The current key; false (with a message) where there is none. */
bool weir_current_key(weir_bytes *key);

/* ---- Output ------------------------------------------------------------- */

/* Emits `payload` with no key and no timestamp. */
void weir_emit(const void *payload, size_t len);

/* Emits `payload` under `key`, so a keyed downstream operator sees it as
 * that key. */
void weir_emit_keyed(const void *key, size_t key_len, const void *payload, size_t len);

/* Emits an element: payload, optional key and optional timestamp. */
void weir_emit_element(const weir_element *output);

/* Emits one element whose payload is `parts` joined (no separator), with
 * `key` and `timestamp` when not NULL; no intermediate buffer. */
void weir_emit_parts(const weir_bytes *key, const int64_t *timestamp, const weir_bytes *parts, size_t count);

/* ---- State registration ------------------------------------------------- */

/* How a state is registered. Zero values are the defaults: version 1,
 * encoding "raw", no TTL. */
typedef struct weir_state_options {
    /* The version of the value format (see weir_migrate_value()); 0 means
     * 1, the first version, as in the other SDKs. */
    uint32_t version;
    /* The encoding's name for `host inspect` ("postcard", "utf8", ...). */
    const char *encoding;
    /* Time-to-live of each key's entry in milliseconds; 0 keeps entries
     * until cleared. */
    uint64_t ttl_ms;
    /* With a TTL: reads renew the entry too (else only writes do). */
    bool ttl_renew_on_read;
    /* With a TTL: an expired entry may be returned until cleaned up. */
    bool ttl_return_expired;
} weir_state_options;

typedef struct weir_value_state weir_value_state;
typedef struct weir_list_state weir_list_state;
typedef struct weir_map_state weir_map_state;
typedef struct weir_operator_list_state weir_operator_list_state;
typedef struct weir_broadcast_map_state weir_broadcast_map_state;

/* How an operator list is dealt out when the operator's parallelism
 * changes on a restore or rescale. */
typedef enum weir_redistribution {
    /* Item j of old subtask i goes to new subtask (i + j) mod parallelism. */
    WEIR_EVEN_SPLIT = 0,
    /* Every subtask gets the items of all subtasks. */
    WEIR_UNION = 1,
} weir_redistribution;

/* Registers state `name` (in weir_open() only) with the default options, or
 * with `options` (NULL for the defaults). NULL on failure, with the reason
 * in weir_error(). Handles live as long as the instance. */
weir_value_state *weir_register_value(const char *name, const weir_state_options *options);
weir_list_state *weir_register_list(const char *name, const weir_state_options *options);
weir_map_state *weir_register_map(const char *name, const weir_state_options *options);

/* Reducing and aggregating state: one accumulator per key. The host stores
 * the accumulator and never runs the function: read it with
 * weir_value_get() (absent before the key's first input), combine the
 * input with it in C, and write it back with weir_value_set(), all on the
 * batch path like a value. Registered as reducing or aggregating state, so
 * a savepoint restores into the same kind of state of another SDK (Rust's
 * ReducingState<T> stores a postcard T, AggregatingState the postcard of
 * its accumulator type). */
weir_value_state *weir_register_reducing(const char *name, const weir_state_options *options);
weir_value_state *weir_register_aggregating(const char *name, const weir_state_options *options);

/* Operator list state: one list per subtask, not per key, redistributed by
 * `mode` on a change of parallelism. `options` may not set a TTL. */
weir_operator_list_state *weir_register_operator_list(const char *name, weir_redistribution mode,
                                                      const weir_state_options *options);

/* Broadcast map state: user key to value, the same on every subtask;
 * written only in weir_process_broadcast(), read anywhere. `options` may
 * not set a TTL. */
weir_broadcast_map_state *weir_register_broadcast_map(const char *name, const weir_state_options *options);

/* ---- Value state: one value per key ------------------------------------- */

/* The current key's value. *present says whether there is one; without
 * one, *value is empty. */
bool weir_value_get(weir_value_state *state, weir_bytes *value, bool *present);
/* Replaces the current key's value. */
bool weir_value_set(weir_value_state *state, const void *value, size_t len);
/* Removes the current key's value. */
bool weir_value_clear(weir_value_state *state);

/* The value as an unsigned integer (a postcard varint, Rust's u64). Without
 * a value *value is left as it is, so initialise it with the default;
 * `present` may be NULL. */
bool weir_value_get_u64(weir_value_state *state, uint64_t *value, bool *present);
bool weir_value_set_u64(weir_value_state *state, uint64_t value);
/* The same for a signed integer (zigzag varint, Rust's i64). */
bool weir_value_get_i64(weir_value_state *state, int64_t *value, bool *present);
bool weir_value_set_i64(weir_value_state *state, int64_t value);

/* ---- List state: an ordered list of values per key ---------------------- */

bool weir_list_add(weir_list_state *state, const void *value, size_t len);
/* The number of values in the current key's list. */
bool weir_list_len(weir_list_state *state, uint32_t *len);
/* Up to `max` values starting at index `start`: *count of them in *values
 * (fewer than `max` means the list ends). */
bool weir_list_read(weir_list_state *state, uint32_t start, uint32_t max, const weir_bytes **values, size_t *count);
bool weir_list_clear(weir_list_state *state);
/* Replaces the current key's list with `count` values (none clears it). */
bool weir_list_update(weir_list_state *state, const weir_bytes *values, size_t count);

/* ---- Map state: user key to value, per key ------------------------------ */

bool weir_map_get(weir_map_state *state, const void *user_key, size_t key_len, weir_bytes *value, bool *present);
bool weir_map_put(weir_map_state *state, const void *user_key, size_t key_len, const void *value, size_t len);
bool weir_map_remove(weir_map_state *state, const void *user_key, size_t key_len);
bool weir_map_contains(weir_map_state *state, const void *user_key, size_t key_len, bool *contains);
bool weir_map_clear(weir_map_state *state);
bool weir_map_is_empty(weir_map_state *state, bool *empty);

/* A map entry. */
typedef struct weir_entry {
    weir_bytes key;
    weir_bytes value;
} weir_entry;

/* Up to `max` entries of the current key's map, in the order of their user
 * keys' bytes, starting after user key *after (from the first entry when
 * `after` is NULL): *count of them in *entries (fewer than `max` means the
 * map ends). To page, pass the last entry's key as `after`; it may point
 * into the previous page. */
bool weir_map_entries(weir_map_state *state, const weir_bytes *after, uint32_t max, const weir_entry **entries,
                      size_t *count);

/* ---- Operator list state: a list per subtask ---------------------------- */

bool weir_operator_list_add(weir_operator_list_state *state, const void *value, size_t len);
/* Replaces the list with `count` values (none clears it). */
bool weir_operator_list_update(weir_operator_list_state *state, const weir_bytes *values, size_t count);
bool weir_operator_list_len(weir_operator_list_state *state, uint32_t *len);
/* As weir_list_read(). */
bool weir_operator_list_read(weir_operator_list_state *state, uint32_t start, uint32_t max, const weir_bytes **values,
                             size_t *count);
bool weir_operator_list_clear(weir_operator_list_state *state);

/* ---- Broadcast map state: user key to value, on every subtask ------------ */

bool weir_broadcast_get(weir_broadcast_map_state *state, const void *user_key, size_t key_len, weir_bytes *value,
                        bool *present);
bool weir_broadcast_put(weir_broadcast_map_state *state, const void *user_key, size_t key_len, const void *value,
                        size_t len);
bool weir_broadcast_remove(weir_broadcast_map_state *state, const void *user_key, size_t key_len);
bool weir_broadcast_contains(weir_broadcast_map_state *state, const void *user_key, size_t key_len, bool *contains);
/* As weir_map_entries(). */
bool weir_broadcast_entries(weir_broadcast_map_state *state, const weir_bytes *after, uint32_t max,
                            const weir_entry **entries, size_t *count);
bool weir_broadcast_clear(weir_broadcast_map_state *state);

/* ---- Timers, on the current key ----------------------------------------- */

bool weir_register_timer(weir_time_domain domain, int64_t time);
bool weir_delete_timer(weir_time_domain domain, int64_t time);

/* ---- Postcard integers -------------------------------------------------- */

/* The most bytes an encoded 64-bit integer takes. */
#define WEIR_VARINT_MAX 10

/* Writes `value` as a postcard varint into `out`; returns its length. */
size_t weir_encode_u64(uint8_t out[WEIR_VARINT_MAX], uint64_t value);
size_t weir_encode_i64(uint8_t out[WEIR_VARINT_MAX], int64_t value);
/* Reads a postcard varint that spans all of `bytes`; false if it does not. */
bool weir_decode_u64(weir_bytes bytes, uint64_t *value);
bool weir_decode_i64(weir_bytes bytes, int64_t *value);

/* Postcard sequences (a tuple or struct is its fields one after another):
 * these read one field from the front of *bytes and move *bytes past it;
 * false if *bytes does not start with one. weir_take_bytes() reads a
 * length-prefixed field (a string, bytes, a Vec<u8>); *value points into
 * the input. */
bool weir_take_u64(weir_bytes *bytes, uint64_t *value);
bool weir_take_i64(weir_bytes *bytes, int64_t *value);
bool weir_take_bytes(weir_bytes *bytes, weir_bytes *value);

#ifdef __cplusplus
}
#endif

#endif /* WEIR_H */
