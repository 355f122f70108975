//! The Nexmark queries of `guest-examples/nexmark/`, end to end: each job
//! file runs on the real host over a small stream, and its output must
//! equal the query computed directly from the same generated events
//! (`weir_tests::nexmark`), at parallelism 1 and 3.

use super::example_copy::ExampleCopy;

mod q0_q2;
mod q10;
mod q11;
mod q12;
mod q13;
mod q14;
mod q15;
mod q16;
mod q17;
mod q18;
mod q19;
mod q20;
mod q21;
mod q22;
mod q3;
mod q4;
mod q5;
mod q6;
mod q7;
mod q8;
mod q9;
mod recovery;
mod source;

/// The events each correctness test runs over.
pub const EVENTS: u64 = 200_000;

/// Runs `guest-examples/nexmark/<query>.toml` over its first `events`
/// events at `parallelism` (the `--parallelism` flag: every source and
/// operator without its own), with `extra` flags; returns the lines the
/// job's file sink wrote to `output/<query>.txt`.
pub fn run_query(query: &str, events: u64, parallelism: u32, extra: &[&str]) -> Vec<String> {
    let copy = ExampleCopy::new("nexmark");
    let job = format!("{query}.toml");
    copy.edit(&job, "events = 1000000", &format!("events = {events}"));
    let p = parallelism.to_string();
    let mut args = vec!["--parallelism", p.as_str()];
    args.extend_from_slice(extra);
    copy.run(&job, &args);
    copy.take_output(&format!("{query}.txt")).lines().map(str::to_string).collect()
}
