//! `_metadata` decoding: any bytes read from a checkpoint directory.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    weir_host::fuzzing::metadata(data);
});
