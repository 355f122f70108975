//! `DATE_FORMAT(dateTime, 'yyyy-MM-dd')` and `DATE_FORMAT(dateTime,
//! 'HH:mm')` of a time in milliseconds since the epoch, in UTC, written
//! into a reused buffer (these run once per bid). Dates are in the
//! proleptic Gregorian calendar, as `java.time` has them.

/// Milliseconds in a UTC day (no leap seconds, as in `java.time`).
pub const DAY_MS: i64 = 86_400_000;
const MINUTE_MS: i64 = 60_000;

/// The first millisecond of the UTC day after the one holding `t`.
pub fn day_end(t: i64) -> i64 {
    (t.div_euclid(DAY_MS) + 1).saturating_mul(DAY_MS)
}

/// The minute of the UTC day holding `t`, 0 to 1439.
pub fn minute_of_day(t: i64) -> u16 {
    (t.rem_euclid(DAY_MS) / MINUTE_MS) as u16
}

/// Appends `t`'s UTC date as `yyyy-MM-dd`; a year outside 0-9999 is
/// written with as many digits as it has (and its sign).
pub fn push_date(out: &mut Vec<u8>, t: i64) {
    let (y, m, d) = civil_from_days(t.div_euclid(DAY_MS));
    if (0..10_000).contains(&y) {
        push_digits(out, y, 4);
    } else {
        out.extend_from_slice(itoa::Buffer::new().format(y).as_bytes());
    }
    out.push(b'-');
    push_digits(out, m, 2);
    out.push(b'-');
    push_digits(out, d, 2);
}

/// Appends a minute of the day (0 to 1439) as `HH:mm`.
pub fn push_hour_minute(out: &mut Vec<u8>, minute_of_day: u16) {
    push_digits(out, i64::from(minute_of_day / 60), 2);
    out.push(b':');
    push_digits(out, i64::from(minute_of_day % 60), 2);
}

/// `(year, month, day)` of the date `days` after 1970-01-01: Howard
/// Hinnant's `civil_from_days`, in eras of 400 years from 0000-03-01.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// Appends `v` (non-negative, below 10^width) as `width` decimal digits.
fn push_digits(out: &mut Vec<u8>, v: i64, width: u32) {
    for i in (0..width).rev() {
        out.push(b'0' + (v / 10_i64.pow(i) % 10) as u8);
    }
}
