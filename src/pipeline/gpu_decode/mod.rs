//! Decompression on the device: the device decoder's batches in one read
//! (`device_batches.rs`) and the parts it shares with the workers (`device_parts.rs`), how
//! batches are sized (`batch_plan.rs`), the queue the device and the CPU threads share
//! (`hybrid.rs`, tested against a simulated device in `hybrid_tests.rs`), what
//! `Decode::Auto` decides (`decode_choice.rs`) and the knobs a GPU run may set
//! (`tuning.rs`), the device side of a read's stage timings (`stage_clock.rs`) and the
//! device decoder's limits measured on their own (`resident_rate.rs`).

pub(super) mod batch_plan;
pub(super) mod decode_choice;
pub(super) mod device_batches;
pub(super) mod device_parts;
pub(super) mod hybrid;
#[cfg(test)]
mod hybrid_tests;
pub(super) mod resident_rate;
pub(super) mod stage_clock;
#[cfg(test)]
mod stage_clock_tests;
pub(super) mod tuning;
