/*
 * The C twin of the Rust test operator `test-operators/every-state`
 * (tests/all/every_state.rs): every kind of state, with output that shows
 * their exact contents, so a restored run is compared with an
 * uninterrupted one element by element, and a savepoint of either twin
 * restores into the other. Its states are encoded as the Rust twin's
 * (postcard): u64 values, lists and maps of them, an i64 -> u64 and a
 * u64 -> i64 map, a (u64, u64, u64) accumulator, String -> String rules.
 *
 * Main input: jsonl keyed by `k`, with event time `t` and fields `seq`, `v`
 * and `f` (flags). Per record, for its key: `prev` and `long` (one-hour TTL)
 * hold the previous `seq`; `v` is appended to `vals` (list), `v % 5`
 * counted in `counts` (map), added to `sum` (reducing) and `stats`
 * (aggregating: count, min, max); an event-time timer at `t + et_delay` is
 * remembered in `et-pending` (time -> seq). Flag `s` writes `seq` to
 * `short` (TTL `short_ttl_ms`), read and shown from `seq >= read_from` on;
 * flag `p` registers a processing-time timer `pt_delay_ms` ahead,
 * remembered in `pt-pending` (seq -> time); flag `m` appends `seq` to the
 * operator lists `even` (even-split) and `union`. Broadcast input: `cmd` is
 * `set NAME VALUE` or `del NAME`, applied to `rules`. In `open` and at end
 * of input each subtask emits its operator lists and rules. The lines are
 * the Rust twin's.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weir.h"

static weir_value_state *prev, *long_ttl, *short_ttl, *sum, *stats;
static weir_list_state *vals;
static weir_map_state *counts, *et_pending, *pt_pending;
static weir_operator_list_state *even, *union_list;
static weir_broadcast_map_state *rules;
static int64_t et_delay = 200, pt_delay_ms = 2000;
static uint64_t read_from = UINT64_MAX;
static char me[32];

/* Entries or values read per host call when a whole state is listed. */
#define PAGE 256

/* ---- Text --------------------------------------------------------------- */

/* A line being written; out of memory traps, as in the SDK. */
typedef struct text {
    char *p;
    size_t len, cap;
} text;

static void add(text *t, const char *format, ...) __attribute__((format(printf, 2, 3)));
static void add(text *t, const char *format, ...) {
    va_list args;
    va_start(args, format);
    int n = vsnprintf(NULL, 0, format, args);
    va_end(args);
    if (n < 0) abort();
    if (t->len + (size_t)n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 128;
        while (cap < t->len + (size_t)n + 1) cap *= 2;
        char *p = realloc(t->p, cap);
        if (!p) abort();
        t->p = p;
        t->cap = cap;
    }
    va_start(args, format);
    vsnprintf(t->p + t->len, (size_t)n + 1, format, args);
    va_end(args);
    t->len += (size_t)n;
}

static void emit_text(text *t) {
    weir_emit(t->p, t->len);
    free(t->p);
    *t = (text){0};
}

/* Postcard u64 and i64 as bytes, for map keys and list items. */
typedef struct varint {
    uint8_t b[WEIR_VARINT_MAX];
    size_t n;
} varint;

static varint u64_bytes(uint64_t v) {
    varint x;
    x.n = weir_encode_u64(x.b, v);
    return x;
}

static varint i64_bytes(int64_t v) {
    varint x;
    x.n = weir_encode_i64(x.b, v);
    return x;
}

/* ---- Input -------------------------------------------------------------- */

/* The raw text of `"name": ...` in a flat JSON object (quotes removed), as
 * the Rust twin reads it: *start and *len within `json`. */
static bool field(const char *json, const char *name, const char **start, size_t *len) {
    char quoted[64];
    snprintf(quoted, sizeof quoted, "\"%s\"", name);
    const char *at = strstr(json, quoted);
    if (!at) return weir_fail("no field %s in %s", name, json);
    at += strlen(quoted);
    while (*at == ' ') at++;
    if (*at++ != ':') return weir_fail("no field %s in %s", name, json);
    while (*at == ' ') at++;
    if (*at == '"') {
        *start = ++at;
        *len = strcspn(at, "\"");
    } else {
        *start = at;
        *len = strcspn(at, ",}");
        while (*len && (*start)[*len - 1] == ' ') (*len)--;
    }
    return true;
}

static bool number(const char *json, const char *name, uint64_t *out) {
    const char *s;
    size_t n;
    if (!field(json, name, &s, &n)) return false;
    char digits[24];
    if (n == 0 || n >= sizeof digits || strspn(s, "0123456789") < n)
        return weir_fail("field %s is \"%.*s\", not a number", name, (int)n, s);
    memcpy(digits, s, n);
    digits[n] = 0;
    *out = strtoull(digits, NULL, 10);
    return true;
}

static bool param(const char *name, int64_t *out) {
    const char *v = weir_param(name);
    if (!v) return true;
    char *end;
    long long x = strtoll(v, &end, 10);
    if (!*v || *end) return weir_fail("param %s = \"%s\" is not an integer", name, v);
    *out = x;
    return true;
}

/* ---- State as text ------------------------------------------------------ */

static void show(text *t, bool present, uint64_t v) {
    if (present) add(t, "%llu", (unsigned long long)v);
    else add(t, "none");
}

/* Every item of a list, u64s, copied out of the pages (the next read
 * replaces a page), with room for one more. */
typedef struct items {
    varint *v;
    size_t n;
} items;

typedef bool (*page_reader)(void *state, uint32_t start, uint32_t max, const weir_bytes **values, size_t *count);

static bool read_vals(void *s, uint32_t start, uint32_t max, const weir_bytes **values, size_t *count) {
    return weir_list_read(s, start, max, values, count);
}

static bool read_operator_list(void *s, uint32_t start, uint32_t max, const weir_bytes **values, size_t *count) {
    return weir_operator_list_read(s, start, max, values, count);
}

static bool read_all(page_reader read, void *state, const char *name, items *out) {
    size_t cap = PAGE + 1;
    *out = (items){malloc(cap * sizeof *out->v), 0};
    if (!out->v) abort();
    for (uint32_t start = 0;; start += PAGE) {
        const weir_bytes *page;
        size_t got;
        if (!read(state, start, PAGE, &page, &got)) return false;
        if (out->n + got + 1 > cap) cap = 2 * (out->n + got + 1);
        varint *grown = realloc(out->v, cap * sizeof *out->v);
        if (!grown) abort();
        out->v = grown;
        for (size_t i = 0; i < got; i++) {
            if (page[i].len > WEIR_VARINT_MAX) return weir_fail("%s: item is not a u64", name);
            memcpy(out->v[out->n].b, page[i].ptr, page[i].len);
            out->v[out->n++].n = page[i].len;
        }
        if (got < PAGE) return true;
    }
}

/* The items as bytes, for an update. */
static weir_bytes *as_bytes(const items *it) {
    weir_bytes *all = malloc((it->n + 1) * sizeof *all);
    if (!all) abort();
    for (size_t i = 0; i < it->n; i++) all[i] = (weir_bytes){it->v[i].b, it->v[i].n};
    return all;
}

/* The items, joined with commas. */
static bool show_items(text *t, const items *it, const char *name) {
    for (size_t i = 0; i < it->n; i++) {
        uint64_t v;
        if (!weir_decode_u64((weir_bytes){it->v[i].b, it->v[i].n}, &v)) return weir_fail("%s: item is not a u64", name);
        add(t, i ? ",%llu" : "%llu", (unsigned long long)v);
    }
    return true;
}

/* Appends `item` to a list by reading it whole and writing it back with
 * `update` (weir_list_update or weir_operator_list_update). */
static bool append_by_update(page_reader read, bool (*update)(void *, const weir_bytes *, size_t), void *state,
                             const char *name, varint item) {
    items it;
    bool ok = read_all(read, state, name, &it);
    if (ok) {
        it.v[it.n++] = item;
        weir_bytes *all = as_bytes(&it);
        ok = update(state, all, it.n);
        free(all);
    }
    free(it.v);
    return ok;
}

static bool update_vals(void *s, const weir_bytes *values, size_t count) {
    return weir_list_update(s, values, count);
}

static bool update_operator_list(void *s, const weir_bytes *values, size_t count) {
    return weir_operator_list_update(s, values, count);
}

static bool operator_list(text *t, weir_operator_list_state *s, const char *name) {
    items it;
    bool ok = read_all(read_operator_list, s, name, &it) && show_items(t, &it, name);
    free(it.v);
    return ok;
}

/* This subtask's operator lists and broadcast rules, as one line. */
static bool lists(text *t, const char *when) {
    add(t, "%s %s even=[", when, me);
    if (!operator_list(t, even, "even")) return false;
    add(t, "] union=[");
    if (!operator_list(t, union_list, "union")) return false;
    add(t, "] rules=[");
    /* The last key of a page, copied: the next call replaces the page. */
    uint8_t last[256];
    weir_bytes after = {last, 0};
    bool first = true;
    for (bool paging = false, more = true; more; paging = true) {
        const weir_entry *e;
        size_t count;
        if (!weir_broadcast_entries(rules, paging ? &after : NULL, PAGE, &e, &count)) return false;
        for (size_t i = 0; i < count; i++) {
            weir_bytes k = e[i].key, v = e[i].value, name, value;
            if (!weir_take_bytes(&k, &name) || !weir_take_bytes(&v, &value)) return weir_fail("rules: not a string pair");
            add(t, "%s%.*s=%.*s", first ? "" : ",", (int)name.len, (const char *)name.ptr, (int)value.len,
                (const char *)value.ptr);
            first = false;
        }
        more = count == PAGE;
        if (more) {
            if (e[count - 1].key.len > sizeof last) return weir_fail("rules: key too long");
            memcpy(last, e[count - 1].key.ptr, e[count - 1].key.len);
            after.len = e[count - 1].key.len;
        }
    }
    add(t, "]");
    return true;
}

/* ---- The callbacks ------------------------------------------------------ */

bool weir_open(const weir_info *info) {
    int64_t short_ms = 1000, from = -1;
    if (!param("short_ttl_ms", &short_ms) || !param("et_delay", &et_delay) || !param("pt_delay_ms", &pt_delay_ms) ||
        !param("read_from", &from))
        return false;
    if (from >= 0) read_from = (uint64_t)from;
    const weir_state_options pc = {.encoding = "postcard"};
    const weir_state_options hour = {.encoding = "postcard", .ttl_ms = 3600 * 1000};
    const weir_state_options brief = {.encoding = "postcard", .ttl_ms = (uint64_t)short_ms};
    if (!(prev = weir_register_value("prev", &pc)) || !(long_ttl = weir_register_value("long", &hour)) ||
        !(short_ttl = weir_register_value("short", &brief)) || !(vals = weir_register_list("vals", &pc)) ||
        !(counts = weir_register_map("counts", &pc)) || !(sum = weir_register_reducing("sum", &pc)) ||
        !(stats = weir_register_aggregating("stats", &pc)) || !(et_pending = weir_register_map("et-pending", &pc)) ||
        !(pt_pending = weir_register_map("pt-pending", &pc)) ||
        !(even = weir_register_operator_list("even", WEIR_EVEN_SPLIT, &pc)) ||
        !(union_list = weir_register_operator_list("union", WEIR_UNION, &pc)) ||
        !(rules = weir_register_broadcast_map("rules", &pc)))
        return false;
    snprintf(me, sizeof me, "%u/%u", (unsigned)info->subtask_index, (unsigned)info->parallelism);
    /* Emitted in open: the state this subtask was restored with. */
    text line = {0};
    if (!lists(&line, "open")) return false;
    emit_text(&line);
    return true;
}

/* Count, minimum and maximum: the Rust twin's (u64, u64, u64) accumulator,
 * three varints; (0, u64::MAX, 0) before the first value. */
static bool add_stats(uint64_t v, uint64_t out[3]) {
    weir_bytes acc;
    bool present;
    uint64_t n = 0, min = UINT64_MAX, max = 0;
    if (!weir_value_get(stats, &acc, &present)) return false;
    if (present && !(weir_take_u64(&acc, &n) && weir_take_u64(&acc, &min) && weir_take_u64(&acc, &max) && !acc.len))
        return weir_fail("stats: accumulator is not (u64, u64, u64)");
    out[0] = n + 1;
    out[1] = v < min ? v : min;
    out[2] = v > max ? v : max;
    uint8_t buf[3 * WEIR_VARINT_MAX];
    size_t len = 0;
    for (int i = 0; i < 3; i++) len += weir_encode_u64(buf + len, out[i]);
    return weir_value_set(stats, buf, len);
}

bool weir_process(const weir_element *in) {
    char line[512];
    if (in->payload.len >= sizeof line) return weir_fail("record of %zu bytes is too long", in->payload.len);
    memcpy(line, in->payload.ptr, in->payload.len);
    line[in->payload.len] = 0;
    uint64_t seq, v;
    const char *flags;
    size_t flags_len;
    if (!number(line, "seq", &seq) || !number(line, "v", &v) || !field(line, "f", &flags, &flags_len)) return false;
    if (!in->has_timestamp) return weir_fail("no event time on %s", line);
    bool has_s = memchr(flags, 's', flags_len), has_p = memchr(flags, 'p', flags_len), has_m = memchr(flags, 'm', flags_len);

    uint64_t p = 0, l = 0, s = 0;
    bool has_prev, has_long;
    if (!weir_value_get_u64(prev, &p, &has_prev) || !weir_value_set_u64(prev, seq) ||
        !weir_value_get_u64(long_ttl, &l, &has_long) || !weir_value_set_u64(long_ttl, seq))
        return false;
    varint item = u64_bytes(v);
    /* Odd records append; even ones rewrite the list with the value added
     * (weir_list_update), which must come to the same. */
    if (seq % 2 ? !weir_list_add(vals, item.b, item.n) : !append_by_update(read_vals, update_vals, vals, "vals", item))
        return false;
    varint bucket = u64_bytes(v % 5);
    weir_bytes old;
    bool present, empty;
    uint64_t n = 0;
    /* A key's map is empty exactly until its first record. */
    if (!weir_map_is_empty(counts, &empty)) return false;
    if (empty == has_prev) return weir_fail("counts: empty = %d with prev %s", empty, has_prev ? "set" : "unset");
    if (!weir_map_get(counts, bucket.b, bucket.n, &old, &present)) return false;
    if (present && !weir_decode_u64(old, &n)) return weir_fail("counts: value is not a u64");
    varint count = u64_bytes(n + 1);
    if (!weir_map_put(counts, bucket.b, bucket.n, count.b, count.n)) return false;
    uint64_t total = v, st[3];
    bool has_sum;
    if (!weir_value_get_u64(sum, &total, &has_sum)) return false;
    if (has_sum) total += v;
    if (!weir_value_set_u64(sum, total) || !add_stats(v, st)) return false;
    varint timer = i64_bytes(in->timestamp + et_delay), at_seq = u64_bytes(seq);
    if (!weir_map_put(et_pending, timer.b, timer.n, at_seq.b, at_seq.n) ||
        !weir_register_timer(WEIR_EVENT_TIME, in->timestamp + et_delay))
        return false;
    if (has_s && !weir_value_set_u64(short_ttl, seq)) return false;
    bool has_short = false;
    if (seq >= read_from && !weir_value_get_u64(short_ttl, &s, &has_short)) return false;
    if (has_p) {
        int64_t at = weir_processing_time() + pt_delay_ms;
        varint when = i64_bytes(at);
        if (!weir_map_put(pt_pending, at_seq.b, at_seq.n, when.b, when.n) || !weir_register_timer(WEIR_PROCESSING_TIME, at))
            return false;
    }
    /* `even` through weir_operator_list_update, `union` through add. */
    if (has_m && (!append_by_update(read_operator_list, update_operator_list, even, "even", at_seq) ||
                  !weir_operator_list_add(union_list, at_seq.b, at_seq.n)))
        return false;

    text out = {0};
    add(&out, "rec %.*s seq=%llu prev=", (int)in->key.len, (const char *)in->key.ptr, (unsigned long long)seq);
    show(&out, has_prev, p);
    add(&out, " list=[");
    items list;
    bool shown = read_all(read_vals, vals, "vals", &list) && show_items(&out, &list, "vals");
    free(list.v);
    if (!shown) return false;
    add(&out, "] counts=[");
    /* At most five buckets: one page. */
    const weir_entry *e;
    size_t got;
    if (!weir_map_entries(counts, NULL, PAGE, &e, &got)) return false;
    for (size_t i = 0; i < got; i++) {
        uint64_t b, c;
        if (!weir_decode_u64(e[i].key, &b) || !weir_decode_u64(e[i].value, &c)) return weir_fail("counts: not u64s");
        add(&out, "%s%llu:%llu", i ? "," : "", (unsigned long long)b, (unsigned long long)c);
    }
    add(&out, "] sum=%llu stats=%llu/%llu/%llu long=", (unsigned long long)total, (unsigned long long)st[0],
        (unsigned long long)st[1], (unsigned long long)st[2]);
    show(&out, has_long, l);
    add(&out, " short=");
    if (seq >= read_from) show(&out, has_short, s);
    else add(&out, "-");
    emit_text(&out);
    return true;
}

bool weir_on_timer(const weir_timer *timer) {
    const char *key = (const char *)timer->key.ptr;
    int key_len = (int)timer->key.len;
    text out = {0};
    if (timer->domain == WEIR_EVENT_TIME) {
        varint t = i64_bytes(timer->time);
        weir_bytes found;
        bool present;
        uint64_t seq;
        if (!weir_map_get(et_pending, t.b, t.n, &found, &present)) return false;
        if (!present) return weir_fail("event-time timer %lld of %.*s unknown", (long long)timer->time, key_len, key);
        if (!weir_decode_u64(found, &seq)) return weir_fail("et-pending: value is not a u64");
        if (!weir_map_remove(et_pending, t.b, t.n)) return false;
        add(&out, "et %.*s t=%lld seq=%llu", key_len, key, (long long)timer->time, (unsigned long long)seq);
        emit_text(&out);
        return true;
    }
    /* Records of one batch share a processing time, so one timer may stand
     * for several registrations: every entry due at this time, in the
     * map's order, collected before any is removed. */
    uint64_t *due = NULL;
    size_t ndue = 0, cap = 0;
    uint8_t last[WEIR_VARINT_MAX];
    weir_bytes after = {last, 0};
    for (bool paging = false, more = true; more; paging = true) {
        const weir_entry *e;
        size_t got;
        if (!weir_map_entries(pt_pending, paging ? &after : NULL, PAGE, &e, &got)) return free(due), false;
        for (size_t i = 0; i < got; i++) {
            uint64_t seq;
            int64_t at;
            if (!weir_decode_u64(e[i].key, &seq) || !weir_decode_i64(e[i].value, &at))
                return free(due), weir_fail("pt-pending: not a u64 -> i64 entry");
            if (at != timer->time) continue;
            if (ndue == cap) {
                cap = cap ? cap * 2 : 16;
                uint64_t *grown = realloc(due, cap * sizeof *due);
                if (!grown) abort();
                due = grown;
            }
            due[ndue++] = seq;
        }
        more = got == PAGE;
        if (more) {
            if (e[got - 1].key.len > sizeof last) return free(due), weir_fail("pt-pending: key too long");
            memcpy(last, e[got - 1].key.ptr, e[got - 1].key.len);
            after.len = e[got - 1].key.len;
        }
    }
    if (!ndue) return weir_fail("processing-time timer %lld of %.*s unknown", (long long)timer->time, key_len, key);
    for (size_t i = 0; i < ndue; i++) {
        varint k = u64_bytes(due[i]);
        if (!weir_map_remove(pt_pending, k.b, k.n)) return free(due), false;
        add(&out, "pt %.*s seq=%llu", key_len, key, (unsigned long long)due[i]);
        emit_text(&out);
    }
    free(due);
    return true;
}

/* A postcard String: its length, then its bytes. */
static size_t string_bytes(uint8_t *out, const char *s, size_t len) {
    size_t n = weir_encode_u64(out, len);
    memcpy(out + n, s, len);
    return n + len;
}

bool weir_process_broadcast(const weir_element *in) {
    char line[512];
    if (in->payload.len >= sizeof line) return weir_fail("rule of %zu bytes is too long", in->payload.len);
    memcpy(line, in->payload.ptr, in->payload.len);
    line[in->payload.len] = 0;
    const char *cmd;
    size_t len;
    if (!field(line, "cmd", &cmd, &len)) return false;
    /* The command's words (at most four, to tell three from more). */
    const char *word[4];
    size_t wlen[4], words = 0;
    for (size_t i = 0; i < len && words < 4;) {
        if (cmd[i] == ' ') {
            i++;
            continue;
        }
        word[words] = cmd + i;
        while (i < len && cmd[i] != ' ') i++;
        wlen[words] = (size_t)(cmd + i - word[words]);
        words++;
    }
    uint8_t k[WEIR_VARINT_MAX + 128], v[WEIR_VARINT_MAX + 128];
    bool is_set = words == 3 && wlen[0] == 3 && !memcmp(word[0], "set", 3);
    bool is_del = words == 2 && wlen[0] == 3 && !memcmp(word[0], "del", 3);
    if ((!is_set && !is_del) || wlen[1] > 128 || (is_set && wlen[2] > 128))
        return weir_fail("bad rule command \"%s\"", line);
    size_t kn = string_bytes(k, word[1], wlen[1]);
    if (is_del) return weir_broadcast_remove(rules, k, kn);
    size_t vn = string_bytes(v, word[2], wlen[2]);
    return weir_broadcast_put(rules, k, kn, v, vn);
}

bool weir_end_of_input(void) {
    text line = {0};
    if (!lists(&line, "end")) return false;
    emit_text(&line);
    return true;
}
