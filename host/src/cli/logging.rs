//! The host's log on stderr: text for people (with the progress line on a
//! terminal) or one JSON object per line for collectors, and in both no
//! character a stored file, the network or a guest put in a field can
//! steer the terminal that shows it.
//!
//! tracing-subscriber's own text format escapes only some of them (ESC,
//! BEL, backspace, DEL and C1, in messages but not in other fields; not a
//! carriage return nor a bidirectional override), so text fields are
//! written by [`EscapedFields`] through the host's one rule,
//! [`weir_host::paths::terminal`]. Its JSON format escapes C0 (JSON
//! requires it) but writes DEL, C1 and bidirectional characters raw inside
//! its strings; [`JsonEscaped`] writes those as `\uXXXX`, which keeps
//! every line the same JSON value.

use super::LogFormat;
use std::fmt;
use std::io;
use tracing::field::{Field, Visit};
use tracing_subscriber::field::RecordFields;
use tracing_subscriber::fmt::FormatFields;
use tracing_subscriber::fmt::format::Writer;
use weir_host::coordinator::progress;
use weir_host::paths::terminal::{Escaped, is_unsafe};

/// Logs to stderr, `warn,weir_host=info` unless `RUST_LOG` says otherwise.
/// Text logs on a terminal come with the progress line, and are printed
/// above it; JSON logs are for collectors, which a redrawn line would only
/// garble, so they come without.
pub fn init_logging(format: LogFormat) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn,weir_host=info"));
    let log = tracing_subscriber::fmt().with_env_filter(filter).with_target(false);
    match format {
        LogFormat::Text => {
            let terminal = progress::draw_on_terminal();
            log.fmt_fields(EscapedFields).with_writer(progress::log_writer).with_ansi(terminal).init()
        }
        LogFormat::Json => log.with_writer(|| JsonEscaped(io::stderr())).json().init(),
    }
}

/// A text event's or span's fields as tracing-subscriber's default writes
/// them (the message bare, then `name=value`, names in italics on a
/// terminal), every value escaped.
pub struct EscapedFields;

impl<'w> FormatFields<'w> for EscapedFields {
    fn format_fields<R: RecordFields>(&self, writer: Writer<'w>, fields: R) -> fmt::Result {
        let mut visitor = FieldWriter { writer, first: true, result: Ok(()) };
        fields.record(&mut visitor);
        visitor.result
    }
}

struct FieldWriter<'w> {
    writer: Writer<'w>,
    first: bool,
    result: fmt::Result,
}

impl Visit for FieldWriter<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        // A message is shown bare, other text quoted (as the default does).
        if field.name() == "message" {
            self.record_debug(field, &format_args!("{value}"))
        } else {
            self.record_debug(field, &value)
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        // `log.*`: a `log` record's target and place, which the event's
        // own metadata already shows.
        if self.result.is_err() || field.name().starts_with("log.") {
            return;
        }
        let space = if std::mem::take(&mut self.first) { "" } else { " " };
        let name = field.name().strip_prefix("r#").unwrap_or(field.name());
        let value = Escaped(AsDebug(value));
        self.result = if field.name() == "message" {
            write!(self.writer, "{space}{value}")
        } else if self.writer.has_ansi_escapes() {
            write!(self.writer, "{space}\x1b[3m{name}\x1b[0m\x1b[2m=\x1b[0m{value}")
        } else {
            write!(self.writer, "{space}{name}={value}")
        };
    }
}

/// A value written as its `Debug` (what a field holds: `%x` fields'
/// `Debug` is their `Display`).
struct AsDebug<'a>(&'a dyn fmt::Debug);

impl fmt::Display for AsDebug<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

/// A writer of JSON lines that writes each character [`is_unsafe`] names
/// (the JSON writer left raw: DEL, C1, separators, bidirectional
/// formatting) as a `\uXXXX` escape, which JSON reads back as the same
/// character. The line's own end passes.
pub struct JsonEscaped<W>(pub W);

impl<W: io::Write> io::Write for JsonEscaped<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // One event is one write of whole UTF-8 text; anything that is not
        // text goes on as it came.
        let text = match std::str::from_utf8(buf) {
            Ok(t) => t,
            Err(e) => std::str::from_utf8(&buf[..e.valid_up_to()]).expect("valid up to there"),
        };
        if !text.chars().any(|c| c != '\n' && is_unsafe(c)) {
            return self.0.write_all(buf).map(|()| buf.len());
        }
        let mut out = String::with_capacity(buf.len() + 16);
        for c in text.chars() {
            if c != '\n' && is_unsafe(c) {
                out.push_str(&format!("\\u{:04x}", c as u32));
            } else {
                out.push(c);
            }
        }
        self.0.write_all(out.as_bytes())?;
        self.0.write_all(&buf[text.len()..])?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// What `log` writes through a JSON subscriber and [`JsonEscaped`].
    fn logged_json(log: impl FnOnce()) -> String {
        let out = Arc::new(Mutex::new(Vec::new()));
        let sink = out.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_target(false)
            .without_time()
            .with_writer(move || JsonEscaped(Shared(sink.clone())))
            .json()
            .finish();
        tracing::subscriber::with_default(subscriber, log);
        String::from_utf8(out.lock().unwrap().clone()).unwrap()
    }

    /// What `log` writes through a text subscriber with [`EscapedFields`],
    /// `ansi` as on a terminal.
    fn logged_text(ansi: bool, log: impl FnOnce()) -> String {
        let out = Arc::new(Mutex::new(Vec::new()));
        let sink = out.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_target(false)
            .without_time()
            .with_level(false)
            .fmt_fields(EscapedFields)
            .with_ansi(ansi)
            .with_writer(move || Shared(sink.clone()))
            .finish();
        tracing::subscriber::with_default(subscriber, log);
        String::from_utf8(out.lock().unwrap().clone()).unwrap()
    }

    #[derive(Clone)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl io::Write for Shared {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    const HOSTILE: &str = "x\x1b]0;title\x07\r\u{202e}\u{2066}\u{85}\u{7f}\ny";

    #[test]
    fn text_fields_and_messages_are_escaped_with_their_layout_kept() {
        let line = logged_text(false, || {
            tracing::warn!(path = %HOSTILE, name = HOSTILE, count = 3, "restored {HOSTILE}");
        });
        let escaped = "x\\u{1b}]0;title\\u{7}\\u{d}\\u{202e}\\u{2066}\\u{85}\\u{7f}\\u{a}y";
        assert_eq!(line, format!("restored {escaped} path={escaped} name=\"{}\" count=3\n", HOSTILE.escape_debug()));
        assert_eq!(line.lines().count(), 1, "one event, one line: {line:?}");
        assert!(!line.contains(['\x1b', '\r', '\u{202e}', '\u{85}']), "{line:?}");
        // On a terminal, the names in italics are the only escape codes.
        let line = logged_text(true, || tracing::info!(path = %HOSTILE, "m"));
        assert_eq!(line.matches('\x1b').count(), 4, "{line:?}");
        assert!(line.contains(&format!("\x1b[3mpath\x1b[0m\x1b[2m=\x1b[0m{escaped}")), "{line:?}");
    }

    #[test]
    fn json_lines_stay_json_with_every_unsafe_character_escaped() {
        let out = logged_json(|| tracing::warn!(path = %HOSTILE, "restored {HOSTILE}"));
        assert_eq!(out.lines().count(), 1, "{out:?}");
        assert!(!out.trim_end().chars().any(is_unsafe), "{out:?}");
        let value: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(value["fields"]["path"], HOSTILE, "JSON reads back the very text");
        assert_eq!(value["fields"]["message"], format!("restored {HOSTILE}"));
    }
}
