//! The Rust SDK for Weir operators.
//!
//! An operator is a type that implements [`Operator`], exported with
//! [`export_operator!`] from a `cdylib` crate built for `wasm32-wasip2`. The
//! host owns all state: handles such as [`ValueState`] read and write it
//! through the `weir:operator` WIT contract, scoped to the key of the element
//! being processed. Values are encoded with [postcard], a stable, compact
//! serde format; the encoding name `"postcard"` is recorded with each state.
//!
//! # Example: count words
//!
//! ```no_run
//! use weir_sdk::{export_operator, Context, Element, OpenContext, Operator, Result, ValueState};
//!
//! struct Counter {
//!     count: ValueState<u64>,
//! }
//!
//! impl Operator for Counter {
//!     fn open(ctx: &mut OpenContext) -> Result<Self> {
//!         Ok(Counter { count: ctx.value_state("count")? })
//!     }
//!
//!     fn process(&mut self, ctx: &mut Context, input: Element<'_>) -> Result<()> {
//!         let n = self.count.get()?.unwrap_or(0) + 1;
//!         self.count.set(&n)?;
//!         ctx.emit(format!("{} {n}", input.key_str()));
//!         Ok(())
//!     }
//! }
//!
//! export_operator!(Counter);
//! # fn main() {}
//! ```
//!
//! Build it with `cargo build --release --target wasm32-wasip2`; the `.wasm`
//! file under `target/wasm32-wasip2/release/` is the component a `job.toml`
//! names as `module`.
//!
//! [postcard]: https://docs.rs/postcard

#![deny(missing_docs)]

mod batch;
mod broadcast;
mod codec;
mod context;
mod error;
mod keyed;
#[cfg(feature = "nexmark")]
pub mod nexmark;
mod operator;
mod operator_state;
mod packed;
#[doc(hidden)]
pub mod runtime;

/// The bindings `wit-bindgen` generates for the `weir:operator` world. Use
/// them directly only for what the typed API does not cover.
#[allow(missing_docs, clippy::all)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../wit",
        world: "weir:operator/operator",
        pub_export_macro: true,
        export_macro_name: "__export_operator_world",
        default_bindings_module: "weir_sdk::bindings",
    });
}

pub use bindings::weir::operator::types::{OperatorInfo, Redistribution, TimeDomain, TtlUpdate, TtlVisibility};
pub use broadcast::BroadcastMapState;
pub use codec::{Descriptor, Ttl, convert_value};
pub use context::Element;
pub use context::{Context, OpenContext, Timer};
pub use error::{Error, Result};
pub use keyed::{AggregateFunction, AggregatingState, ListState, MapState, ReducingState, ValueState};
pub use operator::Operator;
pub use operator_state::OperatorListState;

/// Exports a type implementing [`Operator`] as the component's `handler`.
///
/// Use it once per crate, at the top level:
///
/// ```ignore
/// weir_sdk::export_operator!(MyOperator);
/// ```
#[macro_export]
macro_rules! export_operator {
    ($ty:ty) => {
        #[doc(hidden)]
        mod __weir_operator_export {
            use super::*;

            ::std::thread_local! {
                static INSTANCE: ::core::cell::RefCell<::core::option::Option<$ty>> =
                    const { ::core::cell::RefCell::new(None) };
            }

            pub struct Export;

            impl $crate::bindings::exports::weir::operator::handler::Guest for Export {
                fn open(info: $crate::OperatorInfo) -> ::core::result::Result<(), ::std::string::String> {
                    INSTANCE.with_borrow_mut(|slot| $crate::runtime::open::<$ty>(slot, info))
                }
                fn process(
                    input: $crate::bindings::weir::operator::types::Element,
                ) -> ::core::result::Result<(), ::std::string::String> {
                    INSTANCE.with_borrow_mut(|slot| $crate::runtime::process::<$ty>(slot, input))
                }
                fn process_batch(
                    inputs: $crate::bindings::weir::operator::types::ElementBatch,
                ) -> ::core::result::Result<(), ::std::string::String> {
                    INSTANCE.with_borrow_mut(|slot| $crate::runtime::process_batch::<$ty>(slot, inputs))
                }
                fn process_broadcast(
                    input: $crate::bindings::weir::operator::types::Element,
                ) -> ::core::result::Result<(), ::std::string::String> {
                    INSTANCE.with_borrow_mut(|slot| $crate::runtime::process_broadcast::<$ty>(slot, input))
                }
                fn on_timer(fired: $crate::bindings::exports::weir::operator::handler::Timer) -> ::core::result::Result<(), ::std::string::String> {
                    INSTANCE.with_borrow_mut(|slot| $crate::runtime::on_timer::<$ty>(slot, fired))
                }
                fn end_of_input() -> ::core::result::Result<(), ::std::string::String> {
                    INSTANCE.with_borrow_mut(|slot| $crate::runtime::end_of_input::<$ty>(slot))
                }
                fn migrate_value(
                    state: ::std::string::String,
                    from_version: u32,
                    value: ::std::vec::Vec<u8>,
                ) -> ::core::result::Result<::std::vec::Vec<u8>, ::std::string::String> {
                    $crate::runtime::migrate_value::<$ty>(&state, from_version, value)
                }
            }

            $crate::bindings::__export_operator_world!(Export with_types_in $crate::bindings);
        }
    };
}
