//! A test operator for state TTL. Input: jsonl `{"k": KEY, "op": "set", "v":
//! VALUE}` or `{"k": KEY, "op": "get"}`, keyed by `k`. `set` writes the value
//! to a `ValueState<String>` and a `MapState` entry, both with a TTL of param
//! `ttl_ms`; `get` emits `KEY value=<v|none> map=<v|none>`.

use std::time::Duration;
use weir_sdk::{
    Context, Descriptor, Element, Error, MapState, OpenContext, Operator, Result, Ttl, ValueState, export_operator,
};

struct TtlProbe {
    value: ValueState<String>,
    map: MapState<String, String>,
}

/// The string value of `"field": "..."` in a flat JSON object.
fn field<'a>(json: &'a str, name: &str) -> Option<&'a str> {
    let at = json.find(&format!("\"{name}\""))? + name.len() + 2;
    let rest = json[at..].trim_start().strip_prefix(':')?.trim_start().strip_prefix('"')?;
    rest.split('"').next()
}

impl Operator for TtlProbe {
    fn open(ctx: &mut OpenContext) -> Result<Self> {
        let ttl = Ttl::new(Duration::from_millis(ctx.param_or("ttl_ms", 1000u64)?));
        Ok(TtlProbe {
            value: ctx.value_state(Descriptor::new("value").ttl(ttl))?,
            map: ctx.map_state(Descriptor::new("map").ttl(ttl))?,
        })
    }

    fn process(&mut self, ctx: &mut Context, input: Element<'_>) -> Result<()> {
        let line = input.payload_str();
        let key = input.key_str().into_owned();
        match field(&line, "op") {
            Some("set") => {
                let v = field(&line, "v").ok_or_else(|| Error::msg(format!("set without v: {line}")))?.to_string();
                self.value.set(&v)?;
                self.map.put(&"entry".to_string(), &v)?;
            }
            Some("get") => {
                let value = self.value.get()?.unwrap_or_else(|| "none".into());
                let entry = self.map.get(&"entry".to_string())?.unwrap_or_else(|| "none".into());
                ctx.emit(format!("{key} value={value} map={entry}"));
            }
            _ => return Err(Error::msg(format!("bad probe {line}"))),
        }
        Ok(())
    }
}

export_operator!(TtlProbe);
