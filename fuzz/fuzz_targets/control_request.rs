//! The control API: any bytes a local user sends to the job's port.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    weir_host::fuzzing::control_request(data);
});
