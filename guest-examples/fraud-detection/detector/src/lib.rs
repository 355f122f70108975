//! Fraud detection with live rules, in event time.
//!
//! Main input: transactions keyed by account, `{"ts", "account", "id",
//! "amount"}`. Broadcast input: rules, `{"ts", "rule", "small", "large",
//! "window_ms"}` (or `{"ts", "rule", "delete": true}`). A rule flags a
//! transaction larger than `large` that comes at most `window_ms` after a
//! transaction smaller than `small` on the same account, and emits
//! `ALERT rule=<rule> account=<account> tx=<id> amount=<amount> small_at=<ts>`.
//!
//! Rules change while transactions flow. To give the same alerts whatever
//! order the two streams interleave in, every rule version is kept with the
//! event time it takes effect, and transactions wait in keyed state until the
//! watermark passes them (an event-time timer at their time); then each is
//! judged by the rule versions in effect at its time, in event-time order.

use serde::{Deserialize, Serialize};
use weir_sdk::{
    BroadcastMapState, Context, Element, Error, MapState, OpenContext, Operator, Result, Timer, export_operator,
};

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Rule {
    small: u64,
    large: u64,
    window_ms: i64,
}

#[derive(Deserialize)]
struct RuleUpdate {
    rule: String,
    #[serde(default)]
    delete: bool,
    #[serde(default)]
    small: u64,
    #[serde(default)]
    large: u64,
    #[serde(default)]
    window_ms: i64,
}

#[derive(Deserialize)]
struct Transaction {
    id: String,
    amount: u64,
}

/// A rule's versions: (effective event time, rule or deletion), by time.
type Versions = Vec<(i64, Option<Rule>)>;

struct Detector {
    /// Rule id -> its versions.
    rules: BroadcastMapState<String, Versions>,
    /// Event time -> transactions of the current account waiting for it.
    pending: MapState<i64, Vec<(String, u64)>>,
    /// Rule id -> event time of the current account's last small transaction.
    last_small: MapState<String, i64>,
}

fn event_time(input: &Element<'_>) -> Result<i64> {
    input.timestamp.ok_or_else(|| Error::msg("records need an event time (timestamp_field)"))
}

fn parse<'a, T: Deserialize<'a>>(input: &Element<'a>) -> Result<T> {
    serde_json::from_slice(input.payload).map_err(|e| Error::msg(format!("bad record {:?}: {e}", input.payload_str())))
}

impl Operator for Detector {
    fn open(ctx: &mut OpenContext) -> Result<Self> {
        Ok(Detector {
            rules: ctx.broadcast_map_state("rules")?,
            pending: ctx.map_state("pending")?,
            last_small: ctx.map_state("last-small")?,
        })
    }

    fn process_broadcast(&mut self, _ctx: &mut Context, input: Element<'_>) -> Result<()> {
        let at = event_time(&input)?;
        let update: RuleUpdate = parse(&input)?;
        let mut versions = self.rules.get(&update.rule)?.unwrap_or_default();
        let rule =
            (!update.delete).then_some(Rule { small: update.small, large: update.large, window_ms: update.window_ms });
        // Stable: of two versions at the same time, the later-arriving wins.
        let pos = versions.partition_point(|(t, _)| *t <= at);
        versions.insert(pos, (at, rule));
        self.rules.put(&update.rule, &versions)
    }

    fn process(&mut self, ctx: &mut Context, input: Element<'_>) -> Result<()> {
        let at = event_time(&input)?;
        let tx: Transaction = parse(&input)?;
        let mut waiting = self.pending.get(&at)?.unwrap_or_default();
        waiting.push((tx.id, tx.amount));
        self.pending.put(&at, &waiting)?;
        ctx.register_event_time_timer(at)
    }

    fn on_timer(&mut self, ctx: &mut Context, timer: Timer) -> Result<()> {
        let at = timer.time;
        let Some(waiting) = self.pending.get(&at)? else { return Ok(()) };
        self.pending.remove(&at)?;
        let account = String::from_utf8_lossy(&timer.key).into_owned();
        let rules: Vec<(String, Versions)> = self.rules.entries().collect::<Result<_>>()?;
        for (id, amount) in waiting {
            for (rule_id, versions) in &rules {
                let in_effect = versions.iter().rev().find(|(t, _)| *t <= at).and_then(|(_, r)| r.as_ref());
                let Some(rule) = in_effect else { continue };
                if amount > rule.large
                    && let Some(small_at) = self.last_small.get(rule_id)?
                    && at - small_at <= rule.window_ms
                {
                    ctx.emit(format!(
                        "ALERT rule={rule_id} account={account} tx={id} amount={amount} small_at={small_at}"
                    ));
                }
                if amount < rule.small {
                    self.last_small.put(rule_id, &at)?;
                }
            }
        }
        Ok(())
    }
}

export_operator!(Detector);
