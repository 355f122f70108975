//! What one guest instance may take from the host: memory (the total of
//! all its linear memories, `wasm.memory_limit`), instances, tables and
//! memories per store, and output per call (`wasm.max_output_bytes` and
//! `wasm.max_output_records`). Past a limit the call traps with a message
//! naming it; the host never allocates on a guest's behalf beyond them.

use wasmtime::{ResourceLimiter, Result as WtResult};

/// Core instances a component may create (CPython's component makes a few
/// dozen).
pub const MAX_INSTANCES: usize = 1000;
/// Linear memories, across those instances.
pub const MAX_MEMORIES: usize = 100;
/// Tables, across those instances.
pub const MAX_TABLES: usize = 1000;
/// Elements of one table.
pub const MAX_TABLE_ELEMENTS: usize = 1_000_000;

/// Enforces the store's limits and remembers whether memory ran out, so a
/// failure can be reported as what it is.
pub struct StoreLimiter {
    /// Most bytes of linear memory, all memories of the instance together.
    pub limit: u64,
    /// Bytes of linear memory now, all memories together.
    total: u64,
    /// Set when a grow past the limit was refused.
    pub exceeded: bool,
}

impl StoreLimiter {
    /// A limiter allowing `limit` bytes of linear memory in all.
    pub fn new(limit: u64) -> Self {
        StoreLimiter { limit, total: 0, exceeded: false }
    }

    /// Bytes of linear memory the instance has (a memory never shrinks).
    pub fn total(&self) -> u64 {
        self.total
    }
}

impl ResourceLimiter for StoreLimiter {
    fn memory_growing(&mut self, current: usize, desired: usize, _maximum: Option<usize>) -> WtResult<bool> {
        // Called for every memory, from its creation (current 0) on.
        let total = self.total.saturating_sub(current as u64).saturating_add(desired as u64);
        if total > self.limit {
            self.exceeded = true;
            return Err(wasmtime::format_err!(
                "guest memory would grow to {total} bytes in all, past wasm.memory_limit ({} bytes)",
                self.limit
            ));
        }
        self.total = total;
        Ok(true)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> WtResult<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }

    fn instances(&self) -> usize {
        MAX_INSTANCES
    }

    fn tables(&self) -> usize {
        MAX_TABLES
    }

    fn memories(&self) -> usize {
        MAX_MEMORIES
    }
}

/// What a guest may emit in one call, and what it has emitted so far.
#[derive(Debug, Clone)]
pub struct OutputBudget {
    max_bytes: u64,
    max_records: u64,
    bytes: u64,
    records: u64,
}

impl OutputBudget {
    /// A budget of `max_bytes` (payloads and keys) and `max_records` per call.
    pub fn new(max_bytes: u64, max_records: u64) -> Self {
        OutputBudget { max_bytes, max_records, bytes: 0, records: 0 }
    }

    /// A new call starts with the whole budget.
    pub fn reset(&mut self) {
        self.bytes = 0;
        self.records = 0;
    }

    /// Takes `records` records of `bytes` bytes in all, or says which limit
    /// they would pass (taking nothing).
    pub fn charge(&mut self, bytes: u64, records: u64) -> WtResult<()> {
        let (b, r) = (self.bytes.saturating_add(bytes), self.records.saturating_add(records));
        if b > self.max_bytes {
            return Err(wasmtime::format_err!(
                "emitted more than wasm.max_output_bytes ({} bytes) in one call",
                self.max_bytes
            ));
        }
        if r > self.max_records {
            return Err(wasmtime::format_err!(
                "emitted more than wasm.max_output_records ({}) in one call",
                self.max_records
            ));
        }
        (self.bytes, self.records) = (b, r);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_counts_every_memory_together() {
        let mut l = StoreLimiter::new(100);
        assert!(l.memory_growing(0, 60, None).unwrap());
        assert!(l.memory_growing(0, 30, None).unwrap(), "a second memory: 90 in all");
        assert!(l.memory_growing(30, 50, None).is_err(), "110 in all");
        assert!(l.exceeded);
        assert!(l.memory_growing(60, 70, None).unwrap(), "100 in all is the limit");
    }

    #[test]
    fn output_past_the_budget_is_refused_and_taken_from_nothing() {
        let mut b = OutputBudget::new(10, 3);
        b.charge(6, 1).unwrap();
        assert!(b.charge(5, 1).unwrap_err().to_string().contains("wasm.max_output_bytes (10 bytes)"));
        b.charge(4, 2).unwrap();
        assert!(b.charge(0, 1).unwrap_err().to_string().contains("wasm.max_output_records (3)"));
        b.reset();
        b.charge(10, 3).unwrap();
        assert!(b.charge(u64::MAX, 0).is_err(), "no overflow");
    }
}
