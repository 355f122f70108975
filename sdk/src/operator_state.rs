//! Typed operator (per-subtask) list state.

use crate::bindings::weir::operator::operator_state as wit;
use crate::codec::{decode, encode, with_encoded};
use crate::error::{Error, Result};
use crate::keyed::PAGE;
use serde::{Serialize, de::DeserializeOwned};
use std::marker::PhantomData;

/// A list of `T` owned by this subtask, redistributed on rescale as
/// registered (even-split or union).
pub struct OperatorListState<T> {
    pub(crate) name: String,
    pub(crate) handle: wit::OperatorListState,
    pub(crate) _type: PhantomData<fn() -> T>,
}

impl<T: Serialize + DeserializeOwned> OperatorListState<T> {
    /// Appends `value`.
    pub fn add(&self, value: &T) -> Result<()> {
        with_encoded(&self.name, value, |b| self.handle.add(b))?.map_err(|c| Error::state(&self.name, c))
    }

    /// Replaces the list.
    pub fn update(&self, values: &[T]) -> Result<()> {
        let encoded = values.iter().map(|v| encode(&self.name, v)).collect::<Result<Vec<_>>>()?;
        self.handle.update(&encoded).map_err(|c| Error::state(&self.name, c))
    }

    /// Reads the whole list, a page at a time.
    pub fn get(&self) -> Result<Vec<T>> {
        let mut out = Vec::new();
        loop {
            let page = self.handle.read(out.len() as u32, PAGE).map_err(|c| Error::state(&self.name, c))?;
            let n = page.len() as u32;
            for b in page {
                out.push(decode(&self.name, &b)?);
            }
            if n < PAGE {
                return Ok(out);
            }
        }
    }

    /// The number of values.
    pub fn len(&self) -> Result<u32> {
        self.handle.len().map_err(|c| Error::state(&self.name, c))
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    /// Removes every value.
    pub fn clear(&self) -> Result<()> {
        self.handle.clear().map_err(|c| Error::state(&self.name, c))
    }
}
