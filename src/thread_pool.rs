//! zarrbuf's own rayon pool: one per process, rebuilt in a forked child.
//!
//! rayon's global pool does not survive `fork()`. A child forked after the parent's pool had
//! started (a PyTorch DataLoader worker, Python's `multiprocessing` on Linux) inherits the
//! pool's bookkeeping but none of its threads, and its first parallel call waits forever for
//! workers that do not exist. zarrbuf's parallel work (decoding the chunks of a read,
//! encoding those of a write, and the rayon work zarrs does inside them) therefore runs on a
//! pool that belongs to the process that uses it: [`install`] looks the pool up by process
//! id, builds a new one the first time a process asks, and runs the work inside it, so every
//! `par_iter` underneath runs on live threads.

use crate::process_local::ProcessLocal;
use std::sync::Arc;

/// The pool of this process; a forked child builds its own and leaves the parent's, whose
/// threads it does not have, alone (see [`ProcessLocal`]).
static POOL: ProcessLocal<Option<Arc<rayon::ThreadPool>>> = ProcessLocal::new(build);

fn build() -> Option<Arc<rayon::ThreadPool>> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("zarrbuf-{i}"))
        .build()
        .ok()
        .map(Arc::new)
}

/// This process's pool; `None` when no thread could be started (then work runs where it is).
fn pool() -> Option<Arc<rayon::ThreadPool>> {
    POOL.get().clone()
}

/// Runs `op` inside this process's pool (directly when the calling thread is one of its
/// workers), so that rayon's parallel iterators under it use threads that exist.
pub fn install<R: Send>(op: impl FnOnce() -> R + Send) -> R {
    match pool() {
        Some(pool) => pool.install(op),
        None => op(),
    }
}

/// Runs `op` on the calling thread inside a rayon scope whose spawned jobs go to this
/// process's pool (rayon's `in_place_scope` on it): no hand-off for the caller's own share.
pub fn in_place_scope<'scope, R>(op: impl FnOnce(&rayon::Scope<'scope>) -> R) -> R {
    match pool() {
        Some(pool) => pool.in_place_scope(op),
        None => rayon::in_place_scope(op),
    }
}

/// How many threads [`install`]'s pool has (at least 1).
pub fn threads() -> usize {
    pool().map_or(1, |p| p.current_num_threads())
}

#[cfg(test)]
mod tests {
    use rayon::prelude::*;

    #[test]
    fn work_runs_on_the_process_pool() {
        let names: Vec<String> = super::install(|| {
            (0..64)
                .into_par_iter()
                .map(|_| std::thread::current().name().unwrap_or("").to_string())
                .collect()
        });
        assert!(names.iter().all(|n| n.starts_with("zarrbuf-")), "{names:?}");
        assert!(super::threads() >= 1);
    }

    #[test]
    fn nested_install_runs_inline() {
        let sum: u64 = super::install(|| super::install(|| (0..1000u64).into_par_iter().sum()));
        assert_eq!(sum, 499_500);
    }
}
