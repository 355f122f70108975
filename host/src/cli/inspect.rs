//! `host inspect`: what a checkpoint or savepoint holds, or one key's value.

use super::{host_settings, utc};
use std::path::Path;
use weir_host::checkpoint::inspect::{Found, lookup, printable, show, summarize};
use weir_host::checkpoint::restore::Target;
use weir_host::config::units::human_bytes;
use weir_host::state::Shape;

/// Shows `target` (a checkpoint URI or a savepoint directory): its
/// operators and states, or with `lookup` = (operator, state, key) one
/// key's value.
pub fn inspect(
    target: &str,
    key_groups: bool,
    lookup_key: Option<(String, String, String)>,
    config_flag: Option<&Path>,
) -> anyhow::Result<()> {
    let settings = host_settings(config_flag)?;
    let restored = Target::parse(target).load(&settings.storage)?;
    if let Some((uid, state, key)) = lookup_key {
        let (encoding, found) = lookup(&restored, &uid, &state, key.as_bytes())?;
        if found.is_empty() {
            anyhow::bail!("operator '{uid}', state '{state}': no value for key {key:?} in {}", restored.location);
        }
        for f in found {
            match f {
                Found::Value(v) | Found::Element(v) => println!("{}", show(&encoding, &v)),
                Found::Entry(k, v) => println!("{} => {}", show(&encoding, &k), show(&encoding, &v)),
            }
        }
        return Ok(());
    }
    let m = &restored.metadata;
    println!(
        "{} {} of job '{}': id {}, taken {} UTC, max_parallelism {}{}",
        if m.savepoint { "savepoint" } else { "checkpoint" },
        restored.location,
        m.job,
        m.id,
        utc(m.triggered_at_ms),
        m.max_parallelism,
        if m.finished { ", job finished" } else { "" }
    );
    for (id, position) in &m.sources {
        println!("source '{id}': position {position}");
    }
    for op in summarize(&restored)? {
        println!("operator '{}' (parallelism {}), {} timers", op.uid, op.parallelism, op.timers);
        for s in &op.states {
            println!(
                "  state '{}': {} v{} ({}), {} {}, {}",
                printable(&s.name),
                s.kind.name(),
                s.version,
                printable(&s.encoding),
                s.keys,
                if s.kind.shape() == Shape::OperatorList { "elements" } else { "keys" },
                human_bytes(s.bytes)
            );
            if key_groups {
                for (g, (k, b)) in &s.key_groups {
                    println!("    key group {g:>5}: {k} keys, {}", human_bytes(*b));
                }
            }
        }
    }
    Ok(())
}
