//! Typed keyed state handles: value, list, map, reducing and aggregating.
//!
//! Every handle acts on the current key (see the `keyed-state` WIT interface).
//! Reads of lists and maps are paged, so a large collection never crosses the
//! WASM boundary in one call.

use crate::batch::{CachedValue, sync_host};
use crate::bindings::weir::operator::keyed_state as wit;
use crate::codec::{decode, encode, with_encoded};
use crate::error::{Error, Result};
use serde::{Serialize, de::DeserializeOwned};
use std::marker::PhantomData;
use std::rc::Rc;

/// How many items one paged read asks for.
pub(crate) const PAGE: u32 = 256;

/// One value of type `T` per key.
///
/// Inside a batch, reads and writes go through the batch fast path: one host
/// call per batch and state, not per element.
pub struct ValueState<T> {
    pub(crate) inner: Rc<CachedValue<wit::ValueState>>,
    pub(crate) _type: PhantomData<fn() -> T>,
}

impl<T: Serialize + DeserializeOwned> ValueState<T> {
    /// The current key's value.
    pub fn get(&self) -> Result<Option<T>> {
        let name = &self.inner.name;
        self.inner.read(|b| b.map(|b| decode(name, b)).transpose())
    }

    /// Sets the current key's value.
    pub fn set(&self, value: &T) -> Result<()> {
        let name = &self.inner.name;
        self.inner.write(|buf| postcard::to_extend(value, buf).map_err(|e| Error::codec(name, "encode", e)))
    }

    /// Removes the current key's value.
    pub fn clear(&self) -> Result<()> {
        self.inner.clear()
    }
}

/// An ordered list of `T` per key.
pub struct ListState<T> {
    pub(crate) name: String,
    pub(crate) handle: wit::ListState,
    pub(crate) _type: PhantomData<fn() -> T>,
}

impl<T: Serialize + DeserializeOwned> ListState<T> {
    /// Appends `value` to the current key's list.
    pub fn add(&self, value: &T) -> Result<()> {
        sync_host()?;
        with_encoded(&self.name, value, |b| self.handle.add(b))?.map_err(|c| Error::state(&self.name, c))
    }

    /// Appends every value of `values`, in order.
    pub fn add_all(&self, values: &[T]) -> Result<()> {
        sync_host()?;
        let encoded = values.iter().map(|v| encode(&self.name, v)).collect::<Result<Vec<_>>>()?;
        self.handle.add_all(&encoded).map_err(|c| Error::state(&self.name, c))
    }

    /// Replaces the current key's list.
    pub fn update(&self, values: &[T]) -> Result<()> {
        sync_host()?;
        let encoded = values.iter().map(|v| encode(&self.name, v)).collect::<Result<Vec<_>>>()?;
        self.handle.update(&encoded).map_err(|c| Error::state(&self.name, c))
    }

    /// Reads the whole list, page by page.
    pub fn get(&self) -> Result<Vec<T>> {
        self.iter().collect()
    }

    /// Iterates the list, fetching it from the host a page at a time.
    pub fn iter(&self) -> impl Iterator<Item = Result<T>> + '_ {
        let mut start = 0u32;
        let mut page: std::vec::IntoIter<Vec<u8>> = Vec::new().into_iter();
        let mut done = false;
        std::iter::from_fn(move || {
            loop {
                if let Some(bytes) = page.next() {
                    return Some(decode(&self.name, &bytes));
                }
                if done {
                    return None;
                }
                if let Err(e) = sync_host() {
                    done = true;
                    return Some(Err(e));
                }
                match self.handle.read(start, PAGE) {
                    Ok(items) => {
                        done = (items.len() as u32) < PAGE;
                        start += items.len() as u32;
                        page = items.into_iter();
                    }
                    Err(c) => {
                        done = true;
                        return Some(Err(Error::state(&self.name, c)));
                    }
                }
            }
        })
    }

    /// The number of values in the current key's list.
    pub fn len(&self) -> Result<u32> {
        sync_host()?;
        self.handle.len().map_err(|c| Error::state(&self.name, c))
    }

    /// Whether the current key's list is empty.
    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    /// Removes the current key's list.
    pub fn clear(&self) -> Result<()> {
        sync_host()?;
        self.handle.clear().map_err(|c| Error::state(&self.name, c))
    }
}

/// A map from `K` to `V` per key. Entries iterate in the order of their
/// encoded keys' bytes (postcard: fixed-width integers big-endian would sort
/// numerically; varints and strings sort by their bytes).
pub struct MapState<K, V> {
    pub(crate) name: String,
    pub(crate) handle: wit::MapState,
    pub(crate) _type: PhantomData<fn() -> (K, V)>,
}

impl<K: Serialize + DeserializeOwned, V: Serialize + DeserializeOwned> MapState<K, V> {
    /// The value under `key`.
    pub fn get(&self, key: &K) -> Result<Option<V>> {
        sync_host()?;
        let got = with_encoded(&self.name, key, |k| self.handle.get(k))?.map_err(|c| Error::state(&self.name, c))?;
        got.map(|b| decode(&self.name, &b)).transpose()
    }

    /// Sets the value under `key`.
    pub fn put(&self, key: &K, value: &V) -> Result<()> {
        sync_host()?;
        let k = encode(&self.name, key)?;
        with_encoded(&self.name, value, |v| self.handle.put(&k, v))?.map_err(|c| Error::state(&self.name, c))
    }

    /// Removes `key`.
    pub fn remove(&self, key: &K) -> Result<()> {
        sync_host()?;
        with_encoded(&self.name, key, |k| self.handle.remove(k))?.map_err(|c| Error::state(&self.name, c))
    }

    /// Whether the map holds `key`.
    pub fn contains(&self, key: &K) -> Result<bool> {
        sync_host()?;
        with_encoded(&self.name, key, |k| self.handle.contains(k))?.map_err(|c| Error::state(&self.name, c))
    }

    /// Whether the current key's map is empty.
    pub fn is_empty(&self) -> Result<bool> {
        sync_host()?;
        self.handle.is_empty().map_err(|c| Error::state(&self.name, c))
    }

    /// Iterates the entries, fetched a page at a time.
    pub fn entries(&self) -> impl Iterator<Item = Result<(K, V)>> + '_ {
        paged(&self.name, move |after| self.handle.entries(after, PAGE), |(k, _)| k.clone(), true)
            .map(|r| r.and_then(|(k, v)| Ok((decode(&self.name, &k)?, decode(&self.name, &v)?))))
    }

    /// Iterates the keys, fetched a page at a time.
    pub fn keys(&self) -> impl Iterator<Item = Result<K>> + '_ {
        paged(&self.name, move |after| self.handle.keys(after, PAGE), |k: &Vec<u8>| k.clone(), true)
            .map(|r| r.and_then(|k| decode(&self.name, &k)))
    }

    /// Iterates the values, fetched a page at a time.
    pub fn values(&self) -> impl Iterator<Item = Result<V>> + '_ {
        self.entries().map(|r| r.map(|(_, v)| v))
    }

    /// Removes every entry of the current key's map.
    pub fn clear(&self) -> Result<()> {
        sync_host()?;
        self.handle.clear().map_err(|c| Error::state(&self.name, c))
    }
}

/// Pages through a cursor-based listing: `fetch(after)` returns up to `PAGE`
/// items; `cursor` extracts the user key that the next page starts after.
pub(crate) fn paged<'a, I: 'a>(
    name: &'a str,
    mut fetch: impl FnMut(Option<&[u8]>) -> std::result::Result<Vec<I>, crate::bindings::weir::operator::types::ErrorCode>
    + 'a,
    cursor: impl Fn(&I) -> Vec<u8> + 'a,
    keyed: bool,
) -> impl Iterator<Item = Result<I>> + 'a {
    let mut after: Option<Vec<u8>> = None;
    let mut page: std::vec::IntoIter<I> = Vec::new().into_iter();
    let mut done = false;
    std::iter::from_fn(move || {
        loop {
            if let Some(item) = page.next() {
                return Some(Ok(item));
            }
            if done {
                return None;
            }
            if keyed && let Err(e) = sync_host() {
                done = true;
                return Some(Err(e));
            }
            match fetch(after.as_deref()) {
                Ok(items) => {
                    done = (items.len() as u32) < PAGE;
                    if let Some(last) = items.last() {
                        after = Some(cursor(last));
                    }
                    page = items.into_iter();
                }
                Err(c) => {
                    done = true;
                    return Some(Err(Error::state(name, c)));
                }
            }
        }
    })
}

/// One accumulator of type `T` per key, folded with a reduce function.
pub struct ReducingState<T> {
    pub(crate) inner: Rc<CachedValue<wit::AccumulatorState>>,
    pub(crate) reduce: fn(T, T) -> T,
}

impl<T: Serialize + DeserializeOwned> ReducingState<T> {
    /// Folds `value` into the current key's accumulator and returns the result.
    pub fn add(&self, value: T) -> Result<T> {
        let next = match self.get()? {
            Some(acc) => (self.reduce)(acc, value),
            None => value,
        };
        let name = &self.inner.name;
        self.inner.write(|buf| postcard::to_extend(&next, buf).map_err(|e| Error::codec(name, "encode", e)))?;
        Ok(next)
    }

    /// The current key's accumulator.
    pub fn get(&self) -> Result<Option<T>> {
        let name = &self.inner.name;
        self.inner.read(|b| b.map(|b| decode(name, b)).transpose())
    }

    /// Removes the current key's accumulator.
    pub fn clear(&self) -> Result<()> {
        self.inner.clear()
    }
}

/// An aggregate function for [`AggregatingState`], as Flink's
/// `AggregateFunction`: inputs fold into an accumulator, which yields a result.
pub trait AggregateFunction: 'static {
    /// What `add` takes.
    type Input;
    /// What the host stores per key.
    type Accumulator: Serialize + DeserializeOwned;
    /// What `get` returns.
    type Output;
    /// A fresh accumulator.
    fn create(&self) -> Self::Accumulator;
    /// Folds `input` into `acc`.
    fn add(&self, input: Self::Input, acc: Self::Accumulator) -> Self::Accumulator;
    /// The result for an accumulator.
    fn result(&self, acc: &Self::Accumulator) -> Self::Output;
}

/// One accumulator per key, folded with an [`AggregateFunction`].
pub struct AggregatingState<F: AggregateFunction> {
    pub(crate) inner: Rc<CachedValue<wit::AccumulatorState>>,
    pub(crate) function: F,
}

impl<F: AggregateFunction> AggregatingState<F> {
    /// Folds `input` into the current key's accumulator.
    pub fn add(&self, input: F::Input) -> Result<()> {
        let acc = self.accumulator()?.unwrap_or_else(|| self.function.create());
        let acc = self.function.add(input, acc);
        let name = &self.inner.name;
        self.inner.write(|buf| postcard::to_extend(&acc, buf).map_err(|e| Error::codec(name, "encode", e)))
    }

    /// The current key's result, or none before the first input.
    pub fn get(&self) -> Result<Option<F::Output>> {
        Ok(self.accumulator()?.map(|acc| self.function.result(&acc)))
    }

    fn accumulator(&self) -> Result<Option<F::Accumulator>> {
        let name = &self.inner.name;
        self.inner.read(|b| b.map(|b| decode(name, b)).transpose())
    }

    /// Removes the current key's accumulator.
    pub fn clear(&self) -> Result<()> {
        self.inner.clear()
    }
}
