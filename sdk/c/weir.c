/*
 * weir.c: the C SDK's implementation (see weir.h for the API). It owns the
 * component's exports (the generated `exports_weir_operator_handler_*`
 * functions), turns them into the operator's callbacks, and keeps the
 * batch fast path out of the operator's sight:
 *  - inside process-batch, each value or accumulator state is read with
 *    one get-batch call when first used in the batch, updated in guest
 *    memory, and written back with one set-batch call when the batch
 *    ends; elements with equal keys share a key slot, so a later element
 *    sees an earlier one's write, as with per-element calls;
 *  - other keyed calls (list and map state, timers, the current key) first
 *    tell the host which element is current, only when they are used;
 *  - output is buffered and sent with one emit-batch call per export call.
 * It must not hold input bytes past the callback that received them.
 */
#include "weir.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bindings/operator.h"

/* ---- Memory --------------------------------------------------------------- */

/* Grows `*ptr` to hold at least `need` items of `size` bytes; out of memory
 * traps (there is nothing sensible an operator could do instead). */
static void reserve(void **ptr, size_t *cap, size_t need, size_t size) {
    if (need <= *cap) return;
    size_t cap2 = *cap ? *cap * 2 : 64;
    while (cap2 < need) cap2 *= 2;
    void *p = realloc(*ptr, cap2 * size);
    if (!p) abort();
    *ptr = p;
    *cap = cap2;
}

typedef struct buffer {
    uint8_t *ptr;
    size_t len, cap;
} buffer;

static void append(buffer *b, const void *data, size_t len) {
    reserve((void **)&b->ptr, &b->cap, b->len + len, 1);
    if (len) memcpy(b->ptr + b->len, data, len);
    b->len += len;
}

/* A NUL-terminated copy of `len` bytes. */
static char *copy_string(const uint8_t *s, size_t len) {
    char *c = malloc(len + 1);
    if (!c) abort();
    memcpy(c, s, len);
    c[len] = 0;
    return c;
}

static weir_bytes bytes_of(operator_list_u8_t l) {
    return (weir_bytes){l.ptr, l.len};
}

/* ---- Errors --------------------------------------------------------------- */

static char error_message[1024];

bool weir_fail(const char *format, ...) {
    va_list args;
    va_start(args, format);
    vsnprintf(error_message, sizeof error_message, format, args);
    va_end(args);
    return false;
}

const char *weir_error(void) {
    return error_message;
}

/* Records the host's refusal `code` for state (or "timer") `what`, and
 * frees the code's message. */
static bool host_error(const char *what, weir_operator_types_error_code_t *code) {
    const operator_string_t *s = &code->val.backend;
    int n = (int)s->len;
    const char *text = (const char *)s->ptr;
    switch (code->tag) {
    case WEIR_OPERATOR_TYPES_ERROR_CODE_NOT_IN_OPEN:
        weir_fail("%s: states are registered only in open (%.*s)", what, n, text);
        break;
    case WEIR_OPERATOR_TYPES_ERROR_CODE_KIND_MISMATCH:
        weir_fail("%s: kind mismatch: %.*s", what, n, text);
        break;
    case WEIR_OPERATOR_TYPES_ERROR_CODE_INVALID_NAME:
        weir_fail("%s: invalid state name: %.*s", what, n, text);
        break;
    case WEIR_OPERATOR_TYPES_ERROR_CODE_NO_CURRENT_KEY:
        weir_fail("%s: no current key (keyed state and timers need a keyed input)", what);
        break;
    case WEIR_OPERATOR_TYPES_ERROR_CODE_READ_ONLY:
        weir_fail("%s: read-only here: %.*s", what, n, text);
        break;
    case WEIR_OPERATOR_TYPES_ERROR_CODE_OUT_OF_RANGE:
        weir_fail("%s: element index %u is past the batch", what, (unsigned)code->val.out_of_range);
        break;
    case WEIR_OPERATOR_TYPES_ERROR_CODE_BACKEND:
        weir_fail("%s: state backend failed: %.*s", what, n, text);
        break;
    default:
        weir_fail("%s: error code %u", what, (unsigned)code->tag);
    }
    weir_operator_types_error_code_free(code);
    return false;
}

/* "state 'name'", for messages. */
static const char *state_label(const char *name) {
    static char label[160];
    snprintf(label, sizeof label, "state '%s'", name);
    return label;
}

/* ---- Where user code is inside a batch ------------------------------------ */

typedef struct batch_position {
    bool active;         /* inside process-batch */
    uint64_t generation; /* one per batch */
    uint32_t index;      /* the element user code is on */
    uint32_t host_index; /* the element the host has current */
} batch_position;

static batch_position position;

static struct {
    uint64_t generation;
    operator_list_u32_t list;
} slots;

/* Makes the host's current element match user code's, before a
 * per-element keyed call. */
static bool sync_host(void) {
    if (position.active && position.host_index != position.index) {
        weir_operator_context_error_code_t err;
        if (!weir_operator_context_set_current_element(position.index, &err)) return host_error("context", &err);
        position.host_index = position.index;
    }
    return true;
}

/* The key slot of the current element, asking the host once per batch. */
static bool current_slot(uint32_t *slot) {
    if (slots.generation != position.generation) {
        operator_list_u32_free(&slots.list);
        slots.list = (operator_list_u32_t){0};
        weir_operator_context_error_code_t err;
        if (!weir_operator_context_batch_slots(&slots.list, &err)) return host_error("context", &err);
        slots.generation = position.generation;
    }
    if (position.index >= slots.list.len) return weir_fail("no key slot for element %u", (unsigned)position.index);
    *slot = slots.list.ptr[position.index];
    return true;
}

/* ---- Output --------------------------------------------------------------- */

/* The packed index entries of wit/types.wit. WebAssembly is little-endian,
 * so these structs (no padding) are the documented bytes; entries are
 * copied in and out with memcpy, as a byte list need not be aligned. */
typedef struct {
    uint32_t payload_start, payload_len, key_start, key_len, flags, zero;
    int64_t timestamp;
} element_entry;
typedef struct {
    uint32_t slot, start, len, flags;
} value_entry;
_Static_assert(sizeof(element_entry) == 32, "element-batch entries are 32 bytes");
_Static_assert(sizeof(value_entry) == 16, "value-batch entries are 16 bytes");
enum { HAS_KEY = 1, HAS_TIMESTAMP = 2, PRESENT = 1 };

static buffer out_data;
static buffer out_index;

void weir_emit_parts(const weir_bytes *key, const int64_t *timestamp, const weir_bytes *parts, size_t count) {
    size_t payload_start = out_data.len;
    for (size_t i = 0; i < count; i++) append(&out_data, parts[i].ptr, parts[i].len);
    size_t key_start = out_data.len;
    if (key) append(&out_data, key->ptr, key->len);
    element_entry entry = {
        .payload_start = (uint32_t)payload_start,
        .payload_len = (uint32_t)(key_start - payload_start),
        .key_start = (uint32_t)key_start,
        .key_len = key ? (uint32_t)key->len : 0,
        .flags = (key ? HAS_KEY : 0) | (timestamp ? HAS_TIMESTAMP : 0),
        .timestamp = timestamp ? *timestamp : 0,
    };
    append(&out_index, &entry, sizeof entry);
}

void weir_emit(const void *payload, size_t len) {
    weir_bytes part = {payload, len};
    weir_emit_parts(NULL, NULL, &part, 1);
}

void weir_emit_keyed(const void *key, size_t key_len, const void *payload, size_t len) {
    weir_bytes k = {key, key_len}, part = {payload, len};
    weir_emit_parts(&k, NULL, &part, 1);
}

void weir_emit_element(const weir_element *e) {
    weir_emit_parts(e->has_key ? &e->key : NULL, e->has_timestamp ? &e->timestamp : NULL, &e->payload, 1);
}

/* Sends the buffered output; after every export call. */
static void flush_output(void) {
    if (!out_index.len) return;
    weir_operator_collector_element_batch_t batch = {
        .data = {out_data.ptr, out_data.len},
        .index = {out_index.ptr, out_index.len},
    };
    weir_operator_collector_emit_batch(&batch);
    out_data.len = 0;
    out_index.len = 0;
}

/* ---- Params, time, key ---------------------------------------------------- */

static weir_info info;
static struct {
    char **names, **values;
    size_t len;
} params;

const char *weir_param(const char *name) {
    for (size_t i = 0; i < params.len; i++)
        if (!strcmp(params.names[i], name)) return params.values[i];
    return NULL;
}

int64_t weir_watermark(void) {
    return weir_operator_context_current_watermark();
}

int64_t weir_processing_time(void) {
    return weir_operator_context_current_processing_time();
}

bool weir_current_key(weir_bytes *key) {
    static operator_list_u8_t owned;
    if (!sync_host()) return false;
    operator_list_u8_free(&owned);
    if (!weir_operator_context_current_key(&owned)) {
        owned = (operator_list_u8_t){0};
        return weir_fail("no current key (keyed state and timers need a keyed input)");
    }
    *key = bytes_of(owned);
    return true;
}

/* ---- Registration --------------------------------------------------------- */

static weir_operator_types_state_descriptor_t descriptor(const char *name, const weir_state_options *o) {
    static const weir_state_options defaults = {0};
    if (!o) o = &defaults;
    weir_operator_types_state_descriptor_t d = {.version = o->version ? o->version : 1};
    operator_string_set(&d.name, name);
    operator_string_set(&d.encoding, o->encoding ? o->encoding : "raw");
    if (o->ttl_ms) {
        d.ttl.is_some = true;
        d.ttl.val.ttl_ms = o->ttl_ms;
        d.ttl.val.update = o->ttl_renew_on_read ? WEIR_OPERATOR_TYPES_TTL_UPDATE_ON_READ_AND_WRITE
                                                : WEIR_OPERATOR_TYPES_TTL_UPDATE_ON_CREATE_AND_WRITE;
        d.ttl.val.visibility = o->ttl_return_expired
                                   ? WEIR_OPERATOR_TYPES_TTL_VISIBILITY_RETURN_EXPIRED_IF_NOT_CLEANED_UP
                                   : WEIR_OPERATOR_TYPES_TTL_VISIBILITY_NEVER_RETURN_EXPIRED;
    }
    return d;
}

/* A zeroed state handle of `size` bytes, named: every handle struct has
 * its name as first member, so a pointer to it is a pointer to that. */
static void *new_handle(size_t size, const char *name) {
    char **handle = calloc(1, size);
    if (!handle) abort();
    *handle = copy_string((const uint8_t *)name, strlen(name));
    return handle;
}

/* ---- Value state ---------------------------------------------------------- */

/* A key slot's value as written during the batch. */
typedef struct written {
    uint32_t start, len;
    uint8_t state; /* UNWRITTEN, WRITTEN or CLEARED */
} written;
enum { UNWRITTEN, WRITTEN, CLEARED };

struct weir_value_state {
    char *name;
    /* A value state's resource, or an accumulator state's (reducing or
     * aggregating): the same five calls on another resource type. */
    bool accumulator;
    weir_operator_keyed_state_borrow_value_state_t handle;
    weir_operator_keyed_state_borrow_accumulator_state_t acc;
    /* The last single (non-batch) read, owned. */
    operator_option_list_u8_t single;
    /* The batch cache: the values of every key slot as the host had them
     * at the batch's start (from get-batch), the values written since in
     * `arena`, and the written slots in first-write order. */
    uint64_t generation;
    bool loaded, queued;
    weir_operator_keyed_state_value_batch_t host;
    size_t slots; /* entries of host.index */
    written *written;
    size_t written_cap;
    buffer arena;
    uint32_t *dirty;
    size_t dirty_len, dirty_cap;
    buffer entries; /* the set-batch index */
    /* The next state to write back when the batch ends. */
    weir_value_state *next_queued;
};

static weir_value_state *queued;

weir_value_state *weir_register_value(const char *name, const weir_state_options *options) {
    weir_operator_types_state_descriptor_t d = descriptor(name, options);
    weir_operator_keyed_state_own_value_state_t own;
    weir_operator_types_error_code_t err;
    if (!weir_operator_keyed_state_register_value(&d, &own, &err)) return host_error(state_label(name), &err), NULL;
    weir_value_state *s = new_handle(sizeof *s, name);
    s->handle = weir_operator_keyed_state_borrow_value_state(own);
    return s;
}

/* Registers an accumulator state with `reg` (register-reducing or
 * register-aggregating). */
static weir_value_state *register_accumulator(const char *name, const weir_state_options *options,
                                              bool (*reg)(weir_operator_keyed_state_state_descriptor_t *,
                                                          weir_operator_keyed_state_own_accumulator_state_t *,
                                                          weir_operator_keyed_state_error_code_t *)) {
    weir_operator_types_state_descriptor_t d = descriptor(name, options);
    weir_operator_keyed_state_own_accumulator_state_t own;
    weir_operator_types_error_code_t err;
    if (!reg(&d, &own, &err)) return host_error(state_label(name), &err), NULL;
    weir_value_state *s = new_handle(sizeof *s, name);
    s->accumulator = true;
    s->acc = weir_operator_keyed_state_borrow_accumulator_state(own);
    return s;
}

weir_value_state *weir_register_reducing(const char *name, const weir_state_options *options) {
    return register_accumulator(name, options, weir_operator_keyed_state_register_reducing);
}

weir_value_state *weir_register_aggregating(const char *name, const weir_state_options *options) {
    return register_accumulator(name, options, weir_operator_keyed_state_register_aggregating);
}

/* The host calls of a value-shaped state, on whichever resource it is. */
static bool host_get(weir_value_state *s, operator_option_list_u8_t *ret, weir_operator_types_error_code_t *err) {
    return s->accumulator ? weir_operator_keyed_state_method_accumulator_state_get(s->acc, ret, err)
                          : weir_operator_keyed_state_method_value_state_get(s->handle, ret, err);
}

static bool host_set(weir_value_state *s, operator_list_u8_t *v, weir_operator_types_error_code_t *err) {
    return s->accumulator ? weir_operator_keyed_state_method_accumulator_state_set(s->acc, v, err)
                          : weir_operator_keyed_state_method_value_state_set(s->handle, v, err);
}

static bool host_clear(weir_value_state *s, weir_operator_types_error_code_t *err) {
    return s->accumulator ? weir_operator_keyed_state_method_accumulator_state_clear(s->acc, err)
                          : weir_operator_keyed_state_method_value_state_clear(s->handle, err);
}

static bool host_get_batch(weir_value_state *s, weir_operator_keyed_state_value_batch_t *ret,
                           weir_operator_types_error_code_t *err) {
    return s->accumulator ? weir_operator_keyed_state_method_accumulator_state_get_batch(s->acc, ret, err)
                          : weir_operator_keyed_state_method_value_state_get_batch(s->handle, ret, err);
}

static bool host_set_batch(weir_value_state *s, weir_operator_keyed_state_value_batch_t *values,
                           weir_operator_types_error_code_t *err) {
    return s->accumulator ? weir_operator_keyed_state_method_accumulator_state_set_batch(s->acc, values, err)
                          : weir_operator_keyed_state_method_value_state_set_batch(s->handle, values, err);
}

/* Loads the batch's values on the state's first use in this batch. */
static bool prepare(weir_value_state *s) {
    if (s->generation != position.generation) {
        s->generation = position.generation;
        s->loaded = false;
        s->dirty_len = 0;
        s->arena.len = 0;
    }
    if (s->loaded) return true;
    weir_operator_keyed_state_value_batch_free(&s->host);
    weir_operator_types_error_code_t err;
    if (!host_get_batch(s, &s->host, &err)) {
        s->host = (weir_operator_keyed_state_value_batch_t){0};
        s->slots = 0;
        return host_error(state_label(s->name), &err);
    }
    s->slots = s->host.index.len / sizeof(value_entry);
    reserve((void **)&s->written, &s->written_cap, s->slots, sizeof *s->written);
    memset(s->written, 0, s->slots * sizeof *s->written);
    s->loaded = true;
    return true;
}

bool weir_value_get(weir_value_state *s, weir_bytes *value, bool *present) {
    bool dummy;
    if (!present) present = &dummy;
    *value = (weir_bytes){0};
    if (!position.active) {
        weir_operator_types_error_code_t err;
        operator_option_list_u8_free(&s->single);
        if (!host_get(s, &s->single, &err)) {
            s->single = (operator_option_list_u8_t){0};
            return host_error(state_label(s->name), &err);
        }
        *present = s->single.is_some;
        if (*present) *value = bytes_of(s->single.val);
        return true;
    }
    uint32_t slot;
    if (!current_slot(&slot) || !prepare(s)) return false;
    if (slot >= s->slots) return weir_fail("state '%s': bad slot %u", s->name, (unsigned)slot);
    const written *w = &s->written[slot];
    if (w->state != UNWRITTEN) {
        *present = w->state == WRITTEN;
        if (*present) *value = (weir_bytes){s->arena.ptr + w->start, w->len};
        return true;
    }
    value_entry entry;
    memcpy(&entry, s->host.index.ptr + slot * sizeof entry, sizeof entry);
    *present = entry.flags & PRESENT;
    if (*present) *value = (weir_bytes){s->host.data.ptr + entry.start, entry.len};
    return true;
}

/* Records the current key's new value (or its clearing) in the cache. */
static bool put_cached(weir_value_state *s, const void *value, size_t len, bool present) {
    uint32_t slot;
    if (!current_slot(&slot) || !prepare(s)) return false;
    if (slot >= s->slots) return weir_fail("state '%s': bad slot %u", s->name, (unsigned)slot);
    written *w = &s->written[slot];
    if (w->state == UNWRITTEN) {
        reserve((void **)&s->dirty, &s->dirty_cap, s->dirty_len + 1, sizeof *s->dirty);
        s->dirty[s->dirty_len++] = slot;
    }
    if (present) {
        *w = (written){(uint32_t)s->arena.len, (uint32_t)len, WRITTEN};
        append(&s->arena, value, len);
    } else {
        *w = (written){0, 0, CLEARED};
    }
    if (!s->queued) {
        s->queued = true;
        s->next_queued = queued;
        queued = s;
    }
    return true;
}

bool weir_value_set(weir_value_state *s, const void *value, size_t len) {
    if (position.active) return put_cached(s, value, len, true);
    operator_list_u8_t v = {(uint8_t *)value, len};
    weir_operator_types_error_code_t err;
    if (!host_set(s, &v, &err)) return host_error(state_label(s->name), &err);
    return true;
}

bool weir_value_clear(weir_value_state *s) {
    if (position.active) return put_cached(s, NULL, 0, false);
    weir_operator_types_error_code_t err;
    if (!host_clear(s, &err)) return host_error(state_label(s->name), &err);
    return true;
}

/* Writes the batch's changes of `s` back with one set-batch call. */
static bool flush_value(weir_value_state *s) {
    if (!s->dirty_len) return true;
    s->entries.len = 0;
    for (size_t i = 0; i < s->dirty_len; i++) {
        const written *w = &s->written[s->dirty[i]];
        value_entry entry = {s->dirty[i], w->start, w->len, w->state == WRITTEN ? PRESENT : 0};
        append(&s->entries, &entry, sizeof entry);
    }
    weir_operator_keyed_state_value_batch_t values = {
        .data = {s->arena.ptr, s->arena.len},
        .index = {s->entries.ptr, s->entries.len},
    };
    weir_operator_types_error_code_t err;
    bool ok = host_set_batch(s, &values, &err);
    s->dirty_len = 0;
    s->arena.len = 0;
    s->loaded = false;
    return ok || host_error(state_label(s->name), &err);
}

bool weir_value_get_u64(weir_value_state *s, uint64_t *value, bool *present) {
    weir_bytes b;
    bool here;
    if (!weir_value_get(s, &b, &here)) return false;
    if (present) *present = here;
    if (here && !weir_decode_u64(b, value))
        return weir_fail("state '%s': cannot decode value as u64 (postcard varint)", s->name);
    return true;
}

bool weir_value_set_u64(weir_value_state *s, uint64_t value) {
    uint8_t buf[WEIR_VARINT_MAX];
    return weir_value_set(s, buf, weir_encode_u64(buf, value));
}

bool weir_value_get_i64(weir_value_state *s, int64_t *value, bool *present) {
    weir_bytes b;
    bool here;
    if (!weir_value_get(s, &b, &here)) return false;
    if (present) *present = here;
    if (here && !weir_decode_i64(b, value))
        return weir_fail("state '%s': cannot decode value as i64 (postcard zigzag varint)", s->name);
    return true;
}

bool weir_value_set_i64(weir_value_state *s, int64_t value) {
    uint8_t buf[WEIR_VARINT_MAX];
    return weir_value_set(s, buf, weir_encode_i64(buf, value));
}

/* ---- Pages of values and entries ------------------------------------------ */

/* The last page of values a read returned, owned until the next read, and
 * its weir_bytes view. */
typedef struct values_page {
    operator_list_list_u8_t list;
    weir_bytes *view;
    size_t view_cap;
} values_page;

/* Makes `fresh` the page (freeing the one before) and views it. */
static void take_values(values_page *page, operator_list_list_u8_t fresh, const weir_bytes **values, size_t *count) {
    operator_list_list_u8_free(&page->list);
    page->list = fresh;
    reserve((void **)&page->view, &page->view_cap, fresh.len, sizeof *page->view);
    for (size_t i = 0; i < fresh.len; i++) page->view[i] = bytes_of(fresh.ptr[i]);
    *values = page->view;
    *count = fresh.len;
}

/* The same for map entries. */
typedef struct entries_page {
    operator_list_tuple2_list_u8_list_u8_t list;
    weir_entry *view;
    size_t view_cap;
} entries_page;

static void take_entries(entries_page *page, operator_list_tuple2_list_u8_list_u8_t fresh, const weir_entry **entries,
                         size_t *count) {
    operator_list_tuple2_list_u8_list_u8_free(&page->list);
    page->list = fresh;
    reserve((void **)&page->view, &page->view_cap, fresh.len, sizeof *page->view);
    for (size_t i = 0; i < fresh.len; i++) page->view[i] = (weir_entry){bytes_of(fresh.ptr[i].f0), bytes_of(fresh.ptr[i].f1)};
    *entries = page->view;
    *count = fresh.len;
}

/* `after` as the bindings take it: a borrowed list, or NULL for none. The
 * host copies it during the call, so it may point into the page the call
 * replaces (which is freed only after). */
static operator_list_u8_t *after_key(const weir_bytes *after, operator_list_u8_t *storage) {
    if (!after) return NULL;
    *storage = (operator_list_u8_t){(uint8_t *)after->ptr, after->len};
    return storage;
}

/* The bindings' list of borrowed byte lists for `count` values. */
static operator_list_list_u8_t list_of(const weir_bytes *values, size_t count) {
    operator_list_list_u8_t l = {count ? malloc(count * sizeof *l.ptr) : NULL, count};
    if (count && !l.ptr) abort();
    for (size_t i = 0; i < count; i++) l.ptr[i] = (operator_list_u8_t){(uint8_t *)values[i].ptr, values[i].len};
    return l;
}

/* ---- List and map state --------------------------------------------------- */

struct weir_list_state {
    char *name;
    weir_operator_keyed_state_borrow_list_state_t handle;
    values_page page;
};

struct weir_map_state {
    char *name;
    weir_operator_keyed_state_borrow_map_state_t handle;
    operator_option_list_u8_t value;
    entries_page page;
};

weir_list_state *weir_register_list(const char *name, const weir_state_options *options) {
    weir_operator_types_state_descriptor_t d = descriptor(name, options);
    weir_operator_keyed_state_own_list_state_t own;
    weir_operator_types_error_code_t err;
    if (!weir_operator_keyed_state_register_list(&d, &own, &err)) return host_error(state_label(name), &err), NULL;
    weir_list_state *s = new_handle(sizeof *s, name);
    s->handle = weir_operator_keyed_state_borrow_list_state(own);
    return s;
}

weir_map_state *weir_register_map(const char *name, const weir_state_options *options) {
    weir_operator_types_state_descriptor_t d = descriptor(name, options);
    weir_operator_keyed_state_own_map_state_t own;
    weir_operator_types_error_code_t err;
    if (!weir_operator_keyed_state_register_map(&d, &own, &err)) return host_error(state_label(name), &err), NULL;
    weir_map_state *s = new_handle(sizeof *s, name);
    s->handle = weir_operator_keyed_state_borrow_map_state(own);
    return s;
}

/* Runs host call `call` (which sets `err` on failure) after syncing the
 * current element; on failure records the error for `label`, a string
 * evaluated only then. */
#define KEYED_CALL(label, call)                                               \
    do {                                                                      \
        weir_operator_types_error_code_t err;                                 \
        if (!sync_host()) return false;                                       \
        if (!(call)) return host_error((label), &err);                        \
    } while (0)

bool weir_list_add(weir_list_state *s, const void *value, size_t len) {
    operator_list_u8_t v = {(uint8_t *)value, len};
    KEYED_CALL(state_label(s->name), weir_operator_keyed_state_method_list_state_add(s->handle, &v, &err));
    return true;
}

bool weir_list_len(weir_list_state *s, uint32_t *len) {
    KEYED_CALL(state_label(s->name), weir_operator_keyed_state_method_list_state_len(s->handle, len, &err));
    return true;
}

bool weir_list_read(weir_list_state *s, uint32_t start, uint32_t max, const weir_bytes **values, size_t *count) {
    operator_list_list_u8_t fresh = {0};
    KEYED_CALL(state_label(s->name), weir_operator_keyed_state_method_list_state_read(s->handle, start, max, &fresh, &err));
    take_values(&s->page, fresh, values, count);
    return true;
}

bool weir_list_update(weir_list_state *s, const weir_bytes *values, size_t count) {
    if (!sync_host()) return false;
    operator_list_list_u8_t l = list_of(values, count);
    weir_operator_types_error_code_t err;
    bool ok = weir_operator_keyed_state_method_list_state_update(s->handle, &l, &err);
    free(l.ptr);
    return ok || host_error(state_label(s->name), &err);
}

bool weir_list_clear(weir_list_state *s) {
    KEYED_CALL(state_label(s->name), weir_operator_keyed_state_method_list_state_clear(s->handle, &err));
    return true;
}

bool weir_map_get(weir_map_state *s, const void *user_key, size_t key_len, weir_bytes *value, bool *present) {
    operator_list_u8_t k = {(uint8_t *)user_key, key_len};
    operator_option_list_u8_t fresh = {0};
    /* The key may point into the value this call replaces: free it after. */
    KEYED_CALL(state_label(s->name), weir_operator_keyed_state_method_map_state_get(s->handle, &k, &fresh, &err));
    operator_option_list_u8_free(&s->value);
    s->value = fresh;
    if (present) *present = fresh.is_some;
    *value = fresh.is_some ? bytes_of(fresh.val) : (weir_bytes){0};
    return true;
}

bool weir_map_put(weir_map_state *s, const void *user_key, size_t key_len, const void *value, size_t len) {
    operator_list_u8_t k = {(uint8_t *)user_key, key_len}, v = {(uint8_t *)value, len};
    KEYED_CALL(state_label(s->name), weir_operator_keyed_state_method_map_state_put(s->handle, &k, &v, &err));
    return true;
}

bool weir_map_remove(weir_map_state *s, const void *user_key, size_t key_len) {
    operator_list_u8_t k = {(uint8_t *)user_key, key_len};
    KEYED_CALL(state_label(s->name), weir_operator_keyed_state_method_map_state_remove(s->handle, &k, &err));
    return true;
}

bool weir_map_contains(weir_map_state *s, const void *user_key, size_t key_len, bool *contains) {
    operator_list_u8_t k = {(uint8_t *)user_key, key_len};
    KEYED_CALL(state_label(s->name), weir_operator_keyed_state_method_map_state_contains(s->handle, &k, contains, &err));
    return true;
}

bool weir_map_clear(weir_map_state *s) {
    KEYED_CALL(state_label(s->name), weir_operator_keyed_state_method_map_state_clear(s->handle, &err));
    return true;
}

bool weir_map_is_empty(weir_map_state *s, bool *empty) {
    KEYED_CALL(state_label(s->name), weir_operator_keyed_state_method_map_state_is_empty(s->handle, empty, &err));
    return true;
}

bool weir_map_entries(weir_map_state *s, const weir_bytes *after, uint32_t max, const weir_entry **entries, size_t *count) {
    operator_list_u8_t storage;
    operator_list_tuple2_list_u8_list_u8_t fresh = {0};
    KEYED_CALL(state_label(s->name), weir_operator_keyed_state_method_map_state_entries(
                                         s->handle, after_key(after, &storage), max, &fresh, &err));
    take_entries(&s->page, fresh, entries, count);
    return true;
}

/* ---- Operator list state -------------------------------------------------- */

struct weir_operator_list_state {
    char *name;
    weir_operator_operator_state_borrow_operator_list_state_t handle;
    values_page page;
};

weir_operator_list_state *weir_register_operator_list(const char *name, weir_redistribution mode,
                                                      const weir_state_options *options) {
    weir_operator_types_state_descriptor_t d = descriptor(name, options);
    weir_operator_operator_state_own_operator_list_state_t own;
    weir_operator_types_error_code_t err;
    weir_operator_types_redistribution_t m =
        mode == WEIR_UNION ? WEIR_OPERATOR_TYPES_REDISTRIBUTION_UNION : WEIR_OPERATOR_TYPES_REDISTRIBUTION_EVEN_SPLIT;
    if (!weir_operator_operator_state_register_list(&d, m, &own, &err)) return host_error(state_label(name), &err), NULL;
    weir_operator_list_state *s = new_handle(sizeof *s, name);
    s->handle = weir_operator_operator_state_borrow_operator_list_state(own);
    return s;
}

/* Runs host call `call` (which sets `err` on failure) on state `s`; needs
 * no current element. */
#define STATE_CALL(s, call)                                                   \
    do {                                                                      \
        weir_operator_types_error_code_t err;                                 \
        if (!(call)) return host_error(state_label((s)->name), &err);         \
    } while (0)

bool weir_operator_list_add(weir_operator_list_state *s, const void *value, size_t len) {
    operator_list_u8_t v = {(uint8_t *)value, len};
    STATE_CALL(s, weir_operator_operator_state_method_operator_list_state_add(s->handle, &v, &err));
    return true;
}

bool weir_operator_list_update(weir_operator_list_state *s, const weir_bytes *values, size_t count) {
    operator_list_list_u8_t l = list_of(values, count);
    weir_operator_types_error_code_t err;
    bool ok = weir_operator_operator_state_method_operator_list_state_update(s->handle, &l, &err);
    free(l.ptr);
    return ok || host_error(state_label(s->name), &err);
}

bool weir_operator_list_len(weir_operator_list_state *s, uint32_t *len) {
    STATE_CALL(s, weir_operator_operator_state_method_operator_list_state_len(s->handle, len, &err));
    return true;
}

bool weir_operator_list_read(weir_operator_list_state *s, uint32_t start, uint32_t max, const weir_bytes **values,
                             size_t *count) {
    operator_list_list_u8_t fresh = {0};
    STATE_CALL(s, weir_operator_operator_state_method_operator_list_state_read(s->handle, start, max, &fresh, &err));
    take_values(&s->page, fresh, values, count);
    return true;
}

bool weir_operator_list_clear(weir_operator_list_state *s) {
    STATE_CALL(s, weir_operator_operator_state_method_operator_list_state_clear(s->handle, &err));
    return true;
}

/* ---- Broadcast map state -------------------------------------------------- */

struct weir_broadcast_map_state {
    char *name;
    weir_operator_broadcast_state_borrow_broadcast_map_state_t handle;
    operator_option_list_u8_t value;
    entries_page page;
};

weir_broadcast_map_state *weir_register_broadcast_map(const char *name, const weir_state_options *options) {
    weir_operator_types_state_descriptor_t d = descriptor(name, options);
    weir_operator_broadcast_state_own_broadcast_map_state_t own;
    weir_operator_types_error_code_t err;
    if (!weir_operator_broadcast_state_register_map(&d, &own, &err)) return host_error(state_label(name), &err), NULL;
    weir_broadcast_map_state *s = new_handle(sizeof *s, name);
    s->handle = weir_operator_broadcast_state_borrow_broadcast_map_state(own);
    return s;
}

bool weir_broadcast_get(weir_broadcast_map_state *s, const void *user_key, size_t key_len, weir_bytes *value,
                        bool *present) {
    operator_list_u8_t k = {(uint8_t *)user_key, key_len};
    operator_option_list_u8_t fresh = {0};
    STATE_CALL(s, weir_operator_broadcast_state_method_broadcast_map_state_get(s->handle, &k, &fresh, &err));
    operator_option_list_u8_free(&s->value);
    s->value = fresh;
    if (present) *present = fresh.is_some;
    *value = fresh.is_some ? bytes_of(fresh.val) : (weir_bytes){0};
    return true;
}

bool weir_broadcast_put(weir_broadcast_map_state *s, const void *user_key, size_t key_len, const void *value,
                        size_t len) {
    operator_list_u8_t k = {(uint8_t *)user_key, key_len}, v = {(uint8_t *)value, len};
    STATE_CALL(s, weir_operator_broadcast_state_method_broadcast_map_state_put(s->handle, &k, &v, &err));
    return true;
}

bool weir_broadcast_remove(weir_broadcast_map_state *s, const void *user_key, size_t key_len) {
    operator_list_u8_t k = {(uint8_t *)user_key, key_len};
    STATE_CALL(s, weir_operator_broadcast_state_method_broadcast_map_state_remove(s->handle, &k, &err));
    return true;
}

bool weir_broadcast_contains(weir_broadcast_map_state *s, const void *user_key, size_t key_len, bool *contains) {
    operator_list_u8_t k = {(uint8_t *)user_key, key_len};
    STATE_CALL(s, weir_operator_broadcast_state_method_broadcast_map_state_contains(s->handle, &k, contains, &err));
    return true;
}

bool weir_broadcast_entries(weir_broadcast_map_state *s, const weir_bytes *after, uint32_t max,
                            const weir_entry **entries, size_t *count) {
    operator_list_u8_t storage;
    operator_list_tuple2_list_u8_list_u8_t fresh = {0};
    STATE_CALL(s, weir_operator_broadcast_state_method_broadcast_map_state_entries(s->handle, after_key(after, &storage),
                                                                                   max, &fresh, &err));
    take_entries(&s->page, fresh, entries, count);
    return true;
}

bool weir_broadcast_clear(weir_broadcast_map_state *s) {
    STATE_CALL(s, weir_operator_broadcast_state_method_broadcast_map_state_clear(s->handle, &err));
    return true;
}

/* ---- Timers --------------------------------------------------------------- */

bool weir_register_timer(weir_time_domain domain, int64_t time) {
    KEYED_CALL("timer", domain == WEIR_EVENT_TIME ? weir_operator_timers_register_event_time_timer(time, &err)
                                            : weir_operator_timers_register_processing_time_timer(time, &err));
    return true;
}

bool weir_delete_timer(weir_time_domain domain, int64_t time) {
    KEYED_CALL("timer", domain == WEIR_EVENT_TIME ? weir_operator_timers_delete_event_time_timer(time, &err)
                                            : weir_operator_timers_delete_processing_time_timer(time, &err));
    return true;
}

/* ---- Postcard integers ---------------------------------------------------- */

size_t weir_encode_u64(uint8_t out[WEIR_VARINT_MAX], uint64_t value) {
    size_t n = 0;
    while (value >= 0x80) {
        out[n++] = (uint8_t)(value | 0x80);
        value >>= 7;
    }
    out[n++] = (uint8_t)value;
    return n;
}

size_t weir_encode_i64(uint8_t out[WEIR_VARINT_MAX], int64_t value) {
    return weir_encode_u64(out, ((uint64_t)value << 1) ^ (uint64_t)(value >> 63));
}

bool weir_decode_u64(weir_bytes b, uint64_t *value) {
    uint64_t v = 0;
    for (size_t i = 0; i < b.len && i < WEIR_VARINT_MAX; i++) {
        uint64_t bits = b.ptr[i] & 0x7f;
        /* The tenth byte holds only the top bit of a u64. */
        if (i == WEIR_VARINT_MAX - 1 && bits > 1) return false;
        v |= bits << (7 * i);
        if (!(b.ptr[i] & 0x80)) {
            if (i + 1 != b.len) return false;
            *value = v;
            return true;
        }
    }
    return false;
}

bool weir_decode_i64(weir_bytes b, int64_t *value) {
    uint64_t z;
    if (!weir_decode_u64(b, &z)) return false;
    *value = (int64_t)(z >> 1) ^ -(int64_t)(z & 1);
    return true;
}

bool weir_take_u64(weir_bytes *b, uint64_t *value) {
    /* The varint ends at the first byte without the high bit. */
    for (size_t i = 0; i < b->len && i < WEIR_VARINT_MAX; i++) {
        if (!(b->ptr[i] & 0x80)) {
            if (!weir_decode_u64((weir_bytes){b->ptr, i + 1}, value)) return false;
            b->ptr += i + 1;
            b->len -= i + 1;
            return true;
        }
    }
    return false;
}

bool weir_take_i64(weir_bytes *b, int64_t *value) {
    uint64_t z;
    if (!weir_take_u64(b, &z)) return false;
    *value = (int64_t)(z >> 1) ^ -(int64_t)(z & 1);
    return true;
}

bool weir_take_bytes(weir_bytes *b, weir_bytes *value) {
    weir_bytes rest = *b;
    uint64_t n;
    if (!weir_take_u64(&rest, &n) || n > rest.len) return false;
    *value = (weir_bytes){rest.ptr, (size_t)n};
    b->ptr = rest.ptr + n;
    b->len = rest.len - (size_t)n;
    return true;
}

/* ---- Default callbacks ---------------------------------------------------- */

__attribute__((weak)) bool weir_on_timer(const weir_timer *timer) {
    (void)timer;
    return true;
}

__attribute__((weak)) bool weir_end_of_input(void) {
    return true;
}

__attribute__((weak)) bool weir_process_broadcast(const weir_element *input) {
    (void)input;
    return weir_fail("this operator does not take a broadcast input");
}

__attribute__((weak)) bool weir_migrate_value(const char *state, uint32_t from_version, weir_bytes value, weir_bytes *out) {
    (void)value;
    (void)out;
    return weir_fail("state '%s': no migration from version %u (define weir_migrate_value)", state, (unsigned)from_version);
}

/* ---- The exports ---------------------------------------------------------- */

static bool opened;

/* Ends an export call: sends output, and turns a failure into the error
 * string the host reports (freed by the generated post-return). */
static bool finish(bool ok, operator_string_t *err) {
    flush_output();
    if (ok) return true;
    operator_string_dup(err, error_message[0] ? error_message
                                              : "the operator failed without a message (return weir_fail(...))");
    return false;
}

static bool begin_call(void) {
    error_message[0] = 0;
    position.active = false;
    return opened || weir_fail("operator called before open");
}

/* Tells the host which element user code is on, even if it has it current
 * already, so that a failure report names the right record. */
static void report_position(void) {
    weir_operator_context_error_code_t err;
    if (position.active) {
        if (weir_operator_context_set_current_element(position.index, &err)) position.host_index = position.index;
        else weir_operator_types_error_code_free(&err);
    }
}

/* The batch ends: writes every changed value state back, or, after a
 * failure, drops the changes (the task fails anyway). */
static bool end_batch(bool write_back) {
    bool ok = true;
    position.active = false;
    while (queued) {
        weir_value_state *s = queued;
        queued = s->next_queued;
        s->queued = false;
        s->next_queued = NULL;
        if (write_back && ok) ok = flush_value(s);
        s->dirty_len = 0;
        s->arena.len = 0;
        s->loaded = false;
    }
    return ok;
}

static weir_element element_of(const weir_operator_types_element_t *e) {
    return (weir_element){
        .payload = bytes_of(e->payload),
        .has_key = e->key.is_some,
        .key = e->key.is_some ? bytes_of(e->key.val) : (weir_bytes){0},
        .has_timestamp = e->timestamp.is_some,
        .timestamp = e->timestamp.val,
    };
}

bool exports_weir_operator_handler_open(exports_weir_operator_handler_operator_info_t *in, operator_string_t *err) {
    error_message[0] = 0;
    info = (weir_info){
        .uid = copy_string(in->uid.ptr, in->uid.len),
        .subtask_index = in->subtask_index,
        .parallelism = in->parallelism,
        .max_parallelism = in->max_parallelism,
        .attempt_number = in->attempt_number,
    };
    params.len = in->params.len;
    params.names = calloc(params.len + 1, sizeof *params.names);
    params.values = calloc(params.len + 1, sizeof *params.values);
    if (!params.names || !params.values) abort();
    for (size_t i = 0; i < params.len; i++) {
        params.names[i] = copy_string(in->params.ptr[i].f0.ptr, in->params.ptr[i].f0.len);
        params.values[i] = copy_string(in->params.ptr[i].f1.ptr, in->params.ptr[i].f1.len);
    }
    exports_weir_operator_handler_operator_info_free(in);
    opened = weir_open(&info);
    return finish(opened, err);
}

bool exports_weir_operator_handler_process(exports_weir_operator_handler_element_t *input, operator_string_t *err) {
    bool ok = begin_call();
    if (ok) {
        weir_element e = element_of(input);
        ok = weir_process(&e);
    }
    exports_weir_operator_handler_element_free(input);
    return finish(ok, err);
}

bool exports_weir_operator_handler_process_batch(exports_weir_operator_handler_element_batch_t *batch, operator_string_t *err) {
    bool ok = begin_call();
    position = (batch_position){.active = true, .generation = position.generation + 1};
    const uint8_t *data = batch->data.ptr;
    size_t count = batch->index.len / sizeof(element_entry);
    for (size_t i = 0; ok && i < count; i++) {
        element_entry r;
        memcpy(&r, batch->index.ptr + i * sizeof r, sizeof r);
        bool has_key = r.flags & HAS_KEY;
        weir_element e = {
            .payload = {data + r.payload_start, r.payload_len},
            .has_key = has_key,
            .key = {data + r.key_start, has_key ? r.key_len : 0},
            .has_timestamp = r.flags & HAS_TIMESTAMP,
            .timestamp = r.timestamp,
        };
        position.index = (uint32_t)i;
        if (!weir_process(&e)) {
            report_position();
            ok = false;
        }
    }
    bool written = end_batch(ok);
    exports_weir_operator_handler_element_batch_free(batch);
    return finish(ok && written, err);
}

bool exports_weir_operator_handler_process_broadcast(exports_weir_operator_handler_element_t *input, operator_string_t *err) {
    bool ok = begin_call();
    if (ok) {
        weir_element e = element_of(input);
        ok = weir_process_broadcast(&e);
    }
    exports_weir_operator_handler_element_free(input);
    return finish(ok, err);
}

bool exports_weir_operator_handler_on_timer(exports_weir_operator_handler_timer_t *fired, operator_string_t *err) {
    bool ok = begin_call();
    if (ok) {
        weir_timer t = {
            .time = fired->time,
            .domain = fired->domain == WEIR_OPERATOR_TYPES_TIME_DOMAIN_EVENT_TIME ? WEIR_EVENT_TIME : WEIR_PROCESSING_TIME,
            .key = bytes_of(fired->key),
        };
        ok = weir_on_timer(&t);
    }
    exports_weir_operator_handler_timer_free(fired);
    return finish(ok, err);
}

bool exports_weir_operator_handler_end_of_input(operator_string_t *err) {
    bool ok = begin_call() && weir_end_of_input();
    return finish(ok, err);
}

bool exports_weir_operator_handler_migrate_value(operator_string_t *state, uint32_t from_version, operator_list_u8_t *value,
                                                 operator_list_u8_t *ret, operator_string_t *err) {
    error_message[0] = 0;
    char *name = copy_string(state->ptr, state->len);
    weir_bytes out = {0};
    bool ok = weir_migrate_value(name, from_version, bytes_of(*value), &out);
    free(name);
    operator_string_free(state);
    operator_list_u8_free(value);
    if (ok) *ret = (operator_list_u8_t){(uint8_t *)out.ptr, out.len};
    return finish(ok, err);
}
