//! Weir's end-to-end tests, in one binary so the suite links once. Every test
//! runs real guest components, and all but a few run the real `host` binary
//! as a user would; those few drive the host library where only the host's
//! own code can reach (`hand_over`), and say why.

mod bad_input;
mod broadcast;
mod c_sdk;
mod checkpoints;
mod cluster;
mod cluster_group;
mod control_auth;
mod control_floods;
mod crash_points;
mod dashboard;
mod durability;
mod every_state;
mod example_copy;
mod finished_sources;
mod fraud_detection;
mod fuzz_regressions;
mod golden_fixtures;
mod guest_budgets;
mod guest_failures;
mod hand_over;
mod hardening;
mod host_new;
mod hostile_storage;
mod idle_timeout;
mod incremental_savepoints;
mod job_limits;
#[cfg(feature = "kafka")]
mod kafka;
#[cfg(feature = "kafka")]
mod kafka_partitions;
#[cfg(feature = "kafka")]
mod kafka_transactions;
mod languages;
mod latency;
mod list_state;
mod live_job;
mod locations;
mod log_format;
mod max_parallelism;
mod memory_checkpoints;
mod metrics;
mod nexmark;
mod progress;
mod replay;
mod rescales;
mod rest_api;
mod restarts;
mod rocksdb_backend;
mod savepoints;
mod session_windows;
mod shadows;
mod sinks;
mod sparse_files;
mod state_kinds;
mod support;
mod swapped_modules;
mod swaps;
mod timers;
mod top_n;
mod ttl;
mod word_count;
