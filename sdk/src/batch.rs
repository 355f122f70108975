//! The batch fast path. Inside `process-batch`, value and accumulator state
//! are read for the whole batch with one `get-batch` call per state, updated
//! in guest memory, and written back with one `set-batch` call per state
//! when the batch ends; no host call is made per element for them. Other
//! keyed calls (list and map state, timers, the current key) tell the host
//! which element is current only when they are used.
//!
//! Semantics are those of per-element calls: elements with equal keys share
//! one slot, so a later element sees an earlier one's write.

use crate::bindings::weir::operator::context as wit_context;
use crate::bindings::weir::operator::keyed_state as wit;
use crate::bindings::weir::operator::types::{ErrorCode, ValueBatch};
use crate::error::{Error, Result};
use crate::packed::{self, Span};
use std::cell::{Cell, RefCell};
use std::rc::Rc;

#[derive(Clone, Copy, Default)]
struct Position {
    active: bool,
    generation: u64,
    index: u32,
    host_index: u32,
}

thread_local! {
    static POSITION: Cell<Position> = const { Cell::new(Position { active: false, generation: 0, index: 0, host_index: 0 }) };
    static SLOTS: RefCell<(u64, Vec<u32>)> = const { RefCell::new((0, Vec::new())) };
    static DIRTY: RefCell<Vec<Rc<dyn Flush>>> = const { RefCell::new(Vec::new()) };
}

/// A new batch starts; element 0 is current on the host.
pub(crate) fn begin() {
    POSITION.with(|p| {
        let g = p.get().generation + 1;
        p.set(Position { active: true, generation: g, index: 0, host_index: 0 });
    });
}

/// Element `i` is current for user code.
pub(crate) fn set_index(i: u32) {
    POSITION.with(|p| {
        let mut v = p.get();
        v.index = i;
        p.set(v);
    });
}

/// The batch ends: writes every changed state back (or, after a failure,
/// drops the changes: the task fails anyway).
pub(crate) fn end(write_back: bool) -> Result<()> {
    POSITION.with(|p| {
        let mut v = p.get();
        v.active = false;
        p.set(v);
    });
    let dirty: Vec<Rc<dyn Flush>> = DIRTY.with_borrow_mut(std::mem::take);
    if write_back {
        for d in dirty {
            d.flush()?;
        }
    }
    Ok(())
}

/// Makes the host's current element match user code's, before a per-element
/// keyed call.
pub(crate) fn sync_host() -> Result<()> {
    let p = POSITION.with(Cell::get);
    if p.active && p.host_index != p.index {
        wit_context::set_current_element(p.index).map_err(Error::from)?;
        POSITION.with(|c| {
            let mut v = c.get();
            v.host_index = p.index;
            c.set(v);
        });
    }
    Ok(())
}

/// Tells the host which element user code is on, even if the host already
/// has it current: before a failure is reported, so the report names it.
pub(crate) fn report_position() {
    let p = POSITION.with(Cell::get);
    if p.active && wit_context::set_current_element(p.index).is_ok() {
        POSITION.with(|c| {
            let mut v = c.get();
            v.host_index = p.index;
            c.set(v);
        });
    }
}

/// (generation, element index) inside a batch.
fn current() -> Option<(u64, u32)> {
    let p = POSITION.with(Cell::get);
    p.active.then_some((p.generation, p.index))
}

/// The key slot of element `i` of batch `generation`.
fn slot_of(generation: u64, i: u32) -> Result<usize> {
    SLOTS.with_borrow_mut(|(g, slots)| {
        if *g != generation {
            *slots = wit_context::batch_slots().map_err(Error::from)?;
            *g = generation;
        }
        slots.get(i as usize).map(|&s| s as usize).ok_or_else(|| Error::msg(format!("no key slot for element {i}")))
    })
}

/// The host calls of a value-shaped state.
pub(crate) trait ValueHandle: 'static {
    fn get(&self) -> std::result::Result<Option<Vec<u8>>, ErrorCode>;
    fn set(&self, value: &[u8]) -> std::result::Result<(), ErrorCode>;
    fn clear(&self) -> std::result::Result<(), ErrorCode>;
    fn get_batch(&self) -> std::result::Result<(Vec<u8>, Vec<Span>), ErrorCode>;
    fn set_batch(&self, values: &ValueBatch) -> std::result::Result<(), ErrorCode>;
}

macro_rules! value_handle {
    ($t:ty) => {
        impl ValueHandle for $t {
            fn get(&self) -> std::result::Result<Option<Vec<u8>>, ErrorCode> {
                <$t>::get(self)
            }
            fn set(&self, value: &[u8]) -> std::result::Result<(), ErrorCode> {
                <$t>::set(self, value)
            }
            fn clear(&self) -> std::result::Result<(), ErrorCode> {
                <$t>::clear(self)
            }
            fn get_batch(&self) -> std::result::Result<(Vec<u8>, Vec<Span>), ErrorCode> {
                let ValueBatch { data, index } = <$t>::get_batch(self)?;
                Ok((data, packed::value_spans(&index)))
            }
            fn set_batch(&self, values: &ValueBatch) -> std::result::Result<(), ErrorCode> {
                <$t>::set_batch(self, values)
            }
        }
    };
}
value_handle!(wit::ValueState);
value_handle!(wit::AccumulatorState);

#[derive(Default)]
struct Cache {
    generation: u64,
    loaded: bool,
    /// Values as the host had them at the start of the batch.
    data: Vec<u8>,
    spans: Vec<Span>,
    /// Values written during the batch, per slot, located in `arena`.
    written: Vec<Option<Span>>,
    arena: Vec<u8>,
    /// Written slots in first-write order.
    dirty: Vec<u32>,
    queued: bool,
}

/// A value-shaped state with its batch cache.
pub(crate) struct CachedValue<H> {
    pub(crate) name: String,
    handle: H,
    cache: RefCell<Cache>,
}

trait Flush {
    fn flush(&self) -> Result<()>;
}

impl<H: ValueHandle> CachedValue<H> {
    pub(crate) fn new(name: String, handle: H) -> Rc<Self> {
        Rc::new(CachedValue { name, handle, cache: RefCell::new(Cache::default()) })
    }

    fn err(&self, code: ErrorCode) -> Error {
        Error::state(&self.name, code)
    }

    fn prepare(&self, c: &mut Cache, generation: u64) -> Result<()> {
        if c.generation != generation {
            c.generation = generation;
            c.loaded = false;
            c.queued = false;
            c.dirty.clear();
            c.arena.clear();
        }
        if !c.loaded {
            let (data, spans) = self.handle.get_batch().map_err(|e| self.err(e))?;
            c.written.clear();
            c.written.resize(spans.len(), None);
            c.data = data;
            c.spans = spans;
            c.loaded = true;
        }
        Ok(())
    }

    /// Calls `f` with the current key's value bytes.
    pub(crate) fn read<R>(&self, f: impl FnOnce(Option<&[u8]>) -> Result<R>) -> Result<R> {
        let Some((generation, i)) = current() else {
            let v = self.handle.get().map_err(|e| self.err(e))?;
            return f(v.as_deref());
        };
        let slot = slot_of(generation, i)?;
        let mut c = self.cache.borrow_mut();
        self.prepare(&mut c, generation)?;
        let (buf, span) = match c.written.get(slot).copied().flatten() {
            Some(w) => (&c.arena, w),
            None => {
                (&c.data, *c.spans.get(slot).ok_or_else(|| Error::msg(format!("state '{}': bad slot", self.name)))?)
            }
        };
        if span.present { f(Some(&buf[span.start as usize..(span.start + span.len) as usize])) } else { f(None) }
    }

    /// Sets the current key's value to the bytes `encode` appends.
    pub(crate) fn write(self: &Rc<Self>, encode: impl FnOnce(Vec<u8>) -> Result<Vec<u8>>) -> Result<()> {
        let Some((generation, i)) = current() else {
            let bytes = encode(Vec::new())?;
            return self.handle.set(&bytes).map_err(|e| self.err(e));
        };
        self.put(generation, i, Some(encode))
    }

    /// Clears the current key's value.
    pub(crate) fn clear(self: &Rc<Self>) -> Result<()> {
        let Some((generation, i)) = current() else {
            return self.handle.clear().map_err(|e| self.err(e));
        };
        self.put(generation, i, None::<fn(Vec<u8>) -> Result<Vec<u8>>>)
    }

    fn put(
        self: &Rc<Self>,
        generation: u64,
        i: u32,
        encode: Option<impl FnOnce(Vec<u8>) -> Result<Vec<u8>>>,
    ) -> Result<()> {
        let slot = slot_of(generation, i)?;
        let mut c = self.cache.borrow_mut();
        self.prepare(&mut c, generation)?;
        let span = match encode {
            Some(encode) => {
                let start = c.arena.len();
                let arena = std::mem::take(&mut c.arena);
                c.arena = encode(arena)?;
                Span { start: start as u32, len: (c.arena.len() - start) as u32, present: true }
            }
            None => Span::ABSENT,
        };
        let Some(entry) = c.written.get_mut(slot) else {
            return Err(Error::msg(format!("state '{}': bad slot", self.name)));
        };
        let first_write = entry.is_none();
        *entry = Some(span);
        if first_write {
            c.dirty.push(slot as u32);
        }
        if !c.queued {
            c.queued = true;
            let me: Rc<dyn Flush> = self.clone();
            DIRTY.with_borrow_mut(|d| d.push(me));
        }
        Ok(())
    }
}

impl<H: ValueHandle> Flush for CachedValue<H> {
    fn flush(&self) -> Result<()> {
        let mut c = self.cache.borrow_mut();
        c.queued = false;
        if c.dirty.is_empty() {
            return Ok(());
        }
        let spans: Vec<Span> = c.dirty.iter().map(|&s| c.written[s as usize].unwrap_or(Span::ABSENT)).collect();
        // The arena goes to the host and comes back for the next batch.
        let values = ValueBatch { data: std::mem::take(&mut c.arena), index: packed::value_index(&c.dirty, &spans) };
        let result = self.handle.set_batch(&values).map_err(|e| self.err(e));
        // The host now holds these values; the batch is over.
        c.loaded = false;
        c.dirty.clear();
        c.arena = values.data;
        c.arena.clear();
        result
    }
}

#[cfg(test)]
mod tests {
    //! The batch cache against a fake host state: per-element semantics
    //! (a later element of the same key sees an earlier one's write) with one
    //! `get-batch` and one `set-batch` per state and batch.

    use super::*;

    /// A host's value state: each key slot's value at the start of the
    /// batch, the single-key value outside batches, and every call made.
    #[derive(Default)]
    struct Host {
        slots: RefCell<Vec<Option<Vec<u8>>>>,
        single: RefCell<Option<Vec<u8>>>,
        calls: RefCell<Vec<String>>,
    }

    #[derive(Clone, Default)]
    struct Fake(Rc<Host>);

    impl Fake {
        fn calls(&self) -> Vec<String> {
            self.0.calls.borrow().clone()
        }
    }

    impl ValueHandle for Fake {
        fn get(&self) -> std::result::Result<Option<Vec<u8>>, ErrorCode> {
            self.0.calls.borrow_mut().push("get".into());
            Ok(self.0.single.borrow().clone())
        }
        fn set(&self, value: &[u8]) -> std::result::Result<(), ErrorCode> {
            self.0.calls.borrow_mut().push(format!("set {value:?}"));
            *self.0.single.borrow_mut() = Some(value.to_vec());
            Ok(())
        }
        fn clear(&self) -> std::result::Result<(), ErrorCode> {
            self.0.calls.borrow_mut().push("clear".into());
            *self.0.single.borrow_mut() = None;
            Ok(())
        }
        fn get_batch(&self) -> std::result::Result<(Vec<u8>, Vec<Span>), ErrorCode> {
            self.0.calls.borrow_mut().push("get-batch".into());
            let (mut data, mut spans) = (Vec::new(), Vec::new());
            for v in self.0.slots.borrow().iter() {
                spans.push(match v {
                    Some(v) => {
                        data.extend_from_slice(v);
                        Span { start: (data.len() - v.len()) as u32, len: v.len() as u32, present: true }
                    }
                    None => Span::ABSENT,
                });
            }
            Ok((data, spans))
        }
        fn set_batch(&self, batch: &ValueBatch) -> std::result::Result<(), ErrorCode> {
            let (slots, values): (Vec<u32>, Vec<Option<Vec<u8>>>) = packed::value_entries(&batch.index)
                .map(|(slot, s)| {
                    (slot, s.present.then(|| batch.data[s.start as usize..(s.start + s.len) as usize].to_vec()))
                })
                .unzip();
            self.0.calls.borrow_mut().push(format!("set-batch {slots:?} {values:?}"));
            for (slot, v) in slots.iter().zip(values) {
                self.0.slots.borrow_mut()[*slot as usize] = v;
            }
            Ok(())
        }
    }

    /// Starts a batch whose elements have these key slots (what the host's
    /// `batch-slots` would answer).
    fn start_batch(slots: Vec<u32>) {
        begin();
        let generation = POSITION.with(Cell::get).generation;
        SLOTS.with_borrow_mut(|s| *s = (generation, slots));
    }

    fn counter(host: &Fake) -> Rc<CachedValue<Fake>> {
        CachedValue::new("count".into(), host.clone())
    }

    /// Element `i` adds one to its key's count.
    fn increment(v: &Rc<CachedValue<Fake>>, i: u32) -> u64 {
        set_index(i);
        let n = v.read(|b| Ok(b.map_or(0, |b| crate::codec::decode::<u64>("count", b).unwrap()))).unwrap() + 1;
        v.write(|mut buf| {
            buf.extend_from_slice(&crate::codec::encode("count", &n)?);
            Ok(buf)
        })
        .unwrap();
        n
    }

    #[test]
    fn outside_a_batch_each_call_goes_to_the_host() {
        let host = Fake::default();
        let v = counter(&host);
        assert_eq!(increment(&v, 0), 1);
        assert_eq!(increment(&v, 0), 2);
        v.clear().unwrap();
        assert_eq!(host.calls(), ["get", "set [1]", "get", "set [2]", "clear"]);
    }

    #[test]
    fn a_batch_reads_once_writes_back_once_and_equal_keys_share_a_value() {
        let host = Fake::default();
        *host.0.slots.borrow_mut() = vec![Some(vec![5]), None, Some(vec![9])];
        let v = counter(&host);
        // Elements on keys 1, 0, 1, 1: the later ones see the earlier writes.
        start_batch(vec![1, 0, 1, 1]);
        let seen: Vec<u64> = (0..4).map(|i| increment(&v, i)).collect();
        assert_eq!(seen, [1, 6, 2, 3]);
        assert_eq!(host.calls(), ["get-batch"], "nothing is written before the batch ends");
        end(true).unwrap();
        // Slots in first-write order, each once with its last value; slot 2
        // untouched.
        assert_eq!(host.calls(), ["get-batch", "set-batch [1, 0] [Some([3]), Some([6])]"]);

        // The next batch reads what this one wrote.
        start_batch(vec![0, 2]);
        assert_eq!((increment(&v, 0), increment(&v, 1)), (7, 10));
        end(true).unwrap();
        assert_eq!(host.0.slots.borrow().as_slice(), [Some(vec![7]), Some(vec![3]), Some(vec![10])]);
        assert_eq!(host.calls().iter().filter(|c| *c == "get-batch").count(), 2);
    }

    #[test]
    fn a_clear_in_a_batch_is_written_back_as_absent_and_read_as_absent() {
        let host = Fake::default();
        *host.0.slots.borrow_mut() = vec![Some(vec![4])];
        let v = counter(&host);
        start_batch(vec![0, 0]);
        assert_eq!(increment(&v, 0), 5);
        set_index(1);
        v.clear().unwrap();
        assert!(v.read(|b| Ok(b.is_none())).unwrap(), "a cleared value reads as absent in the same batch");
        end(true).unwrap();
        assert_eq!(host.calls().last().unwrap(), "set-batch [0] [None]");
    }

    #[test]
    fn a_failed_batch_writes_nothing_and_the_next_one_reads_the_host_again() {
        let host = Fake::default();
        *host.0.slots.borrow_mut() = vec![Some(vec![1])];
        let v = counter(&host);
        start_batch(vec![0]);
        increment(&v, 0);
        end(false).unwrap();
        start_batch(vec![0]);
        assert_eq!(increment(&v, 0), 2, "the dropped write is not seen");
        end(true).unwrap();
        assert_eq!(host.calls(), ["get-batch", "get-batch", "set-batch [0] [Some([2])]"]);
    }

    #[test]
    fn an_element_without_a_slot_is_an_error() {
        let host = Fake::default();
        *host.0.slots.borrow_mut() = vec![None];
        let v = counter(&host);
        // Element 1 has no slot; element 0's slot 3 is past the host's values.
        start_batch(vec![3]);
        set_index(1);
        assert_eq!(v.read(|_| Ok(())).unwrap_err().message(), "no key slot for element 1");
        set_index(0);
        assert_eq!(v.read(|_| Ok(())).unwrap_err().message(), "state 'count': bad slot");
        end(false).unwrap();
    }
}
