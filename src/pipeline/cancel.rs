//! Cancellation of async reads and writes whose futures were dropped.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Sets a flag when dropped: tells the blocking half of a read or write that its future is gone.
pub(crate) struct CancelOnDrop(pub Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}
