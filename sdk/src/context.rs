//! What operator code receives: [`OpenContext`] to register state in `open`,
//! [`Context`] to emit output, read time and manage timers in every other call.

use crate::batch::{CachedValue, sync_host};
use crate::bindings::weir::operator::{
    broadcast_state, collector, context as wit_context, keyed_state, operator_state, timers,
    types::{ElementBatch, OperatorInfo, Redistribution, TimeDomain},
};
use crate::broadcast::BroadcastMapState;
use crate::codec::Descriptor;
use crate::error::{Error, Result};
use crate::keyed::{AggregateFunction, AggregatingState, ListState, MapState, ReducingState, ValueState};
use crate::operator_state::OperatorListState;
use crate::packed;
use serde::{Serialize, de::DeserializeOwned};
use std::cell::RefCell;
use std::marker::PhantomData;

/// Passed to [`crate::Operator::open`]: who this subtask is, the operator's
/// params, and the functions that register state.
pub struct OpenContext {
    pub(crate) info: OperatorInfo,
}

impl OpenContext {
    /// The operator's uid, subtask index, parallelism and params.
    pub fn info(&self) -> &OperatorInfo {
        &self.info
    }

    /// The value of param `name` from the operator's `[operators.params]`.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.info.params.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// Param `name` parsed as `T`, or `default` when absent; a value that does
    /// not parse is an error naming the param.
    pub fn param_or<T: std::str::FromStr>(&self, name: &str, default: T) -> Result<T> {
        match self.param(name) {
            None => Ok(default),
            Some(v) => v.parse().map_err(|_| Error::msg(format!("param '{name}': cannot parse '{v}'"))),
        }
    }

    /// Registers value state.
    pub fn value_state<T: Serialize + DeserializeOwned>(&mut self, d: impl Into<Descriptor>) -> Result<ValueState<T>> {
        let d = d.into();
        let handle = keyed_state::register_value(&d.to_wit()).map_err(|c| Error::state(d.name(), c))?;
        Ok(ValueState { inner: CachedValue::new(d.name().to_string(), handle), _type: PhantomData })
    }

    /// Registers list state.
    pub fn list_state<T: Serialize + DeserializeOwned>(&mut self, d: impl Into<Descriptor>) -> Result<ListState<T>> {
        let d = d.into();
        let handle = keyed_state::register_list(&d.to_wit()).map_err(|c| Error::state(d.name(), c))?;
        Ok(ListState { name: d.name().to_string(), handle, _type: PhantomData })
    }

    /// Registers map state.
    pub fn map_state<K, V>(&mut self, d: impl Into<Descriptor>) -> Result<MapState<K, V>>
    where
        K: Serialize + DeserializeOwned,
        V: Serialize + DeserializeOwned,
    {
        let d = d.into();
        let handle = keyed_state::register_map(&d.to_wit()).map_err(|c| Error::state(d.name(), c))?;
        Ok(MapState { name: d.name().to_string(), handle, _type: PhantomData })
    }

    /// Registers reducing state folded with `reduce`.
    pub fn reducing_state<T: Serialize + DeserializeOwned>(
        &mut self,
        d: impl Into<Descriptor>,
        reduce: fn(T, T) -> T,
    ) -> Result<ReducingState<T>> {
        let d = d.into();
        let handle = keyed_state::register_reducing(&d.to_wit()).map_err(|c| Error::state(d.name(), c))?;
        Ok(ReducingState { inner: CachedValue::new(d.name().to_string(), handle), reduce })
    }

    /// Registers aggregating state folded with `function`.
    pub fn aggregating_state<F: AggregateFunction>(
        &mut self,
        d: impl Into<Descriptor>,
        function: F,
    ) -> Result<AggregatingState<F>> {
        let d = d.into();
        let handle = keyed_state::register_aggregating(&d.to_wit()).map_err(|c| Error::state(d.name(), c))?;
        Ok(AggregatingState { inner: CachedValue::new(d.name().to_string(), handle), function })
    }

    /// Registers operator list state, redistributed as `mode` says.
    pub fn operator_list_state<T: Serialize + DeserializeOwned>(
        &mut self,
        d: impl Into<Descriptor>,
        mode: Redistribution,
    ) -> Result<OperatorListState<T>> {
        let d = d.into();
        let handle = operator_state::register_list(&d.to_wit(), mode).map_err(|c| Error::state(d.name(), c))?;
        Ok(OperatorListState { name: d.name().to_string(), handle, _type: PhantomData })
    }

    /// Registers broadcast map state.
    pub fn broadcast_map_state<K, V>(&mut self, d: impl Into<Descriptor>) -> Result<BroadcastMapState<K, V>>
    where
        K: Serialize + DeserializeOwned,
        V: Serialize + DeserializeOwned,
    {
        let d = d.into();
        let handle = broadcast_state::register_map(&d.to_wit()).map_err(|c| Error::state(d.name(), c))?;
        Ok(BroadcastMapState { name: d.name().to_string(), handle, _type: PhantomData })
    }
}

/// A timer that fired, passed to [`crate::Operator::on_timer`].
#[derive(Debug, Clone)]
pub struct Timer {
    /// The time it was registered for, in milliseconds since the epoch.
    pub time: i64,
    /// Event time or processing time.
    pub domain: TimeDomain,
    /// The key it belongs to (also the current key).
    pub key: Vec<u8>,
}

/// One input record, borrowed from the batch the host sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Element<'a> {
    /// The record's bytes.
    pub payload: &'a [u8],
    /// Its key, on a keyed input (`partition = "key"`).
    pub key: Option<&'a [u8]>,
    /// Its event time, if any (milliseconds since the epoch).
    pub timestamp: Option<i64>,
}

impl<'a> Element<'a> {
    /// Element `i` of a flat batch. The host builds batches, so offsets are
    /// in bounds; a bad one would trap this instance, never the host.
    pub(crate) fn at(batch: &'a ElementBatch, i: usize) -> Self {
        let e = packed::element(&batch.index, i);
        let range = |(start, len): (u32, u32)| &batch.data[start as usize..start as usize + len as usize];
        Element { payload: range(e.payload), key: e.key.map(range), timestamp: e.timestamp }
    }

    /// The payload as UTF-8 text (lossy).
    pub fn payload_str(&self) -> std::borrow::Cow<'a, str> {
        String::from_utf8_lossy(self.payload)
    }

    /// The key as UTF-8 text (lossy); empty when there is no key.
    pub fn key_str(&self) -> std::borrow::Cow<'a, str> {
        String::from_utf8_lossy(self.key.unwrap_or_default())
    }
}

thread_local! {
    /// Output buffered during one export call and sent with one `emit-batch`.
    static OUTPUT: RefCell<ElementBatch> = const { RefCell::new(ElementBatch { data: Vec::new(), index: Vec::new() }) };
}

/// Sends buffered output to the host. Called by the export glue after every
/// call into the operator.
pub(crate) fn flush_output() {
    OUTPUT.with_borrow_mut(|out| {
        if !out.index.is_empty() {
            collector::emit_batch(out);
            out.data.clear();
            out.index.clear();
        }
    });
}

/// Appends one output element; `payload` writes the payload bytes.
fn push_output(key: Option<&[u8]>, timestamp: Option<i64>, payload: impl FnOnce(&mut Vec<u8>)) {
    OUTPUT.with_borrow_mut(|out| {
        let payload_start = out.data.len() as u32;
        payload(&mut out.data);
        let payload_len = out.data.len() as u32 - payload_start;
        let key_start = out.data.len() as u32;
        if let Some(k) = key {
            out.data.extend_from_slice(k);
        }
        let key = key.map(|k| (key_start, k.len() as u32));
        packed::push_element(
            &mut out.index,
            packed::ElementEntry { payload: (payload_start, payload_len), key, timestamp },
        );
    });
}

/// Passed to every [`crate::Operator`] call after `open`: emit output, read
/// the current key and time, manage timers.
pub struct Context {
    pub(crate) _private: (),
}

impl Context {
    /// Emits `payload` without key or timestamp.
    pub fn emit(&mut self, payload: impl AsRef<[u8]>) {
        push_output(None, None, |buf| buf.extend_from_slice(payload.as_ref()));
    }

    /// Emits `payload` under `key`, so a keyed downstream operator sees it as
    /// that key.
    pub fn emit_keyed(&mut self, key: impl AsRef<[u8]>, payload: impl AsRef<[u8]>) {
        push_output(Some(key.as_ref()), None, |buf| buf.extend_from_slice(payload.as_ref()));
    }

    /// Emits an element: payload, optional key and optional timestamp.
    pub fn emit_element(&mut self, element: &Element<'_>) {
        push_output(element.key, element.timestamp, |buf| buf.extend_from_slice(element.payload));
    }

    /// Emits a payload written in place by `write` (no intermediate buffer),
    /// with an optional key and timestamp.
    pub fn emit_with(&mut self, key: Option<&[u8]>, timestamp: Option<i64>, write: impl FnOnce(&mut Vec<u8>)) {
        push_output(key, timestamp, write);
    }

    /// The current key, if any.
    pub fn current_key(&self) -> Option<Vec<u8>> {
        sync_host().ok()?;
        wit_context::current_key()
    }

    /// The operator's event-time watermark (`i64::MIN` before the first).
    pub fn watermark(&self) -> i64 {
        wit_context::current_watermark()
    }

    /// The host's wall clock in milliseconds since the Unix epoch.
    pub fn processing_time(&self) -> i64 {
        wit_context::current_processing_time()
    }

    /// Registers an event-time timer for the current key.
    pub fn register_event_time_timer(&mut self, time: i64) -> Result<()> {
        sync_host()?;
        timers::register_event_time_timer(time)
            .map_err(|c| Error::msg(format!("timer: {}", crate::error::describe(&c))))
    }

    /// Registers a processing-time timer for the current key.
    pub fn register_processing_time_timer(&mut self, time: i64) -> Result<()> {
        sync_host()?;
        timers::register_processing_time_timer(time)
            .map_err(|c| Error::msg(format!("timer: {}", crate::error::describe(&c))))
    }

    /// Deletes the current key's event-time timer at `time`.
    pub fn delete_event_time_timer(&mut self, time: i64) -> Result<()> {
        sync_host()?;
        timers::delete_event_time_timer(time).map_err(|c| Error::msg(format!("timer: {}", crate::error::describe(&c))))
    }

    /// Deletes the current key's processing-time timer at `time`.
    pub fn delete_processing_time_timer(&mut self, time: i64) -> Result<()> {
        sync_host()?;
        timers::delete_processing_time_timer(time)
            .map_err(|c| Error::msg(format!("timer: {}", crate::error::describe(&c))))
    }
}
