//! The tokio runtime of the extension's async arrays, one per process.

use std::sync::{Mutex, OnceLock};

/// The runtime that drives object-store reads and writes (built on first use, once per
/// process). A child of `fork()` (a PyTorch DataLoader worker, a multiprocessing pool)
/// inherits the parent's runtime without its threads, where every call would wait forever,
/// so it builds its own; the parent's stays there unused (dropping it would wait for
/// threads that do not exist in the child).
pub(crate) fn runtime() -> zarrbuf::Result<&'static tokio::runtime::Runtime> {
    type Built = std::result::Result<tokio::runtime::Runtime, String>;
    fn build() -> Built {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())
    }
    fn ok(rt: &'static Built) -> zarrbuf::Result<&'static tokio::runtime::Runtime> {
        rt.as_ref().map_err(|e| {
            zarrbuf::Error::InvalidArgument(format!("cannot start the tokio runtime: {e}"))
        })
    }
    static FIRST: OnceLock<(u32, Built)> = OnceLock::new();
    static FORKED: Mutex<Option<(u32, &'static Built)>> = Mutex::new(None);
    let pid = std::process::id();
    let (first_pid, first) = FIRST.get_or_init(|| (pid, build()));
    if *first_pid == pid {
        return ok(first);
    }
    let mut forked = FORKED.lock().unwrap_or_else(|p| p.into_inner());
    match *forked {
        Some((p, rt)) if p == pid => ok(rt),
        _ => {
            let rt: &'static Built = Box::leak(Box::new(build()));
            *forked = Some((pid, rt));
            ok(rt)
        }
    }
}
