//! RocksDB options of a subtask's database: the memory budget, column
//! family options with partitioned filters in a bounded block cache, the
//! TTL compaction filter, and the removal of directories that crashed
//! processes left behind.

use super::keys::{decode_list, list_append};
use crate::clock::Clock;
use crate::state::{Shape, ttl};
use ::rocksdb::{BlockBasedOptions, Cache, Options, compaction_filter::Decision};
use std::path::Path;
use std::sync::{Arc, OnceLock};

/// Memory settings of one subtask's RocksDB.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RocksDbMemory {
    /// Block cache shared by the column families.
    pub block_cache: usize,
    /// Memtables of all column families together.
    pub write_buffers: usize,
    /// The write-back cache of value states.
    pub write_cache: usize,
}

impl Default for RocksDbMemory {
    fn default() -> Self {
        RocksDbMemory { block_cache: 64 << 20, write_buffers: 64 << 20, write_cache: 64 << 20 }
    }
}

/// Removes working directories `<name>-<pid>-<n>` (and frozen checkpoints
/// `<name>-<pid>-<n>.f<k>`) under `localdir` left by processes that no
/// longer run (killed before they could clean up).
pub(super) fn remove_orphans(localdir: &Path, name: &str) {
    let Ok(entries) = std::fs::read_dir(localdir) else { return };
    for e in entries.flatten() {
        let file_name = e.file_name().to_string_lossy().into_owned();
        let mut parts = file_name.rsplitn(3, '-');
        let (Some(_n), Some(pid), Some(rest)) = (parts.next(), parts.next(), parts.next()) else { continue };
        let Ok(pid) = pid.parse::<u32>() else { continue };
        if rest == name && pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            tracing::info!(dir = %e.path().display(), "removing the RocksDB directory of a process that is gone");
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

pub(super) fn cf_options(memory: &RocksDbMemory, cache: &Cache) -> Options {
    let mut o = Options::default();
    o.create_if_missing(true);
    o.create_missing_column_families(true);
    o.set_merge_operator_associative("weir-list-append", list_append);
    o.set_compression_type(::rocksdb::DBCompressionType::Lz4);
    o.set_db_write_buffer_size(memory.write_buffers);
    let mut table = BlockBasedOptions::default();
    table.set_block_cache(cache);
    table.set_bloom_filter(10.0, false);
    // Index and filters live in the bounded block cache, so memory stays
    // within `block_cache`. Partitioned, so a lookup loads one small filter
    // partition rather than a whole SST file's filter: with whole filters a
    // cache smaller than the filters re-read megabytes per get.
    table.set_cache_index_and_filter_blocks(true);
    table.set_index_type(::rocksdb::BlockBasedIndexType::TwoLevelIndexSearch);
    table.set_partition_filters(true);
    table.set_pin_top_level_index_and_filter(true);
    table.set_pin_l0_filter_and_index_blocks_in_cache(true);
    o.set_block_based_table_factory(&table);
    o
}

/// The clock of one state's TTL clean-up: unset (nothing expires in
/// compaction) until the TTL layer hands it over.
pub(super) type ExpiryClock = Arc<OnceLock<Clock>>;

/// Options of a state's column family: `base` plus a compaction filter that
/// drops what expired, once `clock` is set.
pub(super) fn state_cf_options(base: &Options, shape: Shape, clock: &ExpiryClock) -> Options {
    let mut o = base.clone();
    let clock = clock.clone();
    o.set_compaction_filter("weir-ttl", move |_level: u32, _key: &[u8], value: &[u8]| {
        let Some(now) = clock.get().map(|c| c()) else { return Decision::Keep };
        let expired = |v: &[u8]| ttl::expires_at(v) <= now;
        let drop = match shape {
            Shape::Value | Shape::Map => expired(value),
            // Trimming a list would need `Decision::Change`, which takes a
            // `'static` slice; reads trim lists instead.
            Shape::List => decode_list(value).into_iter().all(expired),
            Shape::OperatorList | Shape::BroadcastMap => false,
        };
        if drop { Decision::Remove } else { Decision::Keep }
    });
    o
}
