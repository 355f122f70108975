//! Recorded operator input: any segment file a replay reads.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    weir_host::fuzzing::recording(data);
});
