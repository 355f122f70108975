//! Nexmark q3, local item suggestion: who sells category-10 items in
//! Oregon, Idaho or California.
//!
//! ```sql
//! SELECT P.name, P.city, P.state, A.id
//! FROM auction A INNER JOIN person P ON A.seller = P.id
//! WHERE A.category = 10 AND (P.state = 'or' OR P.state = 'id' OR P.state = 'ca');
//! ```
//!
//! The generator writes states in lower case, so they are compared in lower
//! case. Output: one line per matching (auction, person),
//! `name,city,state,auction_id`.
//!
//! A regular (unwindowed) inner join, keyed by person id: the job reads
//! persons and auctions only, auctions keyed by `seller`. Either side may
//! arrive first (source subtasks interleave freely, and an auction's seller
//! may be a person generated a little later), so per key the operator keeps
//! one value, [`Seller`]:
//! - absent: nothing seen yet;
//! - `Waiting`: category-10 auctions arrived before the person; their ids
//!   wait in list state `waiting` (read only when the person comes);
//! - `Match(prefix)`: the person arrived and is in a wanted state; `prefix`
//!   is `name,city,state,` ready to write, so a later auction costs one
//!   value read and one output line;
//! - `NoMatch`: the person arrived in another state; later auctions drop.
//!
//! Auctions of other categories are dropped before any state is touched.
//! Each person id occurs once in the stream, so a person's value is final
//! when set. As in the SQL's unwindowed join, nothing is ever forgotten: the
//! state holds one small value per person (and the waiting auctions of a
//! seller who never registers), growing with the number of persons.

use serde::{Deserialize, Serialize};
use weir_sdk::nexmark::Event;
use weir_sdk::{Context, Element, ListState, OpenContext, Operator, Result, ValueState, export_operator};

/// The category whose auctions are joined.
const CATEGORY: u64 = 10;

/// What is known of the current person id.
#[derive(Serialize, Deserialize)]
enum Seller {
    /// Category-10 auctions wait in list state; the person has not come.
    Waiting,
    /// The person matches; `name,city,state,` to prefix each auction id.
    Match(String),
    /// The person is in another state.
    NoMatch,
}

struct Join {
    seller: ValueState<Seller>,
    /// Ids of the category-10 auctions that came before their seller.
    waiting: ListState<u64>,
}

fn wanted(state: &str) -> bool {
    matches!(state, "or" | "id" | "ca")
}

fn emit(ctx: &mut Context, prefix: &str, auction: u64, timestamp: Option<i64>) {
    ctx.emit_with(None, timestamp, |out| {
        out.extend_from_slice(prefix.as_bytes());
        out.extend_from_slice(itoa::Buffer::new().format(auction).as_bytes());
    });
}

impl Operator for Join {
    fn open(ctx: &mut OpenContext) -> Result<Self> {
        Ok(Join { seller: ctx.value_state("seller")?, waiting: ctx.list_state("waiting")? })
    }

    fn process(&mut self, ctx: &mut Context, input: Element<'_>) -> Result<()> {
        match Event::decode(input.payload)? {
            Event::Auction(a) if a.category == CATEGORY => match self.seller.get()? {
                Some(Seller::Match(prefix)) => emit(ctx, &prefix, a.id, input.timestamp),
                Some(Seller::NoMatch) => {}
                Some(Seller::Waiting) => self.waiting.add(&a.id)?,
                None => {
                    self.waiting.add(&a.id)?;
                    self.seller.set(&Seller::Waiting)?;
                }
            },
            Event::Person(p) => {
                let known = if wanted(&p.state) {
                    Seller::Match(format!("{},{},{},", p.name, p.city, p.state))
                } else {
                    Seller::NoMatch
                };
                if let Some(Seller::Waiting) = self.seller.get()? {
                    if let Seller::Match(prefix) = &known {
                        for id in self.waiting.iter() {
                            emit(ctx, prefix, id?, input.timestamp);
                        }
                    }
                    self.waiting.clear()?;
                }
                self.seller.set(&known)?;
            }
            _ => {}
        }
        Ok(())
    }
}

export_operator!(Join);
