//! State time-to-live, as a layer over any [`StateBackend`].
//!
//! A state registered with a TTL stores each value (each list element, each
//! map value) behind an 8-byte prefix: the processing time, in milliseconds,
//! at which it expires (little-endian `i64`). Reads check it: an expired
//! value is never returned (unless the state allows it until clean-up) and
//! is removed on the spot; `OnReadAndWrite` states push the expiry forward on
//! every read. Values nobody touches again are removed incrementally: every
//! access to a TTL state also checks the next few keys of a scan cursor, so
//! clean-up costs a little per access and never stops the world.
//!
//! The layer is backend-agnostic, like Flink's TTL wrappers: the inner
//! backend stores the prefixed bytes as opaque values.

use super::key_group::{key_group_of_hash, key_hash};
use super::{
    FrozenState, KeyRef, MapEntry, SnapshotEntry, StateBackend, StateDescriptor, StateError, StateId, TimeDomain,
    TtlConfig,
};
pub use crate::clock::Clock;

/// Keys checked by incremental clean-up per access to a TTL state.
const CLEANUP_KEYS_PER_ACCESS: u32 = 2;

const PREFIX: usize = 8;

fn wrap(expires_at: i64, value: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(PREFIX + value.len());
    v.extend_from_slice(&expires_at.to_le_bytes());
    v.extend_from_slice(value);
    v
}

/// Splits a stored value into (expiry, user bytes). A value shorter than the
/// prefix cannot have been written by this layer: it is treated as expired.
fn unwrap(stored: &[u8]) -> (i64, &[u8]) {
    match stored.split_first_chunk::<PREFIX>() {
        Some((head, rest)) => (i64::from_le_bytes(*head), rest),
        None => (i64::MIN, &[]),
    }
}

/// The expiry of a value stored by this layer (what a backend cleaning up
/// on its own compares with the clock); `i64::MIN` for bytes too short to
/// carry one.
pub fn expires_at(stored: &[u8]) -> i64 {
    unwrap(stored).0
}

/// A state backend with TTL for the states that ask for it.
pub struct TtlBackend<B> {
    inner: B,
    clock: Clock,
    max_parallelism: u32,
    /// Full descriptors (with TTL), by id; the inner backend gets them
    /// without TTL.
    descriptors: Vec<StateDescriptor>,
    /// Where incremental clean-up continues, per state.
    cursors: Vec<u64>,
    /// Per state: whether the inner backend drops expired values itself,
    /// so accesses need not scan for them.
    in_background: Vec<bool>,
}

impl<B: StateBackend> TtlBackend<B> {
    /// Wraps `inner`; `clock` gives processing time, `max_parallelism` the
    /// job's key groups (for keys found by clean-up scans).
    pub fn new(inner: B, clock: Clock, max_parallelism: u32) -> Self {
        TtlBackend {
            inner,
            clock,
            max_parallelism,
            descriptors: Vec::new(),
            cursors: Vec::new(),
            in_background: Vec::new(),
        }
    }

    /// The wrapped backend.
    #[cfg(test)]
    pub fn inner(&mut self) -> &mut B {
        &mut self.inner
    }

    fn ttl(&self, s: StateId) -> Option<TtlConfig> {
        self.descriptors.get(s as usize).and_then(|d| d.ttl)
    }

    fn expiry(&self, t: &TtlConfig) -> i64 {
        (self.clock)().saturating_add(t.ttl_ms.min(i64::MAX as u64) as i64)
    }

    /// Checks the next few keys of `s` and removes what expired there.
    fn cleanup_step(&mut self, s: StateId, t: &TtlConfig) -> Result<(), StateError> {
        if self.in_background[s as usize] {
            return Ok(());
        }
        let cursor = self.cursors[s as usize];
        let (keys, next) = self.inner.scan_keys(s, cursor, CLEANUP_KEYS_PER_ACCESS);
        self.cursors[s as usize] = next.unwrap_or(0);
        let now = (self.clock)();
        let shape = self.descriptors[s as usize].kind.shape();
        for (kg, k) in keys {
            let hash = key_hash(&k);
            debug_assert_eq!(key_group_of_hash(hash, self.max_parallelism), kg);
            let key = KeyRef { key: &k, hash, key_group: kg };
            match shape {
                super::Shape::Value => {
                    if let Some(v) = self.inner.value_get(s, key)?
                        && unwrap(&v).0 <= now
                    {
                        self.inner.value_clear(s, key)?;
                    }
                }
                super::Shape::List => {
                    self.live_list(s, key, now, t, false)?;
                }
                super::Shape::Map => {
                    let mut after: Option<Vec<u8>> = None;
                    loop {
                        let page = self.inner.map_entries(s, key, after.as_deref(), 256)?;
                        let done = page.len() < 256;
                        after = page.last().map(|(uk, _)| uk.clone());
                        for (uk, v) in page {
                            if unwrap(&v).0 <= now {
                                self.inner.map_remove(s, key, &uk)?;
                            }
                        }
                        if done {
                            break;
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The live elements of a list (user bytes), removing expired ones from
    /// storage unless they may still be returned; renews on read if asked.
    fn live_list(
        &mut self,
        s: StateId,
        k: KeyRef<'_>,
        now: i64,
        t: &TtlConfig,
        reading: bool,
    ) -> Result<Vec<Vec<u8>>, StateError> {
        let stored = self.inner.list_read(s, k, 0, u32::MAX)?;
        let mut live = Vec::with_capacity(stored.len());
        let mut kept = Vec::with_capacity(stored.len());
        let mut changed = false;
        for v in &stored {
            let (exp, data) = unwrap(v);
            let expired = exp <= now;
            if !expired || (reading && t.return_expired) {
                live.push(data.to_vec());
            }
            if expired && !(reading && t.return_expired) {
                changed = true;
            } else if reading && t.renew_on_read && !expired {
                kept.push(wrap(self.expiry(t), data));
                changed = true;
            } else {
                kept.push(v.clone());
            }
        }
        if changed {
            self.inner.list_update(s, k, kept)?;
        }
        Ok(live)
    }

    /// The current value of a TTL value-shaped state, expired ones removed
    /// (or returned, when allowed), renewed on read when asked.
    fn read_value(&mut self, s: StateId, k: KeyRef<'_>, t: &TtlConfig) -> Result<Option<Vec<u8>>, StateError> {
        let Some(v) = self.inner.value_get(s, k)? else { return Ok(None) };
        let (exp, data) = unwrap(&v);
        if exp <= (self.clock)() {
            if t.return_expired {
                return Ok(Some(data.to_vec()));
            }
            self.inner.value_clear(s, k)?;
            return Ok(None);
        }
        let data = data.to_vec();
        if t.renew_on_read {
            self.inner.value_set(s, k, &wrap(self.expiry(t), &data))?;
        }
        Ok(Some(data))
    }

    /// One map value, removed if expired (unless it may be returned).
    fn map_value(
        &mut self,
        s: StateId,
        k: KeyRef<'_>,
        uk: &[u8],
        t: &TtlConfig,
    ) -> Result<Option<Vec<u8>>, StateError> {
        let Some(v) = self.inner.map_get(s, k, uk)? else { return Ok(None) };
        let (exp, data) = unwrap(&v);
        if exp <= (self.clock)() {
            if t.return_expired {
                return Ok(Some(data.to_vec()));
            }
            self.inner.map_remove(s, k, uk)?;
            return Ok(None);
        }
        let data = data.to_vec();
        if t.renew_on_read {
            self.inner.map_put(s, k, uk, &wrap(self.expiry(t), &data))?;
        }
        Ok(Some(data))
    }
}

impl<B: StateBackend> StateBackend for TtlBackend<B> {
    fn register(&mut self, d: StateDescriptor) -> Result<StateId, StateError> {
        if let Some(i) = self.descriptors.iter().position(|e| e.name == d.name)
            && self.descriptors[i].kind == d.kind
            && self.descriptors[i].ttl != d.ttl
        {
            return Err(StateError::KindMismatch {
                name: d.name,
                existing: "a state with another TTL",
                requested: "the same state with this TTL",
            });
        }
        let id = self.inner.register(StateDescriptor { ttl: None, ..d.clone() })?;
        if let Some(existing) = self.descriptors.get_mut(id as usize) {
            existing.version = d.version;
        }
        if id as usize == self.descriptors.len() {
            let background = d.ttl.is_some() && self.inner.expire_in_background(id, &self.clock);
            self.descriptors.push(d);
            self.cursors.push(0);
            self.in_background.push(background);
        }
        Ok(id)
    }

    fn descriptors(&self) -> &[StateDescriptor] {
        &self.descriptors
    }

    fn value_get(&mut self, s: StateId, k: KeyRef<'_>) -> Result<Option<Vec<u8>>, StateError> {
        let Some(t) = self.ttl(s) else { return self.inner.value_get(s, k) };
        // The key asked for is served first; clean-up then looks elsewhere.
        let value = self.read_value(s, k, &t)?;
        self.cleanup_step(s, &t)?;
        Ok(value)
    }

    fn value_get_many(
        &mut self,
        s: StateId,
        keys: &[KeyRef<'_>],
        out: &mut Vec<u8>,
        spans: &mut Vec<(u32, u32, bool)>,
    ) -> Result<(), StateError> {
        if self.ttl(s).is_none() {
            return self.inner.value_get_many(s, keys, out, spans);
        }
        for &k in keys {
            let v = self.value_get(s, k)?;
            super::push_value(out, spans, v.as_deref());
        }
        Ok(())
    }

    fn value_set_many(&mut self, s: StateId, keys: &[KeyRef<'_>], values: &[Option<&[u8]>]) -> Result<(), StateError> {
        if self.ttl(s).is_none() {
            return self.inner.value_set_many(s, keys, values);
        }
        for (&k, v) in keys.iter().zip(values) {
            match v {
                Some(v) => self.value_set(s, k, v)?,
                None => self.value_clear(s, k)?,
            }
        }
        Ok(())
    }

    fn value_set(&mut self, s: StateId, k: KeyRef<'_>, value: &[u8]) -> Result<(), StateError> {
        let Some(t) = self.ttl(s) else { return self.inner.value_set(s, k, value) };
        self.cleanup_step(s, &t)?;
        let stored = wrap(self.expiry(&t), value);
        self.inner.value_set(s, k, &stored)
    }

    fn value_clear(&mut self, s: StateId, k: KeyRef<'_>) -> Result<(), StateError> {
        self.inner.value_clear(s, k)
    }
    fn list_add(&mut self, s: StateId, k: KeyRef<'_>, values: &[&[u8]]) -> Result<(), StateError> {
        let Some(t) = self.ttl(s) else { return self.inner.list_add(s, k, values) };
        self.cleanup_step(s, &t)?;
        let exp = self.expiry(&t);
        let wrapped: Vec<Vec<u8>> = values.iter().map(|v| wrap(exp, v)).collect();
        let refs: Vec<&[u8]> = wrapped.iter().map(Vec::as_slice).collect();
        self.inner.list_add(s, k, &refs)
    }

    fn list_update(&mut self, s: StateId, k: KeyRef<'_>, values: Vec<Vec<u8>>) -> Result<(), StateError> {
        let Some(t) = self.ttl(s) else { return self.inner.list_update(s, k, values) };
        let exp = self.expiry(&t);
        self.inner.list_update(s, k, values.iter().map(|v| wrap(exp, v)).collect())
    }

    fn list_read(&mut self, s: StateId, k: KeyRef<'_>, start: u32, max: u32) -> Result<Vec<Vec<u8>>, StateError> {
        let Some(t) = self.ttl(s) else { return self.inner.list_read(s, k, start, max) };
        let now = (self.clock)();
        let live = self.live_list(s, k, now, &t, true)?;
        self.cleanup_step(s, &t)?;
        Ok(live.into_iter().skip(start as usize).take(max as usize).collect())
    }

    fn list_len(&mut self, s: StateId, k: KeyRef<'_>) -> Result<u32, StateError> {
        let Some(t) = self.ttl(s) else { return self.inner.list_len(s, k) };
        let now = (self.clock)();
        Ok(self.live_list(s, k, now, &t, true)?.len() as u32)
    }

    fn list_clear(&mut self, s: StateId, k: KeyRef<'_>) -> Result<(), StateError> {
        self.inner.list_clear(s, k)
    }

    fn map_get(&mut self, s: StateId, k: KeyRef<'_>, uk: &[u8]) -> Result<Option<Vec<u8>>, StateError> {
        let Some(t) = self.ttl(s) else { return self.inner.map_get(s, k, uk) };
        let value = self.map_value(s, k, uk, &t)?;
        self.cleanup_step(s, &t)?;
        Ok(value)
    }

    fn map_put(&mut self, s: StateId, k: KeyRef<'_>, uk: &[u8], value: &[u8]) -> Result<(), StateError> {
        let Some(t) = self.ttl(s) else { return self.inner.map_put(s, k, uk, value) };
        self.cleanup_step(s, &t)?;
        let stored = wrap(self.expiry(&t), value);
        self.inner.map_put(s, k, uk, &stored)
    }

    fn map_remove(&mut self, s: StateId, k: KeyRef<'_>, uk: &[u8]) -> Result<(), StateError> {
        self.inner.map_remove(s, k, uk)
    }

    fn map_contains(&mut self, s: StateId, k: KeyRef<'_>, uk: &[u8]) -> Result<bool, StateError> {
        Ok(self.map_get(s, k, uk)?.is_some())
    }

    fn map_is_empty(&mut self, s: StateId, k: KeyRef<'_>) -> Result<bool, StateError> {
        if self.ttl(s).is_none() {
            return self.inner.map_is_empty(s, k);
        }
        Ok(self.map_entries(s, k, None, 1)?.is_empty())
    }

    fn map_entries(
        &mut self,
        s: StateId,
        k: KeyRef<'_>,
        after: Option<&[u8]>,
        max: u32,
    ) -> Result<Vec<MapEntry>, StateError> {
        let Some(t) = self.ttl(s) else { return self.inner.map_entries(s, k, after, max) };
        let now = (self.clock)();
        let mut out = Vec::new();
        let mut cursor = after.map(<[u8]>::to_vec);
        // Expired entries are skipped, so a page may need several inner pages.
        while out.len() < max as usize {
            let page = self.inner.map_entries(s, k, cursor.as_deref(), max)?;
            let done = page.len() < max as usize;
            cursor = page.last().map(|(uk, _)| uk.clone());
            for (uk, v) in page {
                let (exp, data) = unwrap(&v);
                if exp <= now && !t.return_expired {
                    self.inner.map_remove(s, k, &uk)?;
                    continue;
                }
                if out.len() < max as usize {
                    if t.renew_on_read && exp > now {
                        self.inner.map_put(s, k, &uk, &wrap(self.expiry(&t), data))?;
                    }
                    out.push((uk, data.to_vec()));
                }
            }
            if done {
                break;
            }
        }
        Ok(out)
    }

    fn map_clear(&mut self, s: StateId, k: KeyRef<'_>) -> Result<(), StateError> {
        self.inner.map_clear(s, k)
    }

    fn operator_list_add(&mut self, s: StateId, values: &[&[u8]]) -> Result<(), StateError> {
        self.inner.operator_list_add(s, values)
    }

    fn operator_list_update(&mut self, s: StateId, values: Vec<Vec<u8>>) -> Result<(), StateError> {
        self.inner.operator_list_update(s, values)
    }

    fn operator_list_read(&mut self, s: StateId, start: u32, max: u32) -> Result<Vec<Vec<u8>>, StateError> {
        self.inner.operator_list_read(s, start, max)
    }

    fn operator_list_len(&mut self, s: StateId) -> Result<u32, StateError> {
        self.inner.operator_list_len(s)
    }

    fn broadcast_get(&mut self, s: StateId, uk: &[u8]) -> Result<Option<Vec<u8>>, StateError> {
        self.inner.broadcast_get(s, uk)
    }

    fn broadcast_put(&mut self, s: StateId, uk: &[u8], value: &[u8]) -> Result<(), StateError> {
        self.inner.broadcast_put(s, uk, value)
    }

    fn broadcast_remove(&mut self, s: StateId, uk: &[u8]) -> Result<(), StateError> {
        self.inner.broadcast_remove(s, uk)
    }

    fn broadcast_entries(&mut self, s: StateId, after: Option<&[u8]>, max: u32) -> Result<Vec<MapEntry>, StateError> {
        self.inner.broadcast_entries(s, after, max)
    }

    fn broadcast_len(&mut self, s: StateId) -> Result<usize, StateError> {
        self.inner.broadcast_len(s)
    }

    fn broadcast_clear(&mut self, s: StateId) -> Result<(), StateError> {
        self.inner.broadcast_clear(s)
    }

    fn timer_register(&mut self, d: TimeDomain, k: KeyRef<'_>, time: i64) -> Result<(), StateError> {
        self.inner.timer_register(d, k, time)
    }

    fn timer_delete(&mut self, d: TimeDomain, k: KeyRef<'_>, time: i64) -> Result<(), StateError> {
        self.inner.timer_delete(d, k, time)
    }

    fn timer_pop_due(&mut self, d: TimeDomain, up_to: i64) -> Option<(i64, Vec<u8>)> {
        self.inner.timer_pop_due(d, up_to)
    }

    fn timer_next(&self, d: TimeDomain) -> Option<i64> {
        self.inner.timer_next(d)
    }

    fn timer_count(&self, d: TimeDomain) -> usize {
        self.inner.timer_count(d)
    }

    fn prefetch(&mut self, keys: &[KeyRef<'_>]) {
        self.inner.prefetch(keys)
    }

    fn reserve_keys(&mut self, key_group: u16, s: StateId, keys: usize) {
        self.inner.reserve_keys(key_group, s, keys)
    }

    fn scan_keys(&mut self, s: StateId, cursor: u64, max: u32) -> (Vec<(u16, Vec<u8>)>, Option<u64>) {
        self.inner.scan_keys(s, cursor, max)
    }

    fn freeze(&mut self) -> Box<dyn FrozenState> {
        // Stored bytes keep their expiry prefix: a restore puts them back as
        // they were, and they expire when they would have. The descriptors
        // are this layer's, with their TTL.
        Box::new(WithDescriptors { inner: self.inner.freeze(), descriptors: self.descriptors.clone() })
    }

    fn restore_entry(&mut self, kg: u16, entry: SnapshotEntry<'_>) -> Result<(), StateError> {
        self.inner.restore_entry(kg, entry)
    }

    fn adopt_key_groups(&mut self, hand_offs: &[&super::HandOff]) -> Option<Result<u64, StateError>> {
        // Handed values keep their expiry prefix, as restored entries do;
        // they only must belong to states with the same TTL here.
        for d in hand_offs.iter().flat_map(|h| h.descriptors()) {
            if let Some(own) = self.descriptors.iter().find(|own| own.name == d.name)
                && own.ttl != d.ttl
            {
                return Some(Err(StateError::KindMismatch {
                    name: d.name.clone(),
                    existing: "a state with another TTL",
                    requested: "the same state with this TTL",
                }));
            }
        }
        self.inner.adopt_key_groups(hand_offs)
    }

    fn memory_bytes(&self) -> Option<u64> {
        self.inner.memory_bytes()
    }

    fn key_count(&self, s: StateId) -> usize {
        self.inner.key_count(s)
    }

    fn give_up_into(&mut self, hand_off: &mut super::HandOff) {
        self.inner.give_up_into(hand_off);
    }
}

/// A frozen inner backend under this layer's descriptors.
struct WithDescriptors {
    inner: Box<dyn FrozenState>,
    descriptors: Vec<StateDescriptor>,
}

impl FrozenState for WithDescriptors {
    fn descriptors(&self) -> &[StateDescriptor] {
        &self.descriptors
    }

    fn range(&self) -> super::key_group::KeyGroupRange {
        self.inner.range()
    }

    fn key_group(&mut self, kg: u16, visit: &mut dyn FnMut(SnapshotEntry<'_>)) -> Result<(), StateError> {
        self.inner.key_group(kg, visit)
    }

    fn operator_state(&mut self, visit: &mut dyn FnMut(SnapshotEntry<'_>)) -> Result<(), StateError> {
        self.inner.operator_state(visit)
    }

    fn native_checkpoint(&mut self) -> Option<Result<crate::state::NativeCheckpoint, StateError>> {
        self.inner.native_checkpoint()
    }

    fn hand_off(&mut self) -> Option<super::HandOff> {
        // Under this layer's descriptors, which carry the TTL.
        self.inner.hand_off().map(|h| h.with_descriptors(self.descriptors.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::StateKind;
    use crate::state::hashmap::HashMapBackend;
    use crate::state::key_group::KeyGroupRange;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicI64, Ordering};

    const MAXP: u32 = 16;

    fn key(k: &[u8]) -> KeyRef<'_> {
        let hash = key_hash(k);
        KeyRef { key: k, hash, key_group: key_group_of_hash(hash, MAXP) }
    }

    fn setup(ttl_ms: u64, renew_on_read: bool, return_expired: bool) -> (TtlBackend<HashMapBackend>, Arc<AtomicI64>) {
        let now = Arc::new(AtomicI64::new(1_000));
        let clock_now = now.clone();
        let clock: Clock = Arc::new(move || clock_now.load(Ordering::SeqCst));
        let mut b = TtlBackend::new(HashMapBackend::new(KeyGroupRange { start: 0, end: MAXP as u16 }), clock, MAXP);
        for kind in [StateKind::Value, StateKind::List, StateKind::Map] {
            let mut d = kind.descriptor(kind.name());
            d.ttl = Some(TtlConfig { ttl_ms, renew_on_read, return_expired });
            b.register(d).unwrap();
        }
        (b, now)
    }

    const VALUE: StateId = 0;
    const LIST: StateId = 1;
    const MAP: StateId = 2;

    #[test]
    fn values_expire_after_their_ttl() {
        let (mut b, now) = setup(100, false, false);
        b.value_set(VALUE, key(b"a"), b"1").unwrap();
        now.store(1_099, Ordering::SeqCst);
        assert_eq!(b.value_get(VALUE, key(b"a")).unwrap().as_deref(), Some(&b"1"[..]));
        now.store(1_100, Ordering::SeqCst);
        assert_eq!(b.value_get(VALUE, key(b"a")).unwrap(), None, "expired at write time + ttl");
        assert_eq!(b.key_count(VALUE), 0, "removed when found expired");
        // A write renews.
        b.value_set(VALUE, key(b"a"), b"2").unwrap();
        now.store(1_150, Ordering::SeqCst);
        assert_eq!(b.value_get(VALUE, key(b"a")).unwrap().as_deref(), Some(&b"2"[..]));
    }

    #[test]
    fn reads_renew_when_asked() {
        let (mut b, now) = setup(100, true, false);
        b.value_set(VALUE, key(b"a"), b"1").unwrap();
        for t in [1_050, 1_120, 1_190] {
            now.store(t, Ordering::SeqCst);
            assert!(b.value_get(VALUE, key(b"a")).unwrap().is_some(), "read at {t} renewed the entry");
        }
        now.store(1_290, Ordering::SeqCst);
        assert_eq!(b.value_get(VALUE, key(b"a")).unwrap(), None);
    }

    #[test]
    fn expired_values_may_be_returned_until_cleaned_when_allowed() {
        let (mut b, now) = setup(100, false, true);
        b.value_set(VALUE, key(b"a"), b"1").unwrap();
        now.store(5_000, Ordering::SeqCst);
        assert_eq!(b.value_get(VALUE, key(b"a")).unwrap().as_deref(), Some(&b"1"[..]));
    }

    #[test]
    fn list_elements_expire_one_by_one() {
        let (mut b, now) = setup(100, false, false);
        b.list_add(LIST, key(b"a"), &[b"old"]).unwrap();
        now.store(1_060, Ordering::SeqCst);
        b.list_add(LIST, key(b"a"), &[b"new"]).unwrap();
        now.store(1_120, Ordering::SeqCst);
        assert_eq!(b.list_read(LIST, key(b"a"), 0, 10).unwrap(), vec![b"new".to_vec()]);
        assert_eq!(b.list_len(LIST, key(b"a")).unwrap(), 1);
        now.store(1_200, Ordering::SeqCst);
        assert_eq!(b.list_len(LIST, key(b"a")).unwrap(), 0);
    }

    #[test]
    fn map_entries_expire_and_pages_skip_them() {
        let (mut b, now) = setup(100, false, false);
        for i in 0..10u8 {
            b.map_put(MAP, key(b"a"), &[i], b"v").unwrap();
        }
        now.store(1_050, Ordering::SeqCst);
        b.map_put(MAP, key(b"a"), &[4], b"fresh").unwrap();
        b.map_put(MAP, key(b"a"), &[8], b"fresh").unwrap();
        now.store(1_120, Ordering::SeqCst);
        assert_eq!(b.map_get(MAP, key(b"a"), &[1]).unwrap(), None);
        assert!(b.map_contains(MAP, key(b"a"), &[4]).unwrap());
        let page = b.map_entries(MAP, key(b"a"), None, 1).unwrap();
        assert_eq!(page, vec![(vec![4], b"fresh".to_vec())], "a page of one skips the expired entries before it");
        let rest = b.map_entries(MAP, key(b"a"), Some(&[4]), 5).unwrap();
        assert_eq!(rest, vec![(vec![8], b"fresh".to_vec())]);
        assert!(!b.map_is_empty(MAP, key(b"a")).unwrap());
        now.store(1_200, Ordering::SeqCst);
        assert!(b.map_is_empty(MAP, key(b"a")).unwrap());
    }

    #[test]
    fn untouched_expired_keys_are_cleaned_up_incrementally() {
        let (mut b, now) = setup(100, false, false);
        for i in 0..200 {
            b.value_set(VALUE, key(format!("old{i}").as_bytes()), b"1").unwrap();
        }
        assert_eq!(b.key_count(VALUE), 200);
        now.store(2_000, Ordering::SeqCst);
        // Work on one other key only; every access checks a few more keys.
        for _ in 0..150 {
            b.value_set(VALUE, key(b"busy"), b"1").unwrap();
        }
        assert!(b.key_count(VALUE) < 50, "clean-up kept up: {} keys left", b.key_count(VALUE));
        for _ in 0..150 {
            b.value_get(VALUE, key(b"busy")).unwrap();
        }
        assert_eq!(b.key_count(VALUE), 1, "only the live key remains");
    }

    #[test]
    fn a_state_without_ttl_is_untouched() {
        let (mut b, now) = setup(100, false, false);
        let plain = b.register(StateKind::Value.descriptor("plain")).unwrap();
        b.value_set(plain, key(b"a"), b"1").unwrap();
        now.store(i64::MAX - 1, Ordering::SeqCst);
        assert_eq!(b.value_get(plain, key(b"a")).unwrap().as_deref(), Some(&b"1"[..]));
    }

    #[test]
    fn the_conformance_suite_passes_through_the_layer() {
        let clock: Clock = Arc::new(|| 0);
        crate::state::conformance::run_all(&|range| {
            Box::new(TtlBackend::new(HashMapBackend::new(range), clock.clone(), 16))
        });
    }
}
