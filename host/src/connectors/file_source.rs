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
) -> Result<Counters, TaskError> {
    let file = std::fs::File::open(path).map_err(|e| ctx.error(format!("cannot open {}: {e}", path.display())))?;
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let mut line = Vec::new();
    let mut number = 0u64;
    loop {
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .map_err(|e| ctx.error(format!("cannot read {}: {e}", path.display())))?;
        if n == 0 {
            break;
        }
        number += 1;
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
                let key = match key_field {
                    Some(field) => Some(
                        json_key(&line, field).map_err(|m| ctx.error(format!("{}:{number}: {m}", path.display())))?,
                    ),
                    None => {
                        serde_json::from_slice::<serde::de::IgnoredAny>(&line)
                            .map_err(|e| ctx.error(format!("{}:{number}: invalid JSON: {e}", path.display())))?;
                        None
                    }
                };
                ctx.emit(Record { payload: &line, key: key.as_deref(), timestamp: None })?;
            }
        }
    }
    ctx.finish()
}

/// The key of a JSON line: a string field's text, or a number or boolean's
/// JSON text.
fn json_key(line: &[u8], field: &str) -> Result<Vec<u8>, String> {
    let value: serde_json::Value = serde_json::from_slice(line).map_err(|e| format!("invalid JSON: {e}"))?;
    match value.get(field) {
        Some(serde_json::Value::String(s)) => Ok(s.clone().into_bytes()),
        Some(v @ (serde_json::Value::Number(_) | serde_json::Value::Bool(_))) => Ok(v.to_string().into_bytes()),
        Some(other) => Err(format!("key field '{field}' is {other}, not a string, number or boolean")),
        None => Err(format!("no key field '{field}'")),
    }
}

#[cfg(test)]
mod tests {
    use super::json_key;

    #[test]
    fn json_keys() {
        assert_eq!(json_key(br#"{"user":"ann","n":1}"#, "user").unwrap(), b"ann");
        assert_eq!(json_key(br#"{"user":42}"#, "user").unwrap(), b"42");
        assert!(json_key(br#"{"n":1}"#, "user").unwrap_err().contains("no key field"));
        assert!(json_key(br#"{"user":[1]}"#, "user").is_err());
        assert!(json_key(b"not json", "user").unwrap_err().contains("invalid JSON"));
    }
}
