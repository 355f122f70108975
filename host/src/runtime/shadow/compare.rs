//! How a shadow's output is compared with the live output: step by step
//! (a step is one input both modules processed: a batch, a watermark, the
//! end of input), and within a step per output key, in order. The n-th
//! record the live module emitted for a key is compared with the n-th the
//! shadow emitted for it; what one side has beyond the other is "only
//! live" or "only shadow". Two modules that emit the same records per key
//! in another interleaving of keys are equal.
//!
//! What is kept is bounded: counts, at most [`KEYS_LISTED`] keys with a
//! difference and [`SAMPLES_PER_KIND`](crate::api::SAMPLES_PER_KIND) samples of each kind of difference,
//! the first ones in the order the modules emitted them (so the live and
//! the shadow side of a changed output format show the same records),
//! whatever the run's length.

use crate::api::{DiffSample, KEYS_LISTED, KeyDiff, OutputDiff, sample_room, show_bytes};
use crate::record::{Record, Records};
use std::collections::BTreeMap;

/// One subtask's comparison so far.
#[derive(Debug, Default)]
pub struct Tally {
    /// Records by outcome.
    pub counts: OutputDiff,
    /// Per key with a difference: different, only live, only shadow.
    keys: BTreeMap<Option<Vec<u8>>, [u64; 3]>,
    /// Differences on keys beyond the first [`KEYS_LISTED`].
    unlisted: u64,
    samples: Vec<DiffSample>,
}

impl Tally {
    /// Compares what the live module and the shadow emitted for one step.
    pub fn compare(&mut self, live: &Records, shadow: &Records) {
        // The common case, two modules that agree: the same records in the
        // same order.
        if live.len() == shadow.len() && live.iter().zip(shadow.iter()).all(|(a, b)| a == b) {
            self.counts.equal += live.len() as u64;
            return;
        }
        // Each record with its place in its module's output.
        type Sides<'a> = (Vec<(usize, Record<'a>)>, Vec<(usize, Record<'a>)>);
        let mut by_key: BTreeMap<Option<&[u8]>, Sides<'_>> = BTreeMap::new();
        for (i, r) in live.iter().enumerate() {
            by_key.entry(r.key).or_default().0.push((i, r));
        }
        for (i, r) in shadow.iter().enumerate() {
            by_key.entry(r.key).or_default().1.push((i, r));
        }
        // Differences this step could show as samples: place in the output,
        // kind, key, the two sides. Made text only once chosen.
        type Candidate<'a> = (usize, usize, Option<&'a [u8]>, Option<Record<'a>>, Option<Record<'a>>);
        let mut candidates: Vec<Candidate<'_>> = Vec::new();
        let wanted = [0, 1, 2].map(|kind| sample_room(&self.samples, kind));
        for (key, (l, s)) in by_key {
            let mut diff = [0u64; 3];
            for i in 0..l.len().max(s.len()) {
                let (a, b) = (l.get(i), s.get(i));
                let slot = match (a.map(|r| r.1), b.map(|r| r.1)) {
                    (Some(a), Some(b)) if a == b => {
                        self.counts.equal += 1;
                        continue;
                    }
                    (Some(_), Some(_)) => {
                        self.counts.different += 1;
                        0
                    }
                    (Some(_), None) => {
                        self.counts.only_live += 1;
                        1
                    }
                    (None, _) => {
                        self.counts.only_shadow += 1;
                        2
                    }
                };
                diff[slot] += 1;
                if wanted[slot] {
                    let place = a.or(b).map_or(0, |r| r.0);
                    candidates.push((place, slot, key, a.map(|r| r.1), b.map(|r| r.1)));
                }
            }
            if diff != [0; 3] {
                self.note(key, diff);
            }
        }
        candidates.sort_by_key(|c| c.0);
        for (_, kind, key, a, b) in candidates {
            if sample_room(&self.samples, kind) {
                self.samples.push(DiffSample {
                    key: key.map(show_bytes),
                    live: a.map(|r| show_bytes(r.payload)),
                    shadow: b.map(|r| show_bytes(r.payload)),
                });
            }
        }
    }

    fn note(&mut self, key: Option<&[u8]>, diff: [u64; 3]) {
        let owned = key.map(<[u8]>::to_vec);
        let room = self.keys.len() < KEYS_LISTED;
        match self.keys.get_mut(&owned) {
            Some(d) => d.iter_mut().zip(diff).for_each(|(d, n)| *d += n),
            None if room => {
                self.keys.insert(owned, diff);
            }
            None => self.unlisted += diff.iter().sum::<u64>(),
        }
    }

    /// The keys with a difference, in key order; differences on keys not
    /// listed; the samples.
    pub fn listed(&self) -> (Vec<KeyDiff>, u64, Vec<DiffSample>) {
        let keys = self
            .keys
            .iter()
            .map(|(k, d)| KeyDiff {
                key: k.as_deref().map(show_bytes),
                different: d[0],
                only_live: d[1],
                only_shadow: d[2],
            })
            .collect();
        (keys, self.unlisted, self.samples.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::SAMPLES_PER_KIND;

    fn records(rs: &[(&str, &str)]) -> Records {
        let mut out = Records::default();
        for (k, p) in rs {
            out.push(Record { payload: p.as_bytes(), key: Some(k.as_bytes()), timestamp: Some(1) });
        }
        out
    }

    #[test]
    fn records_are_matched_per_key_in_order() {
        let mut t = Tally::default();
        t.compare(&records(&[("a", "a 1"), ("b", "b 1")]), &records(&[("a", "a 1"), ("b", "b 1")]));
        assert_eq!(t.counts, OutputDiff { equal: 2, ..OutputDiff::default() });
        // Another interleaving of keys is equal; a changed record, one too
        // many and one missing are told apart.
        t.compare(
            &records(&[("a", "a 2"), ("q", "q 1"), ("b", "b 2"), ("b", "b 3")]),
            &records(&[("b", "b 2"), ("a", "a 2"), ("q", "q 2"), ("z", "z 1")]),
        );
        assert_eq!(t.counts, OutputDiff { equal: 4, different: 1, only_live: 1, only_shadow: 1 });
        let (keys, unlisted, samples) = t.listed();
        let keys: Vec<_> =
            keys.iter().map(|k| (k.key.clone().unwrap(), k.different, k.only_live, k.only_shadow)).collect();
        assert_eq!(keys, [("b".into(), 0, 1, 0), ("q".into(), 1, 0, 0), ("z".into(), 0, 0, 1)]);
        assert_eq!(unlisted, 0);
        // Samples come in the order the modules emitted the records.
        let shown: Vec<_> = samples.iter().map(|s| (s.live.as_deref(), s.shadow.as_deref())).collect();
        assert_eq!(shown, [(Some("q 1"), Some("q 2")), (Some("b 3"), None), (None, Some("z 1"))]);
        // A timestamp is part of the record.
        let mut late = Records::default();
        late.push(Record { payload: b"a 1", key: Some(b"a"), timestamp: Some(2) });
        t.compare(&records(&[("a", "a 1")]), &late);
        assert_eq!(t.counts.different, 2);
    }

    #[test]
    fn keys_listed_are_bounded_and_the_rest_counted() {
        let mut t = Tally::default();
        for i in 0..KEYS_LISTED + 3 {
            let k = format!("k{i}");
            t.compare(&records(&[(&k, "1")]), &Records::default());
        }
        let (keys, unlisted, samples) = t.listed();
        assert_eq!(keys.len(), KEYS_LISTED);
        assert_eq!(unlisted, 3);
        assert_eq!(samples.len(), SAMPLES_PER_KIND);
        assert_eq!(t.counts.only_live, KEYS_LISTED as u64 + 3);
    }

    #[test]
    fn a_changed_output_format_shows_both_sides_of_the_same_first_records() {
        // The live module keys its records, the shadow does not: every record
        // is "only live" or "only shadow", and the shadow's (no key) would
        // come first in key order.
        let mut t = Tally::default();
        let words: Vec<String> = (0..100).map(|i| format!("w{:03}", 99 - i)).collect();
        let live = records(&words.iter().map(|w| (w.as_str(), w.as_str())).collect::<Vec<_>>());
        let mut shadow = Records::default();
        for w in &words {
            shadow.push(Record { payload: w.as_bytes(), key: None, timestamp: Some(1) });
        }
        t.compare(&live, &shadow);
        let (_, _, samples) = t.listed();
        let live: Vec<_> = samples.iter().filter_map(|s| s.live.clone()).collect();
        let shadow: Vec<_> = samples.iter().filter_map(|s| s.shadow.clone()).collect();
        assert_eq!(live, words[..SAMPLES_PER_KIND]);
        assert_eq!(shadow, words[..SAMPLES_PER_KIND]);
    }
}
