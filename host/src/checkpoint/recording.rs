//! Recorded operator input, for `host replay`. One subtask's input between
//! two barriers is a *segment*, stored beside the job's checkpoints at
//! `recordings/<operator>/<subtask>/from-<barrier>.rec`. A segment starts
//! from the state the subtask had at the barrier it is named after and ends
//! at the next barrier (or at the end of input), so a replay from
//! checkpoint n follows the chain `from-n`, `from-<its end>`, … A later run
//! of the same stretch (after a restart from checkpoint n) writes `from-n`
//! again, so the chain always follows the run that went on.
//!
//! Each segment names the run of the subtask that wrote it, so a chain
//! never crosses into a segment another run wrote under a barrier id the
//! chain's run also used (a run that died before its checkpoint completed):
//! the next segment must come from the same run, or start a run restored
//! from that barrier's checkpoint.
//!
//! A segment is written with the part of the next checkpoint it leads to,
//! before the subtask acknowledges that checkpoint: a committed checkpoint
//! m means every segment up to m is stored.
//!
//! The format: `WEIRREC1`, the CRC-32 of the rest (u32, little endian), the
//! postcard-encoded [`SegmentHeader`], then `header.steps` postcard-encoded
//! steps. A step is one turn of the subtask's loop: the processing time it
//! ran at (every guest call of the step, and state TTL, saw that time), its
//! input, and what the module emitted for it. Specified for users in
//! `docs/replay.md`.

use super::storage::{CheckpointStorage, StorageError};
use crate::record::{Record, Records};
use bytes::Bytes;
use serde::de::{SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The first bytes of a segment file.
const MAGIC: &[u8; 8] = b"WEIRREC1";

/// The version of the format this host writes and reads.
pub const FORMAT_VERSION: u32 = 1;

/// The largest segment a replay reads (and the largest `replay.max_segment`
/// a job may set): a file larger than this is refused before it is read
/// whole.
pub const MAX_SEGMENT_READ: u64 = crate::config::job::MAX_MAX_SEGMENT + (1 << 20);

/// A recording that cannot be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordingError {
    /// The store failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// The file is not a segment this host can read.
    #[error("{location}: not a readable recording: {message}")]
    Corrupt {
        /// The file.
        location: String,
        /// What is wrong.
        message: String,
    },
}

/// What a segment says about itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SegmentHeader {
    /// [`FORMAT_VERSION`] when written.
    pub version: u32,
    /// The operator's uid.
    pub operator: String,
    /// The subtask.
    pub subtask: u32,
    /// The operator's parallelism.
    pub parallelism: u32,
    /// The job's key groups.
    pub max_parallelism: u32,
    /// The barrier whose state the segment starts from.
    pub start: u64,
    /// The barrier that ended it; `None`: the end of input.
    pub end: Option<u64>,
    /// The job's restarts when it was recorded.
    pub attempt: u32,
    /// The subtask's run that recorded it (random): segments of one run
    /// follow each other.
    pub run: u64,
    /// The first segment of a run restored from checkpoint `start`: it
    /// follows any segment that ends at `start`.
    pub resumed: bool,
    /// Processing time at its start (a replay's `open` sees it).
    pub started_at_ms: i64,
    /// The watermark the guest saw at its start.
    pub watermark: i64,
    /// Whether the guest's randomness was seeded: a replay seeds it the
    /// same way (from `wasm.random_seed` and the segment's start).
    pub seed: Option<u64>,
    /// The module the job file named, as the host saw its path.
    pub module: String,
    /// Whether a module was swapped in before or during this segment: its
    /// output is that module's.
    pub swapped: bool,
    /// The params the module's `open` got.
    pub params: Vec<(String, String)>,
    /// The state backend it ran on (`hashmap` or `rocksdb`).
    pub backend: String,
    /// Steps in the file.
    pub steps: u64,
    /// Input records in them.
    pub records_in: u64,
    /// The segment outgrew `replay.max_segment`: it holds no steps, and a
    /// replay stops at it.
    pub cut_short: bool,
}

/// One record as stored.
#[derive(Serialize, Deserialize)]
struct Stored<'a> {
    #[serde(with = "serde_bytes", borrow)]
    payload: &'a [u8],
    #[serde(with = "serde_bytes", borrow)]
    key: Option<&'a [u8]>,
    timestamp: Option<i64>,
}

/// Records as stored: a sequence of [`Stored`].
pub struct RecordsRef<'a>(pub &'a Records);

impl Serialize for RecordsRef<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(|r| Stored { payload: r.payload, key: r.key, timestamp: r.timestamp }))
    }
}

/// Records read back.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct OwnedRecords(pub Records);

impl<'de> Deserialize<'de> for OwnedRecords {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Seq;
        impl<'de> Visitor<'de> for Seq {
            type Value = OwnedRecords;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a sequence of records")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<OwnedRecords, A::Error> {
                // No capacity from the length prefix: it is the file's word.
                let mut records = Records::default();
                while let Some(r) = seq.next_element::<Stored<'de>>()? {
                    records.push(Record { payload: r.payload, key: r.key, timestamp: r.timestamp });
                }
                Ok(OwnedRecords(records))
            }
        }
        d.deserialize_seq(Seq)
    }
}

/// A step's input as the live subtask writes it. Variants in the order of
/// [`StepInput`], which reads them.
#[derive(Serialize)]
pub enum InputRef<'a> {
    /// No input: processing-time timers fired.
    Timers,
    /// A batch of records (`keyed`: over a keyed edge).
    Batch {
        /// Over a keyed edge.
        keyed: bool,
        /// The records.
        records: RecordsRef<'a>,
    },
    /// Records of a broadcast input.
    Broadcast(RecordsRef<'a>),
    /// A watermark; the event-time timers it fires go with it.
    Watermark(i64),
    /// The end of input, at this watermark: pending event-time timers fire,
    /// then `end-of-input`.
    End(i64),
}

/// A step's input read back.
#[derive(Debug, Deserialize, PartialEq, Eq)]
pub enum StepInput {
    /// See [`InputRef::Timers`].
    Timers,
    /// See [`InputRef::Batch`].
    Batch {
        /// Over a keyed edge.
        keyed: bool,
        /// The records.
        records: OwnedRecords,
    },
    /// See [`InputRef::Broadcast`].
    Broadcast(OwnedRecords),
    /// See [`InputRef::Watermark`].
    Watermark(i64),
    /// See [`InputRef::End`].
    End(i64),
}

/// One step read back.
#[derive(Debug, Deserialize, PartialEq, Eq)]
pub struct Step {
    /// The processing time it ran at.
    pub time: i64,
    /// Its input.
    pub input: StepInput,
    /// What the module emitted for it.
    pub output: OwnedRecords,
}

/// Appends the first part of a step (its time and input) to `buf`; the
/// output follows with [`append_output`] once the module ran.
pub fn append_input(buf: &mut Vec<u8>, time: i64, input: &InputRef<'_>) {
    // Writing to a Vec fails only on a serializer bug.
    let taken = std::mem::take(buf);
    *buf = postcard::to_extend(&(time, input), taken).expect("postcard writes to a Vec");
}

/// Appends a step's output to `buf`.
pub fn append_output(buf: &mut Vec<u8>, output: &Records) {
    let taken = std::mem::take(buf);
    *buf = postcard::to_extend(&RecordsRef(output), taken).expect("postcard writes to a Vec");
}

/// Where segment `start` of `operator`'s subtask `subtask` is stored,
/// relative to the job's checkpoint directory.
pub fn segment_path(operator: &str, subtask: u32, start: u64) -> String {
    format!("recordings/{operator}/{subtask}/from-{start}.rec")
}

/// A segment file's bytes: `header` and the encoded `steps`.
pub fn encode_segment(header: &SegmentHeader, steps: &[u8]) -> Vec<u8> {
    let mut rest = postcard::to_allocvec(header).expect("postcard writes to a Vec");
    rest.extend_from_slice(steps);
    let mut out = Vec::with_capacity(12 + rest.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&crc32fast::hash(&rest).to_le_bytes());
    out.extend_from_slice(&rest);
    out
}

/// A segment read back and checked.
pub struct Segment {
    /// Its header.
    pub header: SegmentHeader,
    /// Where it was read, for messages.
    pub location: String,
    bytes: Bytes,
    /// Where the steps begin in `bytes`.
    steps_at: usize,
}

impl Segment {
    /// Checks `bytes` (read from `location`) and reads the header.
    pub fn decode(bytes: Bytes, location: String) -> Result<Segment, RecordingError> {
        let corrupt = |message: String| RecordingError::Corrupt { location: location.clone(), message };
        if bytes.len() < 12 || &bytes[..8] != MAGIC {
            return Err(corrupt("it does not start with WEIRREC1".into()));
        }
        let crc = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
        if crc32fast::hash(&bytes[12..]) != crc {
            return Err(corrupt("its checksum does not match (damaged or cut short)".into()));
        }
        let (header, rest): (SegmentHeader, &[u8]) =
            postcard::take_from_bytes(&bytes[12..]).map_err(|e| corrupt(format!("bad header: {e}")))?;
        if header.version != FORMAT_VERSION {
            return Err(corrupt(format!(
                "format version {} (this host reads version {FORMAT_VERSION})",
                header.version
            )));
        }
        let steps_at = bytes.len() - rest.len();
        Ok(Segment { header, location, bytes, steps_at })
    }

    /// The steps, in order; a step that cannot be read ends the iteration
    /// with an error.
    pub fn steps(&self) -> impl Iterator<Item = Result<Step, RecordingError>> + '_ {
        let mut rest = &self.bytes[self.steps_at..];
        let mut left = self.header.steps;
        let mut failed = false;
        std::iter::from_fn(move || {
            if failed {
                return None;
            }
            if left == 0 {
                if !rest.is_empty() {
                    failed = true;
                    return Some(Err(self.corrupt(format!("{} bytes after its last step", rest.len()))));
                }
                return None;
            }
            left -= 1;
            match postcard::take_from_bytes::<Step>(rest) {
                Ok((step, tail)) => {
                    rest = tail;
                    Some(Ok(step))
                }
                Err(e) => {
                    failed = true;
                    Some(Err(self.corrupt(format!("step {} cannot be read: {e}", self.header.steps - left))))
                }
            }
        })
    }

    fn corrupt(&self, message: String) -> RecordingError {
        RecordingError::Corrupt { location: self.location.clone(), message }
    }
}

/// A finished segment, to store: its header and its encoded steps.
pub struct SegmentFile {
    /// The header.
    pub header: SegmentHeader,
    /// The steps, encoded.
    pub steps: Vec<u8>,
}

impl SegmentFile {
    /// Stores it (durably, as checkpoint files are); returns its size. The
    /// file is assembled here, on the storing thread, not on the subtask's.
    pub fn store(&self, storage: &CheckpointStorage) -> Result<u64, StorageError> {
        let h = &self.header;
        let path = segment_path(&h.operator, h.subtask, h.start);
        let (size, _) = storage.put_object(&path, encode_segment(h, &self.steps))?;
        Ok(size)
    }
}

impl SegmentHeader {
    /// Whether `next` (the segment from this one's end) continues it: the
    /// same run went on, or a run restored from that checkpoint began.
    pub fn continued_by(&self, next: &SegmentHeader) -> bool {
        next.run == self.run || next.resumed
    }
}

/// Reads segment `start` of `operator`'s subtask `subtask`; `None` if
/// there is none.
pub fn read_segment(
    storage: &CheckpointStorage,
    operator: &str,
    subtask: u32,
    start: u64,
) -> Result<Option<Segment>, RecordingError> {
    let path = segment_path(operator, subtask, start);
    let bytes = match storage.read_bounded(&path, MAX_SEGMENT_READ, "larger than any segment a job records") {
        Ok(b) => b,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let segment = Segment::decode(bytes, format!("{}/{path}", storage.display()))?;
    let h = &segment.header;
    if h.operator != operator || h.subtask != subtask || h.start != start {
        return Err(segment
            .corrupt(format!("it says it is segment {} of operator '{}' subtask {}", h.start, h.operator, h.subtask)));
    }
    Ok(Some(segment))
}

/// Deletes every segment that starts before barrier `oldest` (the oldest
/// checkpoint kept): no replay can start there any more. Returns how many.
pub fn delete_before(storage: &CheckpointStorage, oldest: u64) -> Result<usize, StorageError> {
    let mut deleted = 0;
    for path in storage.list_under("recordings")? {
        let start = path.rsplit('/').next().and_then(|f| f.strip_prefix("from-")?.strip_suffix(".rec")?.parse().ok());
        if start.is_some_and(|s: u64| s < oldest) {
            storage.delete_object(&path)?;
            deleted += 1;
        }
    }
    Ok(deleted)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records(items: &[Record<'_>]) -> Records {
        let mut r = Records::default();
        for item in items {
            r.push(*item);
        }
        r
    }

    fn header(steps: u64) -> SegmentHeader {
        SegmentHeader {
            version: FORMAT_VERSION,
            operator: "op".into(),
            subtask: 1,
            parallelism: 2,
            max_parallelism: 128,
            start: 4,
            end: Some(5),
            attempt: 0,
            run: 9,
            resumed: false,
            started_at_ms: 1_700_000_000_000,
            watermark: -5,
            seed: Some(7),
            module: "/m.wasm".into(),
            swapped: false,
            params: vec![("gap_ms".into(), "10".into())],
            backend: "hashmap".into(),
            steps,
            records_in: 3,
            cut_short: false,
        }
    }

    #[test]
    fn steps_round_trip_with_every_input_kind() {
        let batch = records(&[
            Record { payload: b"a", key: Some(b"k"), timestamp: Some(3) },
            Record { payload: b"", key: None, timestamp: None },
            Record { payload: &[0, 255], key: Some(b""), timestamp: Some(-1) },
        ]);
        let out = records(&[Record { payload: b"k 1", key: Some(b"k"), timestamp: None }]);
        let (mut buf, none) = (Vec::new(), Records::default());
        let inputs = [
            InputRef::Batch { keyed: true, records: RecordsRef(&batch) },
            InputRef::Timers,
            InputRef::Broadcast(RecordsRef(&batch)),
            InputRef::Watermark(i64::MIN),
            InputRef::End(42),
        ];
        for (i, input) in inputs.iter().enumerate() {
            append_input(&mut buf, 100 + i as i64, input);
            append_output(&mut buf, if i % 2 == 0 { &out } else { &none });
        }
        let file = encode_segment(&header(5), &buf);
        let segment = Segment::decode(Bytes::from(file), "f".into()).unwrap();
        assert_eq!(segment.header, header(5));
        let steps: Vec<Step> = segment.steps().collect::<Result<_, _>>().unwrap();
        assert_eq!(steps.len(), 5);
        assert_eq!(steps[0].time, 100);
        assert_eq!(steps[0].input, StepInput::Batch { keyed: true, records: OwnedRecords(batch.clone()) });
        assert_eq!(steps[0].output, OwnedRecords(out.clone()));
        assert_eq!(steps[1].input, StepInput::Timers);
        assert_eq!(steps[1].output, OwnedRecords::default());
        assert_eq!(steps[2].input, StepInput::Broadcast(OwnedRecords(batch)));
        assert_eq!(steps[3].input, StepInput::Watermark(i64::MIN));
        assert_eq!(steps[4].input, StepInput::End(42));
    }

    #[test]
    fn damaged_or_foreign_files_are_refused_by_name() {
        let mut buf = Vec::new();
        append_input(&mut buf, 1, &InputRef::Timers);
        append_output(&mut buf, &Records::default());
        let good = encode_segment(&header(1), &buf);
        let mut flipped = good.clone();
        *flipped.last_mut().unwrap() ^= 1;
        let err = Segment::decode(Bytes::from(flipped), "seg".into()).err().unwrap().to_string();
        assert!(err.contains("seg") && err.contains("checksum"), "{err}");
        let err = Segment::decode(Bytes::from_static(b"PK\x03\x04 not a segment"), "z".into()).err().unwrap();
        assert!(err.to_string().contains("WEIRREC1"), "{err}");
        // A header that promises more steps than the file has.
        let short = encode_segment(&header(2), &buf);
        let segment = Segment::decode(Bytes::from(short), "s".into()).unwrap();
        let steps: Vec<_> = segment.steps().collect();
        assert!(steps[0].is_ok() && steps[1].as_ref().is_err_and(|e| e.to_string().contains("step 2")));
        // Arbitrary bytes after a valid header never panic.
        for cut in 0..buf.len() {
            let file = encode_segment(&header(1), &buf[..cut]);
            let segment = Segment::decode(Bytes::from(file), "c".into()).unwrap();
            assert!(segment.steps().any(|s| s.is_err()));
        }
    }
}
