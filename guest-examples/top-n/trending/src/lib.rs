//! Trending pages: views keyed by category. Each view is appended to a
//! `ListState` whose elements live `window_ms` (state TTL), so the list
//! always holds the category's recent views: a sliding window kept by the
//! state backend, with no timers. A `MapState` keeps all-time counts. On
//! every view the operator emits the category's top `n` pages of the window
//! and of all time: `category recent=page:count,... all=page:count,...`.

use std::collections::BTreeMap;
use std::time::Duration;
use weir_sdk::{
    Context, Descriptor, Element, Error, ListState, MapState, OpenContext, Operator, Result, Ttl, export_operator,
};

struct Trending {
    recent: ListState<String>,
    all_time: MapState<String, u64>,
    n: usize,
}

/// The string value of `"field": "..."` in a flat JSON object.
fn field<'a>(json: &'a str, name: &str) -> Option<&'a str> {
    let at = json.find(&format!("\"{name}\""))? + name.len() + 2;
    json[at..].trim_start().strip_prefix(':')?.trim_start().strip_prefix('"')?.split('"').next()
}

/// `page:count` of the `n` largest counts, ties by page name.
fn top(counts: impl IntoIterator<Item = (String, u64)>, n: usize) -> String {
    let mut v: Vec<(String, u64)> = counts.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    v.iter().take(n).map(|(p, c)| format!("{p}:{c}")).collect::<Vec<_>>().join(",")
}

impl Operator for Trending {
    fn open(ctx: &mut OpenContext) -> Result<Self> {
        let window = Duration::from_millis(ctx.param_or("window_ms", 1000u64)?);
        Ok(Trending {
            recent: ctx.list_state(Descriptor::new("recent").ttl(Ttl::new(window)))?,
            all_time: ctx.map_state("all-time")?,
            n: ctx.param_or("n", 3usize)?,
        })
    }

    fn process(&mut self, ctx: &mut Context, input: Element<'_>) -> Result<()> {
        let line = input.payload_str();
        let page = field(&line, "page").ok_or_else(|| Error::msg(format!("view without page: {line}")))?.to_string();
        self.recent.add(&page)?;
        let count = self.all_time.get(&page)?.unwrap_or(0) + 1;
        self.all_time.put(&page, &count)?;

        let mut window: BTreeMap<String, u64> = BTreeMap::new();
        for p in self.recent.iter() {
            *window.entry(p?).or_insert(0) += 1;
        }
        let all: Vec<(String, u64)> = self.all_time.entries().collect::<Result<_>>()?;
        ctx.emit(format!("{} recent={} all={}", input.key_str(), top(window, self.n), top(all, self.n)));
        Ok(())
    }
}

export_operator!(Trending);
