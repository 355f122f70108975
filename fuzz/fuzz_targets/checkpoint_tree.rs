//! The directory layer: a fuzzed tree of files, links, FIFOs, modes and
//! owners under a checkpoint directory, opened, resumed from, cleaned up
//! and read; nothing outside it may change.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    weir_host::fuzzing::checkpoint_tree(data);
});
