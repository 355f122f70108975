//! The parts of the reference Nexmark SQL that several queries share,
//! written once: `DATE_FORMAT` of an event time in UTC ([`calendar`]: q10,
//! q15, q16, q17), the bid statistics reports' price ranks with their
//! distinct counts ([`ranks`]: q15, q16, q17), and a bid's columns as a
//! line ([`columns`]: q18, q19, q20).

pub mod calendar;
pub mod columns;
pub mod ranks;
