//! The cases zarrbuf's tests and its GPU check binary share, written once:
//!
//! - [`conformance`]: the conformance cases for Buffer / NDBuffer / BufferPrototype;
//! - [`soundness`]: the soundness cases, each a defect the safe API once had;
//! - [`variants`]: the read benchmark's arrays and the readers compared on them.
//!
//! zarrbuf's integration tests (`tests/it/conformance.rs`, `tests/it/soundness.rs`) run every
//! case on the prototypes of the machine, one `#[test]` per case, generated from the case
//! lists [`conformance_cases!`] and [`soundness_cases!`]; `benches/read.rs` measures the
//! variants on the CPU; `zarrbuf-gpucheck` (tests/gpucheck/) runs every case on pinned and
//! CUDA memory of a real GPU and the benchmark into it. Unpublished.

// The crate is empty in its own unit-test build, which `cargo test --all-targets` makes in
// spite of `test = false`: the cases run from the crates above, and compiling them here too
// would link the whole dependency tree into one more test executable (~70 MB, for no test).
#![cfg(not(test))]

use zarrbuf::{BufferPrototype, Error};

/// A conformance or soundness case: runs against one prototype and says what went wrong.
pub type Case = fn(&BufferPrototype) -> Result<(), String>;

/// Returns `Err` with the formatted message when the condition does not hold.
macro_rules! ensure {
    ($cond:expr, $($msg:tt)*) => {
        if !$cond {
            return Err(format!($($msg)*));
        }
    };
}

pub mod conformance;
pub mod soundness;
pub mod variants;

/// A zarrbuf error as a case's failure message.
fn e(err: Error) -> String {
    err.to_string()
}
