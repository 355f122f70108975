/*
 * Word-count counter in C: keyed by word, keeps a count per word in value
 * state and emits `<word> <count>` on every update, keyed by the word and
 * with the input's timestamp, like the Rust `word-count/counter`. The count
 * is stored as the Rust counter stores its u64 (a postcard varint), so
 * either can restore the other's savepoint. Built by scripts/test with
 * sdk/c/build.sh into target/wasm/word_count_c_counter.wasm.
 */
#include "weir.h"

static weir_value_state *count;

bool weir_open(const weir_info *info) {
    (void)info;
    count = weir_register_value("count", &(weir_state_options){.encoding = "postcard"});
    return count != NULL;
}

bool weir_process(const weir_element *input) {
    if (!input->has_key) return weir_fail("counter needs a keyed input (partition = \"key\")");
    uint64_t n = 0;
    if (!weir_value_get_u64(count, &n, NULL) || !weir_value_set_u64(count, ++n)) return false;
    /* `word count`, the digits written from the right. */
    char digits[20];
    size_t at = sizeof digits;
    do {
        digits[--at] = (char)('0' + n % 10);
        n /= 10;
    } while (n);
    weir_bytes line[] = {input->key, {(const uint8_t *)" ", 1}, {(const uint8_t *)digits + at, sizeof digits - at}};
    weir_emit_parts(&input->key, input->has_timestamp ? &input->timestamp : NULL, line, 3);
    return true;
}
