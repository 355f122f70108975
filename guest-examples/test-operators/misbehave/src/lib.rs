//! A test operator that misbehaves on purpose, so the host's failure handling
//! can be tested with a real component. Params (from `job.toml`):
//! - `mode`: `trap` (panic), `trap-once` (panic on the job's first run
//!   only: after a restart, pass through), `loop` (spin forever), `alloc`
//!   (grow memory without bound), `error` (return an error), `sleep`
//!   (sleep an hour: blocks in WASI, not in wasm), `flood` (emit one MiB
//!   of bytes referenced by 4096 records: more output than the host allows),
//!   `clock` (emit what WASI's wall clock and the contract's processing
//!   time say, as `<wasi ms> <processing ms>`), or `slow` (sleep
//!   `sleep_ms`, default 1, then pass the record through: a deliberately
//!   slow operator, which back-pressures its upstream);
//! - `on`: the payload that triggers it (default: every record).
//!
//! Records that do not trigger it pass through unchanged.

use weir_sdk::{Context, Element, Error, OpenContext, Operator, Result, export_operator};

struct Misbehave {
    mode: String,
    on: Option<Vec<u8>>,
    attempt: u32,
    sleep_ms: u64,
}

impl Operator for Misbehave {
    fn open(ctx: &mut OpenContext) -> Result<Self> {
        Ok(Misbehave {
            mode: ctx.param("mode").unwrap_or("trap").to_string(),
            on: ctx.param("on").map(|s| s.as_bytes().to_vec()),
            attempt: ctx.info().attempt_number,
            sleep_ms: ctx.param_or("sleep_ms", 1)?,
        })
    }

    fn process(&mut self, ctx: &mut Context, input: Element<'_>) -> Result<()> {
        let spared = self.mode == "trap-once" && self.attempt > 0;
        if spared || self.on.as_deref().is_some_and(|on| on != input.payload) {
            ctx.emit_element(&input);
            return Ok(());
        }
        match self.mode.as_str() {
            "trap" | "trap-once" => panic!("misbehave: trap on {:?}", input.payload_str()),
            "loop" => {
                let mut x: u64 = 1;
                loop {
                    x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                }
            }
            "alloc" => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(vec![1u8; 1 << 20]);
                    std::hint::black_box(&hoard);
                }
            }
            "error" => Err(Error::msg(format!("misbehave: rejecting {:?}", input.payload_str()))),
            "slow" => {
                std::thread::sleep(std::time::Duration::from_millis(self.sleep_ms));
                ctx.emit_element(&input);
                Ok(())
            }
            "sleep" => {
                std::thread::sleep(std::time::Duration::from_secs(3600));
                Ok(())
            }
            "flood" => {
                // One MiB of bytes, referenced by 4096 records: 4 GiB of
                // output in one batch, which the host must refuse before
                // copying any of it.
                use weir_sdk::bindings::weir::operator::{collector, types};
                let data = vec![b'x'; 1 << 20];
                // 4096 entries of the packed index (wit/types.wit), each the
                // whole buffer as payload, no key, no timestamp.
                let mut one = [0u8; 32];
                one[4..8].copy_from_slice(&(data.len() as u32).to_le_bytes());
                collector::emit_batch(&types::ElementBatch { data, index: one.repeat(4096) });
                Ok(())
            }
            "bad-index" => {
                // A packed index whose second entry sets a flag bit the
                // contract does not define: the host must trap this
                // instance, not read it.
                use weir_sdk::bindings::weir::operator::{collector, types};
                let mut index = [0u8; 64];
                index[4] = 1;
                index[36] = 1;
                index[48] = 8;
                collector::emit_batch(&types::ElementBatch { data: b"x".to_vec(), index: index.to_vec() });
                Ok(())
            }
            "bad-text-index" => {
                // emit-text-batch with an entry that reaches past the text's
                // bytes ("é" is two): checked as emit-batch's index is.
                use weir_sdk::bindings::weir::operator::collector;
                let mut index = [0u8; 32];
                index[4] = 3;
                collector::emit_text_batch("é", &index);
                Ok(())
            }
            "text-flood" => {
                // As "flood", with the buffer given as text.
                use weir_sdk::bindings::weir::operator::collector;
                let text = "x".repeat(1 << 20);
                let mut one = [0u8; 32];
                one[4..8].copy_from_slice(&(text.len() as u32).to_le_bytes());
                collector::emit_text_batch(&text, &one.repeat(4096));
                Ok(())
            }
            "clock" => {
                let wasi = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_millis())
                    .unwrap_or(0);
                ctx.emit(format!("{wasi} {}", ctx.processing_time()));
                Ok(())
            }
            other => Err(Error::msg(format!("misbehave: unknown mode '{other}'"))),
        }
    }
}

export_operator!(Misbehave);
