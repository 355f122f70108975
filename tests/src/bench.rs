//! What the benchmarks share: their settings from the environment and the
//! statistic they report.

/// The benchmark setting `name` (`WEIR_BENCH_…`), written with or without
/// `_` between digits (`4_000_000`); `default` when unset or not a number.
pub fn env_u64(name: &str, default: u64) -> u64 {
    setting(std::env::var(name).ok(), default)
}

fn setting(value: Option<String>, default: u64) -> u64 {
    value.and_then(|v| v.replace('_', "").parse().ok()).unwrap_or(default)
}

/// The median of some runs' results (the upper one of an even count).
pub fn median(mut v: Vec<f64>) -> f64 {
    assert!(!v.is_empty(), "the median of no runs");
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_is_the_middle_run() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), 3.0);
    }

    #[test]
    fn settings_take_digit_separators_and_fall_back_to_the_default() {
        assert_eq!(setting(Some("4_000_000".into()), 1), 4_000_000);
        assert_eq!(setting(Some("many".into()), 7), 7);
        assert_eq!(setting(None, 7), 7);
    }
}
