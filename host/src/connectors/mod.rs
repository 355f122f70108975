//! Connectors: the sources and sinks a job file names by `kind`, each in a
//! module of its own that reads its options from its `[[sources]]` or
//! `[[sinks]]` entry and implements [`Source`] or [`Sink`]. The registry
//! below is the only place that knows them all: a new connector is one
//! module and one line here.

pub mod buckets;
pub mod file_sink;
pub mod file_source;
pub mod generator;
#[cfg(feature = "kafka")]
pub mod kafka;
pub mod latency;
pub mod nexmark;
pub mod part_files;
pub mod transactional_file;

use crate::checkpoint::metadata::SinkState;
use crate::config::ConnectorSpec;
use crate::record::Batch;
use crate::runtime::error::ConnectorError;
use crate::runtime::sink::{OpenAt, Sink, SinkWriter, SnapshotAt};
use crate::runtime::source::Source;
use serde::de::DeserializeOwned;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use thiserror::Error;

/// Builds a source from its entry; relative paths resolve against the
/// directory given.
type SourceBuilder = fn(&ConnectorSpec, &Path) -> Result<Arc<dyn Source>, OptionsError>;
/// Builds a sink from its entry.
type SinkBuilder = fn(&ConnectorSpec, &Path) -> Result<Arc<dyn Sink>, OptionsError>;

/// Every source kind.
const SOURCES: &[(&str, SourceBuilder)] = &[
    ("file", file_source::build),
    ("generator", generator::build),
    ("nexmark", nexmark::build),
    #[cfg(feature = "kafka")]
    ("kafka", kafka::source::build),
];

/// Every sink kind.
const SINKS: &[(&str, SinkBuilder)] = &[
    ("file", file_sink::build),
    ("transactional-file", transactional_file::build),
    ("stdout", build_stdout),
    ("discard", build_discard),
    ("latency", latency::build),
    #[cfg(feature = "kafka")]
    ("kafka", kafka::sink::build),
];

/// A source or sink entry that cannot be used as written.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{node}: {message}")]
pub struct OptionsError {
    /// "source 'lines'", "sink 'out'".
    pub node: String,
    /// What is wrong, naming the field.
    pub message: String,
}

/// The source `spec` configures.
pub fn source(spec: &ConnectorSpec, base: &Path) -> Result<Arc<dyn Source>, OptionsError> {
    let build = lookup(SOURCES, spec, "source")?;
    build(spec, base)
}

/// The sink `spec` configures.
pub fn sink(spec: &ConnectorSpec, base: &Path) -> Result<Arc<dyn Sink>, OptionsError> {
    let build = lookup(SINKS, spec, "sink")?;
    build(spec, base)
}

fn lookup<B: Copy>(registry: &[(&str, B)], spec: &ConnectorSpec, role: &str) -> Result<B, OptionsError> {
    registry.iter().find(|(kind, _)| *kind == spec.kind).map(|(_, b)| *b).ok_or_else(|| {
        let kinds: Vec<&str> = registry.iter().map(|(k, _)| *k).collect();
        OptionsError {
            node: format!("{role} '{}'", spec.id),
            message: format!("kind = {:?} is not a {role} kind (use one of: {})", spec.kind, kinds.join(", ")),
        }
    })
}

/// Reads a connector's options (every field of its entry but `id`, `kind`
/// and `input`) as `T`, which should deny unknown fields.
pub fn options<T: DeserializeOwned>(spec: &ConnectorSpec, role: &str) -> Result<T, OptionsError> {
    toml::Value::Table(spec.options.clone()).try_into().map_err(|e: toml::de::Error| OptionsError {
        node: format!("{role} '{}' (kind = {:?})", spec.id, spec.kind),
        message: e.message().trim_end().to_string(),
    })
}

/// Options of a connector that takes none.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct NoOptions {}

/// `kind = "stdout"`: payloads as lines on standard output (at-least-once
/// across restarts: lines after the last checkpoint come again).
struct Stdout;

fn build_stdout(spec: &ConnectorSpec, _: &Path) -> Result<Arc<dyn Sink>, OptionsError> {
    options::<NoOptions>(spec, "sink")?;
    Ok(Arc::new(Stdout))
}

impl Sink for Stdout {
    fn open(&self, _: OpenAt<'_>) -> Result<Box<dyn SinkWriter>, ConnectorError> {
        Ok(Box::new(std::io::BufWriter::new(std::io::stdout())))
    }
}

impl SinkWriter for std::io::BufWriter<std::io::Stdout> {
    fn write(&mut self, batch: &Batch) -> Result<(), ConnectorError> {
        let io = |source| ConnectorError::Io { op: "write to", path: "standard output".into(), cause: source };
        for r in batch.iter() {
            self.write_all(r.payload).and_then(|_| self.write_all(b"\n")).map_err(io)?;
        }
        Ok(())
    }

    fn checkpoint(&mut self, _: &SnapshotAt<'_>) -> Result<Option<SinkState>, ConnectorError> {
        self.flush().map_err(|source| ConnectorError::Io {
            op: "write to",
            path: "standard output".into(),
            cause: source,
        })?;
        Ok(None)
    }
}

/// `kind = "discard"`: drops everything (for benchmarks).
struct Discard;

fn build_discard(spec: &ConnectorSpec, _: &Path) -> Result<Arc<dyn Sink>, OptionsError> {
    options::<NoOptions>(spec, "sink")?;
    Ok(Arc::new(Discard))
}

impl Sink for Discard {
    fn open(&self, _: OpenAt<'_>) -> Result<Box<dyn SinkWriter>, ConnectorError> {
        Ok(Box::new(Discard))
    }
}

impl SinkWriter for Discard {
    fn write(&mut self, _: &Batch) -> Result<(), ConnectorError> {
        Ok(())
    }

    fn checkpoint(&mut self, _: &SnapshotAt<'_>) -> Result<Option<SinkState>, ConnectorError> {
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(kind: &str, options: &str) -> ConnectorSpec {
        ConnectorSpec { id: "x".into(), kind: kind.into(), options: toml::from_str(options).unwrap(), parallelism: 1 }
    }

    #[test]
    fn unknown_kinds_and_fields_are_named() {
        let e = source(&spec("kafka2", ""), Path::new(".")).err().unwrap();
        assert!(
            e.to_string()
                .starts_with("source 'x': kind = \"kafka2\" is not a source kind (use one of: file, generator"),
            "{e}"
        );
        let e = sink(&spec("stdout", "colour = true"), Path::new(".")).err().unwrap();
        assert!(e.to_string().starts_with("sink 'x' (kind = \"stdout\"): unknown field `colour`"), "{e}");
        let e = source(&spec("generator", "count = 1"), Path::new(".")).err().unwrap();
        assert!(e.to_string().contains("missing field `keys`"), "{e}");
    }
}
