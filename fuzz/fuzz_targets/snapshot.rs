//! Snapshot verification, visiting and restoring: any state file from a checkpoint or savepoint.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    weir_host::fuzzing::snapshot(data);
});
