//! Durations (`"200ms"`, `"1.5s"`) and byte sizes (`"64MiB"`) as they
//! appear in `host.toml` and `job.toml`, parsed by `humantime` and
//! `bytesize` and wrapped so a bad value says which kind it should be.

use serde::{Deserialize, Deserializer, de};
use std::fmt;
use std::time::Duration;

/// A duration written as a number and a unit, as `humantime` reads it:
/// `"200ms"`, `"1.5s"`, `"10m"`, `"1h 30m"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HumanDuration(pub Duration);

/// A value that is not a duration or size; the message shows the text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadUnit(String);

impl HumanDuration {
    /// The longest duration a setting takes: timers and deadlines built
    /// from it stay far from overflowing.
    pub const MAX: Duration = Duration::from_secs(366 * 24 * 3600);

    /// Parses `"200ms"`-style text, up to [`HumanDuration::MAX`].
    pub fn parse(text: &str) -> Result<Self, BadUnit> {
        let d = humantime::parse_duration(text.trim()).map_err(|e| {
            BadUnit(format!("invalid duration {text:?}: {e} (write a number and a unit: \"200ms\", \"1.5s\", \"10m\")"))
        })?;
        if d > Self::MAX {
            return Err(BadUnit(format!(
                "invalid duration {text:?}: longer than 366 days, the most any setting takes"
            )));
        }
        Ok(HumanDuration(d))
    }
}

impl<'de> Deserialize<'de> for HumanDuration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        HumanDuration::parse(&s).map_err(de::Error::custom)
    }
}

impl fmt::Display for HumanDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", humantime::format_duration(self.0))
    }
}

/// A byte size: a plain integer, or a number and a unit as `bytesize`
/// reads it (`"64MiB"`, `"1 GiB"`; `KiB`, `MiB`, `GiB` are powers of 1024,
/// `KB`, `MB`, `GB` powers of 1000).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteSize(pub u64);

impl ByteSize {
    /// Parses `"64MiB"`-style text.
    pub fn parse(text: &str) -> Result<Self, BadUnit> {
        text.trim().parse::<bytesize::ByteSize>().map(|b| ByteSize(b.as_u64())).map_err(|e| {
            BadUnit(format!("invalid size {text:?}: {e} (write bytes, or a number and a unit: \"64MiB\")"))
        })
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Int(u64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Int(n) => Ok(ByteSize(n)),
            Raw::Text(s) => ByteSize::parse(&s).map_err(de::Error::custom),
        }
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", human_bytes(self.0))
    }
}

/// Bytes for people, in binary units: `"1.5 MiB"`.
pub fn human_bytes(n: u64) -> String {
    bytesize::ByteSize(n).display().iec().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(HumanDuration::parse("200ms").unwrap().0, Duration::from_millis(200));
        assert_eq!(HumanDuration::parse("1.5s").unwrap().0, Duration::from_millis(1500));
        assert_eq!(HumanDuration::parse("2m").unwrap().0, Duration::from_secs(120));
        assert_eq!(HumanDuration::parse(" 1h 30m ").unwrap().0, Duration::from_secs(5400));
        for bad in ["200", "5 parsecs", "fast", "-1s", "99999999999999999999s", "400 days"] {
            let e = HumanDuration::parse(bad).unwrap_err().to_string();
            assert!(e.starts_with(&format!("invalid duration {bad:?}")), "{e}");
        }
    }

    #[test]
    fn sizes_parse_with_units() {
        assert_eq!(ByteSize::parse("64MiB").unwrap().0, 64 << 20);
        assert_eq!(ByteSize::parse("1 GiB").unwrap().0, 1 << 30);
        assert_eq!(ByteSize::parse("4096").unwrap().0, 4096);
        assert!(ByteSize::parse("3 parsecs").unwrap_err().to_string().starts_with("invalid size \"3 parsecs\""));
        assert_eq!(ByteSize(64 << 20).to_string(), "64.0 MiB");
        assert_eq!(human_bytes(1536), "1.5 KiB");
    }
}
