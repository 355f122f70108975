//! Telling a rebalance that moved nothing from one that did. When a member
//! leaves or misses its session, the group's coordinator must deal its
//! partitions to the others. Some coordinators do not in every case:
//! tansu 0.6.0, when another member's heartbeat finds the silent one, drops
//! it but keeps the old assignment and tells that member to rejoin, which
//! hands it back exactly what it had; the lost member's partitions then
//! belong to nobody and are never read again. A member that is handed back
//! exactly what was just revoked from it therefore leaves and joins as a
//! new member, which makes every coordinator run a full rebalance. A sound
//! coordinator can hand a member the same partitions too (a member whose
//! share does not change when another joins); the cost there is one more
//! rebalance, and a quiet spell after each rejoin keeps it at that.

use std::time::{Duration, Instant};

/// Watches one member's rebalances, across the consumers it joins with.
pub struct StaleWatch {
    /// What the last revocation took, until the next assignment.
    revoked: Option<Vec<i32>>,
    /// No second rejoin before this.
    quiet_until: Option<Instant>,
    /// How long the next quiet spell lasts; doubles with each rejoin.
    quiet: Duration,
}

/// The longest quiet spell between two rejoins.
const MAX_QUIET: Duration = Duration::from_secs(300);

impl StaleWatch {
    /// The first quiet spell lasts four sessions: long enough for the
    /// rebalance the rejoin starts to settle.
    pub fn new(session_timeout: Duration) -> Self {
        StaleWatch { revoked: None, quiet_until: None, quiet: session_timeout * 4 }
    }

    /// The group took `partitions` (sorted) from this member.
    pub fn revoked(&mut self, partitions: &[i32]) {
        self.revoked = Some(partitions.to_vec());
    }

    /// The group gave `partitions` (sorted) to this member; true when it
    /// should leave and join again now.
    pub fn rejoin_after(&mut self, partitions: &[i32], now: Instant) -> bool {
        let same = self.revoked.take().is_some_and(|r| !r.is_empty() && r == partitions);
        if !same || self.quiet_until.is_some_and(|t| now < t) {
            return false;
        }
        self.quiet_until = Some(now + self.quiet);
        self.quiet = (self.quiet * 2).min(MAX_QUIET);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn being_handed_back_what_was_revoked_rejoins_once_per_quiet_spell() {
        let mut w = StaleWatch::new(Duration::from_secs(6));
        let t = Instant::now();
        w.revoked(&[2, 5]);
        assert!(w.rejoin_after(&[2, 5], t));
        // Within the quiet spell (24 s), the same again is let be.
        w.revoked(&[2, 5]);
        assert!(!w.rejoin_after(&[2, 5], t + Duration::from_secs(10)));
        w.revoked(&[2, 5]);
        assert!(w.rejoin_after(&[2, 5], t + Duration::from_secs(25)));
        // The next spell is twice as long.
        w.revoked(&[2, 5]);
        assert!(!w.rejoin_after(&[2, 5], t + Duration::from_secs(60)));
        w.revoked(&[2, 5]);
        assert!(w.rejoin_after(&[2, 5], t + Duration::from_secs(74)));
    }

    #[test]
    fn a_first_assignment_or_a_changed_one_never_rejoins() {
        let mut w = StaleWatch::new(Duration::from_secs(6));
        let t = Instant::now();
        assert!(!w.rejoin_after(&[0, 3], t));
        w.revoked(&[0, 3]);
        assert!(!w.rejoin_after(&[0, 2, 4], t));
        w.revoked(&[0, 2, 4]);
        assert!(!w.rejoin_after(&[], t));
        // An assignment answers one revocation only.
        assert!(!w.rejoin_after(&[0, 2, 4], t));
    }
}
