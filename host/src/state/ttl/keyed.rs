//! The keyed shapes under TTL: reads that drop (or return, when allowed)
//! expired values and renew live ones when the state asks, writes that
//! stamp the expiry, and the incremental clean-up every access to a TTL
//! state advances. States without TTL go to the inner backend untouched.

use super::{TtlBackend, unwrap, wrap};
use crate::state::key_group::{key_group_of_hash, key_hash};
use crate::state::{
    KeyRef, ListState, MapEntry, MapState, Shape, StateBackend, StateError, StateId, TtlConfig, ValueState, push_value,
};

/// Keys checked by incremental clean-up per access to a TTL state.
const CLEANUP_KEYS_PER_ACCESS: u32 = 2;

impl<B: StateBackend> TtlBackend<B> {
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
                Shape::Value => {
                    if let Some(v) = self.inner.value_get(s, key)?
                        && unwrap(&v).0 <= now
                    {
                        self.inner.value_clear(s, key)?;
                    }
                }
                Shape::List => {
                    self.live_list(s, key, now, t, false)?;
                }
                Shape::Map => {
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

impl<B: StateBackend> ValueState for TtlBackend<B> {
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
            push_value(out, spans, v.as_deref());
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
}

impl<B: StateBackend> ListState for TtlBackend<B> {
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
}

impl<B: StateBackend> MapState for TtlBackend<B> {
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
}
