//! How the dashboard writes numbers, durations and times on the server;
//! `app.js` writes them the same way in the browser. Sizes are
//! `bytesize`'s display (`1.5 KiB`), which `app.js` matches too.

use std::time::{Duration, UNIX_EPOCH};

/// `1234567` as `1,234,567`.
pub(super) fn fmt_count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Records per second, to three significant figures.
pub(super) fn fmt_rate(r: f64) -> String {
    if r >= 1e6 {
        format!("{:.2}M", r / 1e6)
    } else if r >= 1e4 {
        format!("{:.1}k", r / 1e3)
    } else if r >= 10.0 {
        format!("{r:.0}")
    } else {
        format!("{r:.1}")
    }
}

/// A share of time, 0 to 1, as a percentage.
pub(super) fn fmt_percent(ratio: f64) -> String {
    format!("{:.0} %", ratio * 100.0)
}

/// A duration: milliseconds under a second, seconds under a minute, then
/// hours, minutes and seconds.
pub(super) fn fmt_duration_ms(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms} ms")
    } else if ms < 60_000 {
        format!("{:.1} s", ms as f64 / 1000.0)
    } else {
        let s = ms / 1000;
        let (h, m, s) = (s / 3600, s / 60 % 60, s % 60);
        if h > 0 { format!("{h}h {m:02}m {s:02}s") } else { format!("{m}m {s:02}s") }
    }
}

/// The last millisecond RFC 3339 can write (9999-12-31T23:59:59.999Z).
const LAST_RFC3339_MS: u64 = 253_402_300_799_999;

/// A wall-clock time, UTC, to the second; past year 9999, the number.
pub(super) fn fmt_time(ms: u64) -> String {
    if ms > LAST_RFC3339_MS {
        return ms.to_string();
    }
    let t = UNIX_EPOCH + Duration::from_millis(ms);
    humantime::format_rfc3339_seconds(t).to_string().replace('T', " ").replace('Z', " UTC")
}

/// An event-time watermark: a time when it reads as one (the generator
/// and most sources stamp wall-clock milliseconds), else the number.
pub(super) fn fmt_watermark(w: i64) -> String {
    match u64::try_from(w) {
        _ if w == i64::MAX => "end of input".into(),
        Ok(ms) if ms <= LAST_RFC3339_MS => {
            let t = UNIX_EPOCH + Duration::from_millis(ms);
            humantime::format_rfc3339_millis(t).to_string().replace('T', " ").replace('Z', " UTC")
        }
        _ => w.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_as_people_write_them() {
        assert_eq!(fmt_count(0), "0");
        assert_eq!(fmt_count(999), "999");
        assert_eq!(fmt_count(1000), "1,000");
        assert_eq!(fmt_count(12_345_678), "12,345,678");
        // Sizes as bytesize writes them, and app.js's fmtBytes.
        use bytesize::ByteSize;
        assert_eq!(ByteSize(512).to_string(), "512 B");
        assert_eq!(ByteSize(1536).to_string(), "1.5 KiB");
        assert_eq!(ByteSize(5 << 30).to_string(), "5.0 GiB");
        assert_eq!(fmt_duration_ms(999), "999 ms");
        assert_eq!(fmt_duration_ms(1500), "1.5 s");
        assert_eq!(fmt_duration_ms(61_000), "1m 01s");
        assert_eq!(fmt_rate(0.26), "0.3");
        assert_eq!(fmt_rate(2500.0), "2500");
        assert_eq!(fmt_rate(25_000.0), "25.0k");
        assert_eq!(fmt_watermark(i64::MAX), "end of input");
        assert_eq!(fmt_watermark(-5), "-5");
        assert_eq!(fmt_time(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(fmt_time(u64::MAX), u64::MAX.to_string());
        assert_eq!(fmt_watermark(i64::MAX - 1), (i64::MAX - 1).to_string());
    }
}
