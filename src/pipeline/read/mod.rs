//! The staged read and the other read routes: what every route of a staged read shares
//! (`staged_read.rs`), the one choice of its route (`read_route.rs`), the host route
//! (`host_scatter.rs`) and the general route over a ring of staging slots (`slot_ring.rs`),
//! the scatters into the output (`scatter.rs`); the read driver, which plans a request's
//! units and produces each on a worker (`read_driver.rs`); small reads, sync and async
//! (`small_read.rs`, `small_read_async.rs`); reads of variable-length arrays
//! (`varlen_read.rs`); and the memory limit of a read's new output (`output_limit.rs`).

pub(super) mod host_scatter;
pub(super) mod output_limit;
pub(super) mod read_driver;
pub(super) mod read_route;
pub(super) mod scatter;
pub(super) mod slot_ring;
pub(super) mod small_read;
pub(super) mod small_read_async;
pub(super) mod staged_read;
pub(super) mod varlen_read;
