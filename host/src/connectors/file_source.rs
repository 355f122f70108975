//! The file source: one record per line (`lines`), or one JSON object per
//! line (`jsonl`) with an optional key field.

use super::SourceContext;
use crate::config::Format;
use crate::runtime::batch::Record;
use crate::runtime::events::{Counters, TaskError};
use std::io::{BufRead, BufReader};
use std::path::Path;

/// Reads `path` to the end.
pub fn run(
    mut ctx: SourceContext,
    path: &Path,
    format: Format,
    key_field: Option<&str>,
    timestamp_field: Option<&str>,
) -> Result<Counters, TaskError> {
    let mut file = std::fs::File::open(path).map_err(|e| ctx.error(format!("cannot open {}: {e}", path.display())))?;
    // The position is a byte offset: the start of the next line.
    if ctx.position > 0 {
        use std::io::Seek;
        let len = file.metadata().map(|m| m.len()).unwrap_or(0);
        if ctx.position > len {
            return Err(ctx.error(format!(
                "cannot resume {} at byte {}: the file has only {len} bytes (did it change since the checkpoint?)",
                path.display(),
                ctx.position
            )));
        }
        file.seek(std::io::SeekFrom::Start(ctx.position))
            .map_err(|e| ctx.error(format!("cannot seek in {}: {e}", path.display())))?;
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
        let n = reader
            .read_until(b'\n', &mut line)
            .map_err(|e| ctx.error(format!("cannot read {}: {e}", path.display())))?;
        if n == 0 {
            break;
        }
        number += 1;
        ctx.position += n as u64;
        if line.last() == Some(&b'\n') {
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
        }
        match format {
            Format::Lines => ctx.emit(Record { payload: &line, key: None, timestamp: None })?,
            Format::Jsonl => {
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                let at = |m: String| ctx.error(format!("{}:{number}{start}: {m}", path.display()));
                let value: serde_json::Value =
                    serde_json::from_slice(&line).map_err(|e| at(format!("invalid JSON: {e}")))?;
                let key = match key_field {
                    Some(field) => Some(json_key(&value, field).map_err(at)?),
                    None => None,
                };
                let timestamp = match timestamp_field {
                    Some(field) => Some(json_timestamp(&value, field).map_err(at)?),
                    None => None,
                };
                ctx.emit(Record { payload: &line, key: key.as_deref(), timestamp })?;
            }
        }
    }
    ctx.finish()
}

/// The event time of a JSON line: an integer field, in milliseconds.
fn json_timestamp(value: &serde_json::Value, field: &str) -> Result<i64, String> {
    match value.get(field) {
        Some(v) => v.as_i64().ok_or_else(|| format!("timestamp field '{field}' is {v}, not an integer (milliseconds)")),
        None => Err(format!("no timestamp field '{field}'")),
    }
}

/// The key of a JSON line: a string field's text, or a number or boolean's
/// JSON text.
fn json_key(value: &serde_json::Value, field: &str) -> Result<Vec<u8>, String> {
    match value.get(field) {
        Some(serde_json::Value::String(s)) => Ok(s.clone().into_bytes()),
        Some(v @ (serde_json::Value::Number(_) | serde_json::Value::Bool(_))) => Ok(v.to_string().into_bytes()),
        Some(other) => Err(format!("key field '{field}' is {other}, not a string, number or boolean")),
        None => Err(format!("no key field '{field}'")),
    }
}

#[cfg(test)]
mod tests {
    use super::{json_key, json_timestamp};

    fn parse(line: &str) -> serde_json::Value {
        serde_json::from_str(line).unwrap()
    }

    #[test]
    fn json_keys() {
        assert_eq!(json_key(&parse(r#"{"user":"ann","n":1}"#), "user").unwrap(), b"ann");
        assert_eq!(json_key(&parse(r#"{"user":42}"#), "user").unwrap(), b"42");
        assert!(json_key(&parse(r#"{"n":1}"#), "user").unwrap_err().contains("no key field"));
        assert!(json_key(&parse(r#"{"user":[1]}"#), "user").is_err());
    }

    #[test]
    fn json_timestamps() {
        assert_eq!(json_timestamp(&parse(r#"{"ts":1700000000123}"#), "ts").unwrap(), 1_700_000_000_123);
        assert!(json_timestamp(&parse(r#"{"ts":"noon"}"#), "ts").unwrap_err().contains("not an integer"));
        assert!(json_timestamp(&parse(r#"{"t":1}"#), "ts").unwrap_err().contains("no timestamp field"));
    }
}
