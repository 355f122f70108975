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
