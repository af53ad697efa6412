//! What a request's work is: the units of a read or write (`units.rs`: the chunks or inner
//! chunks a subset touches), how a codec chain splits between the CPU and the device
//! (`codec_plan.rs`), chunk-aligned partitions of a request over devices (`partition.rs`),
//! and the text form of a subset (`subset.rs`).

mod codec_plan;
mod partition;
mod subset;
mod units;

pub(crate) use codec_plan::{ChainPlan, EncodedLayout, codec_names, transpose_order};
pub(crate) use partition::chunk_aligned_partitions;
pub use subset::parse_subset;
pub(super) use units::units_in;
pub(crate) use units::{Unit, UnitPlan, UnitSource, check_subset, plan_chunks, plan_units};
