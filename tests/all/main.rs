//! Weir's end-to-end tests, in one binary so the suite links once. Every test
//! runs the real `host` binary on real guest components, as a user would.

mod bad_input;
mod broadcast;
mod checkpoints;
mod crash_points;
mod durability;
mod fraud_detection;
mod fuzz_regressions;
mod guest_failures;
mod hardening;
mod languages;
mod progress;
mod rocksdb_backend;
mod savepoints;
mod session_windows;
mod state_kinds;
mod support;
mod swaps;
mod tidy;
mod top_n;
mod ttl;
mod word_count;
