//! Durations and sizes as settings write them.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    weir_host::fuzzing::units(data);
});
