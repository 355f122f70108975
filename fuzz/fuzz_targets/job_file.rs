//! Job files: parsing and validation of any text.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    weir_host::fuzzing::job_file(data);
});
