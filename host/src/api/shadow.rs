//! Shadow runs as the control API shows them (`POST /v1/shadows`,
//! `GET /v1/shadow`, `host shadow`): the request, and the report of what
//! the shadow's output had in common with the live output, merged over the
//! operator's subtasks.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Keys with a difference that a report lists; differences on further keys
/// are counted in [`ShadowReport::unlisted`].
pub const KEYS_LISTED: usize = 1000;

/// Differing records a report shows side by side, of each kind (different,
/// only live, only shadow): one kind of difference never crowds out the
/// others.
pub const SAMPLES_PER_KIND: usize = 8;

/// Differing records a report shows at most.
pub const SAMPLES_KEPT: usize = 3 * SAMPLES_PER_KIND;

/// How far behind the live operator a shadow may fall, in input batches,
/// unless the request says otherwise.
pub const DEFAULT_MAX_LAG: u32 = 1024;

/// `POST /v1/shadows`: run `module` beside operator `operator`, over a copy
/// of its state, on its live input.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShadowRequest {
    /// The operator's uid.
    pub operator: String,
    /// The module to try, a path on the job's machine.
    pub module: String,
    /// End the shadow after this many milliseconds; without it, it runs
    /// until stopped, promoted or the input ends.
    #[serde(default)]
    pub duration_ms: Option<u64>,
    /// Drop the shadow when a subtask of it is this many input batches
    /// behind the live one (default [`DEFAULT_MAX_LAG`]).
    #[serde(default)]
    pub max_lag: Option<u32>,
}

/// A shadow that started.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShadowStarted {
    /// The shadow's number in this run.
    pub id: u64,
    /// The operator it shadows.
    pub operator: String,
    /// The module it runs.
    pub module: String,
    /// The checkpoint whose barrier forked the state.
    pub checkpoint: u64,
}

/// Output records compared, by outcome.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputDiff {
    /// The same record from both.
    pub equal: u64,
    /// A record from each, not the same.
    pub different: u64,
    /// A record only the live module emitted.
    pub only_live: u64,
    /// A record only the shadow emitted.
    pub only_shadow: u64,
}

impl std::ops::AddAssign for OutputDiff {
    fn add_assign(&mut self, o: OutputDiff) {
        self.equal += o.equal;
        self.different += o.different;
        self.only_live += o.only_live;
        self.only_shadow += o.only_shadow;
    }
}

/// The differences on one output key.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyDiff {
    /// The key as text (hex, `0x…`, when it is not UTF-8); none for records
    /// without a key.
    pub key: Option<String>,
    /// Records that differ.
    pub different: u64,
    /// Records only the live module emitted.
    pub only_live: u64,
    /// Records only the shadow emitted.
    pub only_shadow: u64,
}

/// One difference, side by side.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiffSample {
    /// The output key, as in [`KeyDiff`].
    pub key: Option<String>,
    /// The live record's payload (as text, or hex), if it emitted one.
    pub live: Option<String>,
    /// The shadow's.
    pub shadow: Option<String>,
}

impl DiffSample {
    /// 0 for records that differ, 1 for only live, 2 for only shadow.
    pub fn kind(&self) -> usize {
        match (&self.live, &self.shadow) {
            (Some(_), Some(_)) => 0,
            (Some(_), None) => 1,
            _ => 2,
        }
    }
}

/// Whether `samples` has room for another sample of `kind`.
pub fn sample_room(samples: &[DiffSample], kind: usize) -> bool {
    samples.iter().filter(|s| s.kind() == kind).count() < SAMPLES_PER_KIND
}

/// What a shadow found: per subtask while it runs, merged over the
/// operator's subtasks for the API.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ShadowReport {
    /// The shadow's number in this run.
    pub id: u64,
    /// The operator it shadows.
    pub operator: String,
    /// The module it runs.
    pub module: String,
    /// The checkpoint whose barrier forked the state (0 before the fork).
    pub checkpoint: u64,
    /// "starting", "running", "ended" (stopped, its duration passed, the
    /// input ended, promoted) or "dropped" (it failed or fell behind).
    pub status: String,
    /// Why it ended or was dropped.
    pub reason: Option<String>,
    /// Milliseconds since it was asked for.
    pub elapsed_ms: u64,
    /// Input records the shadow processed.
    pub records_in: u64,
    /// Input batches it is behind the live operator (its slowest subtask).
    pub lag: u64,
    /// Output records compared.
    pub counts: OutputDiff,
    /// The keys with a difference (at most [`KEYS_LISTED`]), in key order.
    pub keys: Vec<KeyDiff>,
    /// Differences on keys not listed.
    pub unlisted: u64,
    /// Some differences, side by side (at most [`SAMPLES_KEPT`]).
    pub samples: Vec<DiffSample>,
}

impl ShadowReport {
    /// Adds subtask report `part` (of the same shadow) to this one: counts
    /// add up, keys (which subtasks do not share) join, the lag is the
    /// largest.
    pub fn absorb(&mut self, part: &ShadowReport) {
        self.records_in += part.records_in;
        self.lag = self.lag.max(part.lag);
        self.counts += part.counts;
        self.unlisted += part.unlisted;
        let mut keys: BTreeMap<Option<String>, KeyDiff> =
            std::mem::take(&mut self.keys).into_iter().map(|k| (k.key.clone(), k)).collect();
        for k in &part.keys {
            let entry =
                keys.entry(k.key.clone()).or_insert_with(|| KeyDiff { key: k.key.clone(), ..KeyDiff::default() });
            entry.different += k.different;
            entry.only_live += k.only_live;
            entry.only_shadow += k.only_shadow;
        }
        let extra = keys.len().saturating_sub(KEYS_LISTED);
        for (_, k) in keys.iter().rev().take(extra) {
            self.unlisted += k.different + k.only_live + k.only_shadow;
        }
        self.keys = keys.into_values().take(KEYS_LISTED).collect();
        for s in &part.samples {
            if sample_room(&self.samples, s.kind()) {
                self.samples.push(s.clone());
            }
        }
    }

    /// Whether the shadow no longer runs.
    pub fn is_over(&self) -> bool {
        self.status == "ended" || self.status == "dropped"
    }
}

/// Bytes for a report: the text if they are UTF-8 (up to 200 characters),
/// else `0x` and hex (up to 100 bytes).
pub fn show_bytes(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(text) if text.chars().count() <= 200 => text.to_string(),
        Ok(text) => format!("{}…", text.chars().take(200).collect::<String>()),
        Err(_) if bytes.len() <= 100 => format!("0x{}", hex::encode(bytes)),
        Err(_) => format!("0x{}…", hex::encode(&bytes[..100])),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(keys: &[&str], different: u64) -> ShadowReport {
        ShadowReport {
            records_in: 10,
            lag: different,
            counts: OutputDiff { equal: 5, different, only_live: 0, only_shadow: 1 },
            keys: keys
                .iter()
                .map(|k| KeyDiff { key: Some(k.to_string()), different: 1, ..KeyDiff::default() })
                .collect(),
            samples: [None, Some("l".to_string())]
                .into_iter()
                .flat_map(|live| vec![DiffSample { key: None, live, shadow: Some("x".into()) }; 5])
                .collect(),
            ..ShadowReport::default()
        }
    }

    #[test]
    fn subtask_reports_add_up_and_stay_bounded() {
        let mut all = ShadowReport::default();
        all.absorb(&part(&["b", "a"], 2));
        all.absorb(&part(&["c", "a"], 3));
        assert_eq!(all.records_in, 20);
        assert_eq!(all.lag, 3);
        assert_eq!(all.counts, OutputDiff { equal: 10, different: 5, only_live: 0, only_shadow: 2 });
        let keys: Vec<_> = all.keys.iter().map(|k| (k.key.clone().unwrap(), k.different)).collect();
        assert_eq!(keys, [("a".into(), 2), ("b".into(), 1), ("c".into(), 1)]);
        // Each kind keeps its own few: 5 + 3 "only shadow", 5 + 3 "different".
        assert_eq!(all.samples.len(), 2 * SAMPLES_PER_KIND);
        assert_eq!(all.samples.iter().filter(|s| s.kind() == 0).count(), SAMPLES_PER_KIND);

        let many: Vec<String> = (0..KEYS_LISTED + 5).map(|i| format!("k{i:05}")).collect();
        let mut big = ShadowReport::default();
        big.absorb(&part(&many.iter().map(String::as_str).collect::<Vec<_>>(), 0));
        assert_eq!(big.keys.len(), KEYS_LISTED);
        assert_eq!(big.unlisted, 5);
        assert_eq!(big.keys.last().unwrap().key.as_deref(), Some(many[KEYS_LISTED - 1].as_str()));
    }

    #[test]
    fn bytes_show_as_text_or_hex_and_are_cut() {
        assert_eq!(show_bytes(b"quark"), "quark");
        assert_eq!(show_bytes(&[0xff, 0x00]), "0xff00");
        assert_eq!(show_bytes(&[b'a'; 300]).chars().count(), 201);
        assert_eq!(show_bytes(&[0xff; 300]).len(), 2 + 200 + "…".len());
    }
}
