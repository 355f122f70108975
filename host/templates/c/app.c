/*
 * {{name}}: a Weir operator. Counts the events of each key (job.toml keys
 * the input by its `user` field) in value state, and emits `<key> <count>`
 * on every event, keyed by the key. The SDK's API: weir.h.
 */
#include <stdio.h>

#include "weir.h"

static weir_value_state *count;

bool weir_open(const weir_info *info) {
    (void)info;
    count = weir_register_value("count", &(weir_state_options){.encoding = "postcard"});
    return count != NULL;
}

bool weir_process(const weir_element *input) {
    if (!input->has_key) return weir_fail("needs a keyed input (partition = \"key\")");
    uint64_t n = 0;
    if (!weir_value_get_u64(count, &n, NULL) || !weir_value_set_u64(count, n + 1)) return false;
    char digits[24];
    int len = snprintf(digits, sizeof digits, " %llu", (unsigned long long)(n + 1));
    weir_bytes line[] = {input->key, {(const uint8_t *)digits, (size_t)len}};
    weir_emit_parts(&input->key, NULL, line, 2);
    return true;
}
