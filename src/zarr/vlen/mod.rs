//! Variable-length elements (strings, byte strings): which arrays hold them and how a read
//! of them is planned (`plan.rs`), and the checked decoder of their encoded chunks
//! (`format.rs`).

mod format;
mod plan;

pub(crate) use format::{VlenIndex, scan};
pub(crate) use plan::{VlenPlan, plan_vlen, vlen_kind};
