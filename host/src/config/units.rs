//! Human-readable durations (`"200ms"`, `"1s"`) and byte sizes (`"64MiB"`)
//! as they appear in `host.toml` and `job.toml`.

use serde::{Deserialize, Deserializer, de};
use std::fmt;
use std::time::Duration;

/// A duration written as a number and a unit: `us`, `ms`, `s`, `m` or `h`
/// (`"200ms"`, `"1.5s"`, `"10m"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HumanDuration(pub Duration);

impl HumanDuration {
    /// Parses `"200ms"`-style text.
    pub fn parse(text: &str) -> Result<Self, String> {
        let t = text.trim();
        let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
        let (num, unit) = t.split_at(split);
        let value: f64 = num.parse().map_err(|_| {
            format!("invalid duration {text:?}: expected a number and a unit such as \"200ms\" or \"1s\"")
        })?;
        let secs = match unit.trim() {
            "us" => value / 1e6,
            "ms" => value / 1e3,
            "s" => value,
            "m" | "min" => value * 60.0,
            "h" => value * 3600.0,
            "" => return Err(format!("invalid duration {text:?}: missing unit (us, ms, s, m or h)")),
            u => return Err(format!("invalid duration {text:?}: unknown unit {u:?} (use us, ms, s, m or h)")),
        };
        if !secs.is_finite() || secs < 0.0 {
            return Err(format!("invalid duration {text:?}"));
        }
        Ok(HumanDuration(Duration::from_secs_f64(secs)))
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
        write!(f, "{:?}", self.0)
    }
}

/// A byte size: a plain integer, or a number with `B`, `KiB`, `MiB` or `GiB`
/// (`"64MiB"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteSize(pub u64);

impl ByteSize {
    /// Parses `"64MiB"`-style text.
    pub fn parse(text: &str) -> Result<Self, String> {
        let t = text.trim();
        let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
        let (num, unit) = t.split_at(split);
        let value: u64 = num
            .parse()
            .map_err(|_| format!("invalid size {text:?}: expected a number and a unit such as \"64MiB\""))?;
        let mult: u64 = match unit.trim() {
            "" | "B" => 1,
            "KiB" | "KB" | "K" => 1 << 10,
            "MiB" | "MB" | "M" => 1 << 20,
            "GiB" | "GB" | "G" => 1 << 30,
            u => return Err(format!("invalid size {text:?}: unknown unit {u:?} (use B, KiB, MiB or GiB)")),
        };
        value.checked_mul(mult).map(ByteSize).ok_or_else(|| format!("size {text:?} is too large"))
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
        let b = self.0;
        if b >= 1 << 30 && b.is_multiple_of(1 << 30) {
            write!(f, "{} GiB", b >> 30)
        } else if b >= 1 << 20 && b.is_multiple_of(1 << 20) {
            write!(f, "{} MiB", b >> 20)
        } else if b >= 1 << 10 && b.is_multiple_of(1 << 10) {
            write!(f, "{} KiB", b >> 10)
        } else {
            write!(f, "{b} B")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(HumanDuration::parse("200ms").unwrap().0, Duration::from_millis(200));
        assert_eq!(HumanDuration::parse("1.5s").unwrap().0, Duration::from_millis(1500));
        assert_eq!(HumanDuration::parse("2m").unwrap().0, Duration::from_secs(120));
        assert!(HumanDuration::parse("200").unwrap_err().contains("missing unit"));
        assert!(HumanDuration::parse("5 days").unwrap_err().contains("unknown unit"));
        assert!(HumanDuration::parse("fast").is_err());
    }

    #[test]
    fn sizes_parse_with_units() {
        assert_eq!(ByteSize::parse("64MiB").unwrap().0, 64 << 20);
        assert_eq!(ByteSize::parse("4096").unwrap().0, 4096);
        assert!(ByteSize::parse("3 parsecs").is_err());
        assert_eq!(ByteSize(64 << 20).to_string(), "64 MiB");
    }
}
