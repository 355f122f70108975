//! The fixed-delay restart strategy when the failure does not go away: the
//! job restarts exactly `attempts` times, waits `delay` before each restart,
//! then fails with an error that names the cause and the attempts.

use super::support::JobDir;
use std::time::{Duration, Instant};
use weir_tests::artifacts;

const ATTEMPTS: u32 = 2;
const DELAY: Duration = Duration::from_millis(2500);

/// Seconds since midnight of the log record that line `i` belongs to, from
/// its RFC 3339 timestamp (`2026-11-30T12:54:39.123456Z  WARN ...`); a
/// record may span several lines.
fn logged_at(lines: &[&str], i: usize) -> f64 {
    let stamped = |l: &&&str| l.len() > 27 && l.as_bytes()[10] == b'T' && l.as_bytes()[26] == b'Z';
    let line = lines[..=i].iter().rev().find(stamped).unwrap_or_else(|| panic!("no timestamp before {}", lines[i]));
    let parts: Vec<f64> = line[11..26].split(':').map(|p| p.parse().unwrap()).collect();
    parts[0] * 3600.0 + parts[1] * 60.0 + parts[2]
}

#[test]
fn a_failure_that_persists_uses_up_the_attempts_waiting_the_delay_before_each() {
    let dir = JobDir::new();
    dir.write(
        "job.toml",
        format!(
            r#"name = "stubborn"

[restart-strategy]
type = "fixed-delay"
attempts = {ATTEMPTS}
delay = "{delay_ms}ms"

[[sources]]
id = "gen"
kind = "generator"
count = 100
keys = 10

[[operators]]
uid = "always-fails"
module = "{misbehave}"
input = "gen"
params = {{ mode = "trap" }}

[[sinks]]
id = "out"
kind = "discard"
input = "always-fails"
"#,
            delay_ms = DELAY.as_millis(),
            misbehave = artifacts::MISBEHAVE
        ),
    );
    let started = Instant::now();
    let err = dir.fails();
    let elapsed = started.elapsed();

    // Exactly ATTEMPTS restarts, each announced with the delay, then the
    // error with the guest's cause and the count of attempts.
    for n in 1..=ATTEMPTS {
        let announced = format!("restart {n} of {ATTEMPTS} in {} ms, from the beginning", DELAY.as_millis());
        assert_eq!(err.matches(&announced).count(), 1, "{announced:?} once:\n{err}");
    }
    assert!(!err.contains(&format!("restart {} of", ATTEMPTS + 1)), "{err}");
    assert!(err.contains("operator 'always-fails'") && err.contains("misbehave: trap on"), "the cause:\n{err}");
    assert!(
        err.contains(&format!("gave up after {ATTEMPTS} restart(s), restart-strategy.attempts = {ATTEMPTS}")),
        "the error names the attempts:\n{err}"
    );
    assert!(err.contains("error: job 'stubborn'"), "{err}");
    assert_eq!(err.matches("job started").count() as u32, ATTEMPTS + 1, "the first run and each restart:\n{err}");

    // Each restart started no sooner than DELAY after it was announced,
    // by the log's clock; and the whole run took at least ATTEMPTS delays.
    let lines: Vec<&str> = err.lines().collect();
    for n in 1..=ATTEMPTS {
        let announced = lines.iter().position(|l| l.contains(&format!("restart {n} of {ATTEMPTS}"))).unwrap();
        let restarted = announced
            + lines[announced..]
                .iter()
                .position(|l| l.contains("job started") && l.contains(&format!("attempt={n}")))
                .unwrap_or_else(|| panic!("restart {n} never started:\n{err}"));
        let mut waited = logged_at(&lines, restarted) - logged_at(&lines, announced);
        if waited < 0.0 {
            waited += 86_400.0; // past midnight
        }
        assert!(waited >= DELAY.as_secs_f64() - 0.001, "restart {n} waited {waited:.3}s, not {DELAY:?}:\n{err}");
        assert!(waited < DELAY.as_secs_f64() + 30.0, "restart {n} waited {waited:.3}s:\n{err}");
    }
    assert!(elapsed >= DELAY * ATTEMPTS, "the run took {elapsed:?}, less than {ATTEMPTS} delays of {DELAY:?}");
}
