//! Variable-length elements (strings, byte strings): which arrays hold them and how a read
//! of them is planned (`plan.rs`), the checked decoder of their encoded chunks
//! (`format.rs`), and the decode of one unit that reads and `check` share (`unit.rs`).

mod format;
mod plan;
mod unit;

pub(crate) use format::VlenIndex;
pub(crate) use plan::{VlenPlan, plan_vlen, vlen_chain, vlen_kind};
pub(crate) use unit::{UnitCodec, UnitFault};
