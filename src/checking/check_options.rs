//! The options of a check ([`CheckOptions`]).

use crate::options::{Progress, ProgressFn};
use crate::stores::OpenOptions;
use std::sync::Arc;

/// Options for [`check_array`](super::check_array).
///
/// ```
/// let o = zarrbuf::options::CheckOptions::default().with_repair(true).with_concurrency(2);
/// assert!(o.repair);
/// ```
#[derive(Clone, Default)]
pub struct CheckOptions {
    /// Remove leftovers (of writers that are gone) and undecodable chunks, and rewrite
    /// shards without their damaged inner chunks (default false: only report); holds the
    /// array's write lock while it checks and repairs.
    pub repair: bool,
    /// Threads decoding chunks (default: all cores).
    pub concurrency: Option<usize>,
    /// Requests to an object store kept in flight (`None`: `ZARRBUF_IO_CONCURRENCY`, else
    /// 128, more for small chunks; see [`CheckOptions::with_io_concurrency`]).
    pub io_concurrency: Option<usize>,
    /// Called as chunks are checked.
    pub progress: Option<ProgressFn>,
    /// How the store is opened: the version of an icechunk repository to check (default
    /// the tip of branch `main`).
    pub open: OpenOptions,
}

impl CheckOptions {
    /// Repairs what the check finds (see [`CheckOptions::repair`]).
    pub fn with_repair(mut self, repair: bool) -> Self {
        self.repair = repair;
        self
    }

    /// Sets the number of decoding threads (at least 1).
    pub fn with_concurrency(mut self, n: usize) -> Self {
        self.concurrency = Some(n.max(1));
        self
    }

    /// Keeps up to `n` requests to an object store in flight (at least 1, at most 1024), as
    /// [`ReadOptions::with_io_concurrency`](crate::options::ReadOptions::with_io_concurrency)
    /// does for reads: a check of an object store fetches chunks ahead of the decoding
    /// threads, with at most 256 MiB (or a quarter of the memory this process may still
    /// take) fetched and not yet checked. Local stores are read by the decoding threads
    /// themselves and ignore this.
    ///
    /// ```
    /// let o = zarrbuf::options::CheckOptions::default().with_io_concurrency(32);
    /// assert_eq!(o.io_concurrency, Some(32));
    /// ```
    pub fn with_io_concurrency(mut self, n: usize) -> Self {
        self.io_concurrency = Some(n.max(1));
        self
    }

    /// Sets a progress callback.
    pub fn with_progress(mut self, f: impl Fn(Progress) + Send + Sync + 'static) -> Self {
        self.progress = Some(Arc::new(f));
        self
    }

    /// Opens the store with `open` (an icechunk repository's version).
    ///
    /// ```
    /// let o = zarrbuf::options::CheckOptions::default().with_open(zarrbuf::options::OpenOptions::default().with_tag("v1"));
    /// assert!(o.open.version.is_some());
    /// ```
    pub fn with_open(mut self, open: OpenOptions) -> Self {
        self.open = open;
        self
    }
}
