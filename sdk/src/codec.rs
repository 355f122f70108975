//! State descriptors and the value encoding (postcard) shared by every handle.

use crate::bindings::weir::operator::types::{StateDescriptor, TtlConfig, TtlUpdate, TtlVisibility};
use crate::error::{Error, Result};
use serde::{Serialize, de::DeserializeOwned};
use std::cell::RefCell;
use std::time::Duration;

/// The encoding name recorded with every state this SDK registers.
pub(crate) const ENCODING: &str = "postcard";

/// How a state is declared: its name, value-format version and optional TTL.
///
/// `&str` converts into a descriptor with version 1 and no TTL, so
/// `ctx.value_state::<u64>("count")` is the common case.
#[derive(Debug, Clone)]
pub struct Descriptor {
    name: String,
    version: u32,
    ttl: Option<Ttl>,
}

impl Descriptor {
    /// A descriptor for state `name`, version 1, without TTL.
    pub fn new(name: impl Into<String>) -> Self {
        Descriptor { name: name.into(), version: 1, ttl: None }
    }

    /// Sets the value-format version. Bump it when the stored type changes,
    /// and implement [`crate::Operator::migrate_value`] for the old versions.
    pub fn version(mut self, version: u32) -> Self {
        self.version = version;
        self
    }

    /// Gives entries a time-to-live.
    pub fn ttl(mut self, ttl: Ttl) -> Self {
        self.ttl = Some(ttl);
        self
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn to_wit(&self) -> StateDescriptor {
        StateDescriptor {
            name: self.name.clone(),
            version: self.version,
            encoding: ENCODING.to_string(),
            ttl: self.ttl.as_ref().map(|t| TtlConfig {
                ttl_ms: u64::try_from(t.duration.as_millis()).unwrap_or(u64::MAX),
                update: t.update,
                visibility: t.visibility,
            }),
        }
    }
}

impl From<&str> for Descriptor {
    fn from(name: &str) -> Self {
        Descriptor::new(name)
    }
}

impl From<String> for Descriptor {
    fn from(name: String) -> Self {
        Descriptor::new(name)
    }
}

/// Time-to-live of keyed state entries, in processing time.
#[derive(Debug, Clone, Copy)]
pub struct Ttl {
    /// How long an entry lives after its last renewal.
    pub duration: Duration,
    /// What renews an entry.
    pub update: TtlUpdate,
    /// Whether an expired entry may be returned before clean-up.
    pub visibility: TtlVisibility,
}

impl Ttl {
    /// Entries live `duration` after their last write and are never returned
    /// once expired.
    pub fn new(duration: Duration) -> Self {
        Ttl { duration, update: TtlUpdate::OnCreateAndWrite, visibility: TtlVisibility::NeverReturnExpired }
    }

    /// Reads renew entries too.
    pub fn renew_on_read(mut self) -> Self {
        self.update = TtlUpdate::OnReadAndWrite;
        self
    }
}

thread_local! {
    /// Reused encode buffer: values cross into the host as borrowed slices, so
    /// one buffer serves every call and no allocation is made per write.
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Encodes `value` into the scratch buffer and passes the bytes to `f`.
pub(crate) fn with_encoded<T: Serialize + ?Sized, R>(state: &str, value: &T, f: impl FnOnce(&[u8]) -> R) -> Result<R> {
    SCRATCH.with_borrow_mut(|buf| {
        buf.clear();
        let bytes = postcard::to_extend(value, std::mem::take(buf)).map_err(|e| Error::codec(state, "encode", e))?;
        let out = f(&bytes);
        *buf = bytes;
        Ok(out)
    })
}

/// Encodes `value` into a fresh vector (for calls that take many values).
pub(crate) fn encode<T: Serialize + ?Sized>(state: &str, value: &T) -> Result<Vec<u8>> {
    postcard::to_allocvec(value).map_err(|e| Error::codec(state, "encode", e))
}

/// Decodes a stored value.
pub(crate) fn decode<T: DeserializeOwned>(state: &str, bytes: &[u8]) -> Result<T> {
    postcard::from_bytes(bytes).map_err(|e| Error::codec(state, "decode", e))
}

/// Converts one stored value from an old type to the current one, in the
/// SDK's encoding: the body of an [`crate::Operator::migrate_value`].
///
/// ```ignore
/// fn migrate_value(state: &str, from_version: u32, value: Vec<u8>) -> Result<Vec<u8>> {
///     match (state, from_version) {
///         ("count", 1) => convert_value(state, &value, |n: u64| Tally { count: n, restored: true }),
///         _ => Err(Error::msg(format!("state '{state}': unknown version {from_version}"))),
///     }
/// }
/// ```
pub fn convert_value<Old: DeserializeOwned, New: Serialize>(
    state: &str,
    value: &[u8],
    f: impl FnOnce(Old) -> New,
) -> Result<Vec<u8>> {
    encode(state, &f(decode(state, value)?))
}

#[cfg(test)]
mod tests {
    //! The encoding is a contract: the Python and JavaScript SDKs write the
    //! same bytes, and stored state outlives a module. These pin postcard's
    //! bytes for the shared types.

    use super::*;

    fn bytes<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
        encode("s", value).unwrap()
    }

    #[test]
    fn the_shared_types_encode_as_the_other_sdks_expect() {
        // u64: unsigned LEB128.
        assert_eq!(bytes(&0u64), [0x00]);
        assert_eq!(bytes(&127u64), [0x7f]);
        assert_eq!(bytes(&300u64), [0xac, 0x02]);
        assert_eq!(bytes(&u64::MAX), [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
        // String and bytes: varint length, then the bytes.
        assert_eq!(bytes("hé"), [3, b'h', 0xc3, 0xa9]);
        assert_eq!(bytes(&vec![9u8; 200]), [[0xc8, 0x01].as_slice(), &[9u8; 200]].concat());
        assert_eq!(bytes(&(true, false)), [1, 0]);
        // A tuple: its items one after another.
        assert_eq!(bytes(&(1u64, String::from("a"), 300u64)), [1, 1, b'a', 0xac, 0x02]);
    }

    #[test]
    fn python_kinds_have_the_rust_types_bytes() {
        // The Python SDK's mapping (sdk/python/weir/codec.py); the same
        // vectors are pinned in sdk/tests/python/test_codec.py.
        #[derive(Serialize)]
        struct Rule {
            small: u64,
            large: u64,
            window_ms: i64,
        }
        #[derive(Serialize)]
        struct Point {
            x: i64,
            label: Option<String>,
        }
        #[derive(Serialize)]
        enum Color {
            _Red,
            _Green,
            Blue,
        }
        // int: i64, zigzag.
        assert_eq!(bytes(&-1i64), [0x01]);
        assert_eq!(bytes(&63i64), [0x7e]);
        assert_eq!(bytes(&-64i64), [0x7f]);
        assert_eq!(bytes(&64i64), [0x80, 0x01]);
        assert_eq!(bytes(&60000i64), [0xc0, 0xa9, 0x07]);
        assert_eq!(bytes(&i64::MIN), [[0xff; 9].as_slice(), &[0x01]].concat());
        assert_eq!(bytes(&i64::MAX), [[0xfe].as_slice(), &[0xff; 8], &[0x01]].concat());
        // Fixed widths: u8 and i8 are one byte.
        assert_eq!(bytes(&200u8), [0xc8]);
        assert_eq!(bytes(&-1i8), [0xff]);
        assert_eq!(bytes(&300u16), [0xac, 0x02]);
        assert_eq!(bytes(&-3i32), [0x05]);
        assert_eq!(bytes(&(1u128 << 64)), [[0x80; 9].as_slice(), &[0x02]].concat());
        assert_eq!(bytes(&1.5f64), [0, 0, 0, 0, 0, 0, 0xf8, 0x3f]);
        assert_eq!(bytes(&1.5f32), [0, 0, 0xc0, 0x3f]);
        assert_eq!(bytes(&()), [0u8; 0]);
        assert_eq!(bytes(&None::<u64>), [0]);
        assert_eq!(bytes(&Some(5u64)), [1, 5]);
        assert_eq!(bytes(&vec![1i64, -2]), [2, 2, 3]);
        assert_eq!(bytes(&vec![5i64, 6]), [2, 10, 12]);
        let map: std::collections::BTreeMap<String, u64> = [("a".into(), 1), ("b".into(), 300)].into();
        assert_eq!(bytes(&map), [2, 1, b'a', 1, 1, b'b', 0xac, 0x02]);
        let rule = Rule { small: 10, large: 500, window_ms: 60000 };
        assert_eq!(bytes(&rule), [0x0a, 0xf4, 0x03, 0xc0, 0xa9, 0x07]);
        assert_eq!(bytes(&Point { x: -2, label: None }), [3, 0]);
        assert_eq!(bytes(&Color::Blue), [2]);
        // The fraud-detection rules' versions.
        let versions: Vec<(i64, Option<Rule>)> = vec![(0, Some(rule)), (200_000, None)];
        assert_eq!(bytes(&versions), [2, 0, 1, 0x0a, 0xf4, 0x03, 0xc0, 0xa9, 0x07, 0x80, 0xb5, 0x18, 0]);
    }

    #[test]
    fn the_javascript_sdks_value_mapping_is_postcards() {
        // The vectors of sdk/tests/js/weir.test.mjs for the types beyond the
        // shared few: signed integers (zigzag), floats, Option, Vec, maps and
        // structs.
        assert_eq!(bytes(&-1i64), [0x01]);
        assert_eq!(bytes(&1i64), [0x02]);
        assert_eq!(bytes(&-300i64), [0xd7, 0x04]);
        assert_eq!(bytes(&i64::MIN), [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
        assert_eq!(bytes(&i32::MIN), [0xff, 0xff, 0xff, 0xff, 0x0f]);
        assert_eq!(bytes(&200u8), [200]);
        assert_eq!(bytes(&-2i8), [0xfe]);
        assert_eq!(bytes(&1.5f64), [0, 0, 0, 0, 0, 0, 0xf8, 0x3f]);
        assert_eq!(bytes(&-2f32), [0, 0, 0, 0xc0]);
        assert_eq!(bytes(&None::<u64>), [0]);
        assert_eq!(bytes(&Some(5u64)), [1, 5]);
        assert_eq!(bytes(&vec![1i64, -1]), [2, 2, 1]);
        let map: std::collections::BTreeMap<String, u64> = [("a".into(), 1), ("b".into(), 2)].into();
        assert_eq!(bytes(&map), [2, 1, b'a', 1, 1, b'b', 2]);
        #[derive(Serialize)]
        struct Counted {
            count: u64,
            name: String,
            ratio: Option<f64>,
        }
        assert_eq!(bytes(&Counted { count: 7, name: "a".into(), ratio: None }), [7, 1, b'a', 0]);
    }

    #[test]
    fn values_round_trip_and_the_scratch_buffer_never_leaks_an_earlier_value() {
        let long = "x".repeat(1000);
        let first = with_encoded("s", &long, <[u8]>::to_vec).unwrap();
        // A shorter value after a longer one: only its own bytes.
        let second = with_encoded("s", &7u64, <[u8]>::to_vec).unwrap();
        assert_eq!(second, [7]);
        assert_eq!(decode::<String>("s", &first).unwrap(), long);
        let pair: (u64, Vec<u8>) = decode("s", &bytes(&(u64::MAX, vec![1u8, 2]))).unwrap();
        assert_eq!(pair, (u64::MAX, vec![1, 2]));
    }

    #[test]
    fn a_bad_value_is_an_error_naming_the_state() {
        // A varint cut short, and a string that is not UTF-8.
        let err = decode::<u64>("count", &[0x80]).unwrap_err();
        assert!(err.message().starts_with("state 'count': cannot decode value"), "{err}");
        let err = decode::<String>("names", &[1, 0xff]).unwrap_err();
        assert!(err.message().starts_with("state 'names': cannot decode value"), "{err}");
    }

    #[test]
    fn convert_value_migrates_one_stored_value() {
        let old = bytes(&41u64);
        let new = convert_value("count", &old, |n: u64| (n + 1, true)).unwrap();
        assert_eq!(decode::<(u64, bool)>("count", &new).unwrap(), (42, true));
        let err = convert_value("count", &[0x80], |n: u64| n).unwrap_err();
        assert!(err.message().contains("state 'count'"), "{err}");
    }

    #[test]
    fn descriptors_record_name_version_encoding_and_ttl() {
        let d = Descriptor::from("count").to_wit();
        assert_eq!((d.name.as_str(), d.version, d.encoding.as_str()), ("count", 1, "postcard"));
        assert!(d.ttl.is_none());
        let d =
            Descriptor::new("recent").version(3).ttl(Ttl::new(Duration::from_millis(2500)).renew_on_read()).to_wit();
        assert_eq!(d.version, 3);
        let ttl = d.ttl.unwrap();
        assert_eq!(ttl.ttl_ms, 2500);
        assert!(matches!(ttl.update, TtlUpdate::OnReadAndWrite));
        assert!(matches!(ttl.visibility, TtlVisibility::NeverReturnExpired));
        // A TTL beyond u64 milliseconds saturates instead of wrapping.
        let d = Descriptor::new("forever").ttl(Ttl::new(Duration::MAX)).to_wit();
        assert_eq!(d.ttl.unwrap().ttl_ms, u64::MAX);
    }
}
