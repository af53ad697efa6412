//! Variable-length elements (strings, byte strings): which arrays hold them and how a read
//! of them is planned (`plan.rs`), the checked decoder of their encoded chunks
//! (`format.rs`), the decode of one unit that reads and `check` share (`unit.rs`), the
//! encoder of one chunk of a write (`encode.rs`), and how `zarrbuf info` describes them and
//! the metadata zarr-python reads for new byte-string arrays (`info.rs`).

mod encode;
mod format;
mod info;
mod plan;
mod unit;

pub(crate) use encode::{ElementSink, VlenEncoder, VlenGather, encodes_vlen_itself};
pub(crate) use format::VlenIndex;
pub(super) use info::zarr_python_bytes_metadata;
pub use info::{VarLenInfo, describe_varlen, varlen_kind};
pub(crate) use info::{invalid_utf8, require_vlen, zarr_name};
pub(crate) use plan::{VlenPlan, plan_vlen, vlen_chain, vlen_kind};
pub(crate) use unit::{UnitCodec, UnitFault};
