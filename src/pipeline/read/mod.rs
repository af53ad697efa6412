//! The read core and the read routes: one read as one value, its units planned once
//! (`read_request.rs`); the one choice of its route (`choose_route.rs`); the core the sync and
//! async fronts call, which runs that route with the store's fetch stage (`read_core.rs`); the
//! routes: small reads, sync and async (`small_read.rs`, `small_read_async.rs`), zarrs'
//! decode-into (`direct_read.rs`) and the staged read — its driver, which produces each unit
//! on a worker (`read_driver.rs`), what every staged route shares (`staged_read.rs`), the one
//! choice of its own route (`read_route.rs`), the host route (`host_scatter.rs`) and the
//! general route over a ring of staging slots (`slot_ring.rs`), the scatters into the output
//! (`scatter.rs`); reads of variable-length arrays (`varlen_read.rs`); and the memory limit
//! of a read's new output (`output_limit.rs`).

pub(super) mod choose_route;
pub(super) mod direct_read;
pub(super) mod host_scatter;
pub(super) mod output_limit;
pub(super) mod read_core;
pub(super) mod read_driver;
pub(super) mod read_request;
pub(super) mod read_route;
pub(super) mod scatter;
pub(super) mod slot_ring;
pub(super) mod small_read;
pub(super) mod small_read_async;
pub(super) mod staged_read;
pub(super) mod varlen_read;
