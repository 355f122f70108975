//! Cheap checks of Weir's code base itself: the machinery the checks in
//! `tests/tidy.rs` share. [`files`] finds and reads the sources, [`uses`]
//! parses one host file (with `syn`) into what it defines, what its `use`
//! items bring in, and every path into the crate it names, and [`graph`]
//! resolves those paths to files (following re-exports) and finds the
//! cycles among them.
//!
//! This crate depends on nothing of Weir's, so `cargo test -p weir-tidy`
//! builds in seconds and runs before the host, the guests or the tests are
//! built (`scripts/test` runs it right after rustfmt).

pub mod files;
pub mod graph;
pub mod uses;
