//! `kind = "file"` source: one record per line (`lines`), or one JSON object
//! per line (`jsonl`) with an optional key field and event-time field. Its
//! position is a byte offset: the start of the next line.

use super::{OptionsError, options};
use crate::config::ConnectorSpec;
use crate::config::units::HumanDuration;
use crate::record::Record;
use crate::runtime::error::ConnectorError;
use crate::runtime::source::{Halt, Source, SourceContext};
use serde::Deserialize;
use std::io::{BufRead, BufReader, Read, Seek};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The longest line read as one record: the input is not the host's to
/// buffer without bound.
const MAX_LINE_BYTES: u64 = 64 << 20;

/// Line formats.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// One record per line; the payload is the line without its newline.
    #[default]
    Lines,
    /// One JSON object per line; the payload is the line.
    Jsonl,
}

/// The entry's options.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Options {
    /// The file, relative to the job file.
    path: PathBuf,
    #[serde(default)]
    format: Format,
    /// jsonl: the field whose value becomes the record key.
    key_field: Option<String>,
    /// jsonl: the integer field (milliseconds since the epoch) that becomes
    /// the record's event time; the source then emits watermarks.
    timestamp_field: Option<String>,
    /// How far event time may go backwards.
    max_out_of_orderness: Option<HumanDuration>,
    /// At most this many records per second.
    records_per_second: Option<f64>,
}

/// A configured file source.
#[derive(Debug)]
pub struct FileSource {
    path: PathBuf,
    format: Format,
    key_field: Option<String>,
    timestamp_field: Option<String>,
    watermark_lag_ms: Option<i64>,
    rate: Option<f64>,
}

/// Builds the source from its entry; `path` is relative to `base`.
pub fn build(spec: &ConnectorSpec, base: &Path) -> Result<Arc<dyn Source>, OptionsError> {
    let o: Options = options(spec, "source")?;
    let bad = |message: String| OptionsError { node: format!("source '{}'", spec.id), message };
    let path = base.join(&o.path);
    if !path.is_file() {
        return Err(bad(format!("path {} does not exist or is not a file", path.display())));
    }
    if o.key_field.is_some() && o.format != Format::Jsonl {
        return Err(bad("key_field needs format = \"jsonl\"".into()));
    }
    if o.timestamp_field.is_some() && o.format != Format::Jsonl {
        return Err(bad("timestamp_field needs format = \"jsonl\"".into()));
    }
    if o.max_out_of_orderness.is_some() && o.timestamp_field.is_none() {
        return Err(bad("max_out_of_orderness needs timestamp_field".into()));
    }
    if let Some(problem) = rate_problem(o.records_per_second) {
        return Err(bad(problem));
    }
    Ok(Arc::new(FileSource {
        path,
        format: o.format,
        watermark_lag_ms: o
            .timestamp_field
            .as_ref()
            .map(|_| o.max_out_of_orderness.map_or(0, |d| d.0.as_millis() as i64)),
        key_field: o.key_field,
        timestamp_field: o.timestamp_field,
        rate: o.records_per_second,
    }))
}

/// What is wrong with a rate limit, if anything: it must be between one
/// record per thousand seconds and a billion records per second.
pub(super) fn rate_problem(rate: Option<f64>) -> Option<String> {
    rate.filter(|r| !(r.is_finite() && (1e-3..=1e9).contains(r)))
        .map(|r| format!("records_per_second = {r} must be between 0.001 and 1e9"))
}

impl Source for FileSource {
    fn watermark_lag_ms(&self) -> Option<i64> {
        self.watermark_lag_ms
    }

    fn records_per_second(&self) -> Option<f64> {
        self.rate
    }

    fn run(&self, ctx: &mut SourceContext) -> Result<(), Halt> {
        let path = &self.path;
        let io = |op, source| ConnectorError::Io { op, path: path.clone(), cause: source };
        let mut file = std::fs::File::open(path).map_err(|e| ctx.fail(io("open", e)))?;
        if ctx.position > 0 {
            let len = file.metadata().map(|m| m.len()).unwrap_or(0);
            if ctx.position > len {
                return Err(ctx.fail(ConnectorError::Inconsistent(format!(
                    "cannot resume {} at byte {}: the file has only {len} bytes (did it change since the checkpoint?)",
                    path.display(),
                    ctx.position
                ))));
            }
            file.seek(std::io::SeekFrom::Start(ctx.position)).map_err(|e| ctx.fail(io("seek in", e)))?;
        }
        let mut reader = BufReader::with_capacity(1 << 20, file);
        let mut line = Vec::new();
        let mut number = 0u64;
        // After a restore, lines count from the restored offset.
        let start = match ctx.position {
            0 => String::new(),
            at => format!(" (counting from byte {at}, where the job resumed)"),
        };
        loop {
            line.clear();
            let n = (&mut reader)
                .take(MAX_LINE_BYTES + 1)
                .read_until(b'\n', &mut line)
                .map_err(|e| ctx.fail(io("read", e)))?;
            if n == 0 {
                return Ok(());
            }
            if n as u64 > MAX_LINE_BYTES {
                return Err(ctx.fail(ConnectorError::BadRecord(format!(
                    "{}:{}{start}: a line longer than {MAX_LINE_BYTES} bytes",
                    path.display(),
                    number + 1
                ))));
            }
            number += 1;
            ctx.position += n as u64;
            if line.last() == Some(&b'\n') {
                line.pop();
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
            }
            match self.format {
                Format::Lines => ctx.emit(Record { payload: &line, key: None, timestamp: None })?,
                Format::Jsonl => {
                    if line.iter().all(u8::is_ascii_whitespace) {
                        continue;
                    }
                    let at = |m: String| {
                        ctx.fail(ConnectorError::BadRecord(format!("{}:{number}{start}: {m}", path.display())))
                    };
                    let value: serde_json::Value =
                        serde_json::from_slice(&line).map_err(|e| at(format!("invalid JSON: {e}")))?;
                    let key = match &self.key_field {
                        Some(field) => Some(json_key(&value, field).map_err(|e| at(e.to_string()))?),
                        None => None,
                    };
                    let timestamp = match &self.timestamp_field {
                        Some(field) => Some(json_timestamp(&value, field).map_err(|e| at(e.to_string()))?),
                        None => None,
                    };
                    ctx.emit(Record { payload: &line, key: key.as_deref(), timestamp })?;
                }
            }
        }
    }
}

/// The event time of a JSON line: an integer field, in milliseconds.
pub(super) fn json_timestamp(value: &serde_json::Value, field: &str) -> Result<i64, ConnectorError> {
    let bad = ConnectorError::BadRecord;
    match value.get(field) {
        Some(v) => {
            v.as_i64().ok_or_else(|| bad(format!("timestamp field '{field}' is {v}, not an integer (milliseconds)")))
        }
        None => Err(bad(format!("no timestamp field '{field}'"))),
    }
}

/// The key of a JSON line: a string field's text, or a number or boolean's
/// JSON text.
pub(super) fn json_key(value: &serde_json::Value, field: &str) -> Result<Vec<u8>, ConnectorError> {
    let bad = ConnectorError::BadRecord;
    match value.get(field) {
        Some(serde_json::Value::String(s)) => Ok(s.clone().into_bytes()),
        Some(v @ (serde_json::Value::Number(_) | serde_json::Value::Bool(_))) => Ok(v.to_string().into_bytes()),
        Some(other) => Err(bad(format!("key field '{field}' is {other}, not a string, number or boolean"))),
        None => Err(bad(format!("no key field '{field}'"))),
    }
}

#[cfg(test)]
mod tests {
    use super::{json_key, json_timestamp, rate_problem};

    /// The option `config::roots` checks (when the host confines reads)
    /// is the one this source reads.
    #[test]
    fn the_path_the_roots_check_is_the_path_read() {
        use crate::config::roots::{Access, FILE_OPTIONS};
        let option = FILE_OPTIONS.iter().find(|o| o.role == "source" && o.kind == "file").expect("listed");
        assert_eq!(option.access, Access::Read);
        let dir = tempfile::tempdir().unwrap();
        let mut options = toml::Table::new();
        options.insert(option.key.into(), toml::Value::String("in.txt".into()));
        let spec = crate::config::ConnectorSpec { id: "i".into(), kind: "file".into(), options, parallelism: 1 };
        let e = super::build(&spec, dir.path()).err().expect("no such file yet").to_string();
        assert!(e.contains("in.txt does not exist"), "{e}");
        std::fs::write(dir.path().join("in.txt"), "a\n").unwrap();
        super::build(&spec, dir.path()).unwrap();
    }

    #[test]
    fn rates_outside_what_a_pacer_can_keep_are_named() {
        for bad in [1e-19, 0.0, -5.0, 2e9, f64::NAN, f64::INFINITY] {
            let problem = rate_problem(Some(bad)).unwrap_or_else(|| panic!("{bad} accepted"));
            assert!(problem.contains("must be between 0.001 and 1e9"), "{problem}");
        }
        for good in [None, Some(0.001), Some(1.0), Some(1e9)] {
            assert_eq!(rate_problem(good), None);
        }
    }

    fn parse(line: &str) -> serde_json::Value {
        serde_json::from_str(line).unwrap()
    }

    #[test]
    fn json_keys() {
        assert_eq!(json_key(&parse(r#"{"user":"ann","n":1}"#), "user").unwrap(), b"ann");
        assert_eq!(json_key(&parse(r#"{"user":42}"#), "user").unwrap(), b"42");
        assert!(json_key(&parse(r#"{"n":1}"#), "user").unwrap_err().to_string().contains("no key field"));
        assert!(json_key(&parse(r#"{"user":[1]}"#), "user").is_err());
    }

    #[test]
    fn json_timestamps() {
        assert_eq!(json_timestamp(&parse(r#"{"ts":1700000000123}"#), "ts").unwrap(), 1_700_000_000_123);
        assert!(json_timestamp(&parse(r#"{"ts":"noon"}"#), "ts").unwrap_err().to_string().contains("not an integer"));
        assert!(json_timestamp(&parse(r#"{"t":1}"#), "ts").unwrap_err().to_string().contains("no timestamp field"));
    }
}
