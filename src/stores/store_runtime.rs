//! The process-wide tokio runtime that object-store and icechunk requests of the synchronous
//! API run on, and how a synchronous caller waits for one: the future is polled on the
//! calling thread with that runtime's context entered (its worker threads drive the network
//! and timers), not by the runtime's own `block_on`, so the wait may happen on any thread —
//! also inside another tokio runtime, where `Runtime::block_on` would panic, or inside
//! another executor's `block_on`.

use crate::errors::{Error, Result};
use crate::process_local::ProcessLocal;
use std::sync::Arc;
use zarrs::storage::storage_adapter::async_to_sync::AsyncToSyncBlockOn;

/// The runtime every blocking URL store runs its requests on.
pub(crate) fn runtime() -> Result<&'static tokio::runtime::Runtime> {
    // One per process: a forked child (a DataLoader worker) inherits the parent's runtime
    // without its threads, where every request would wait forever.
    static RT: ProcessLocal<std::result::Result<tokio::runtime::Runtime, String>> =
        ProcessLocal::new(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("zarrbuf-store")
                .enable_all()
                .build()
                .map_err(|e| e.to_string())
        });
    RT.get().as_ref().map_err(|e| {
        Error::InvalidArgument(format!(
            "cannot start the tokio runtime for object stores: {e}"
        ))
    })
}

/// Waits for a store future on the calling thread (see the module docs).
pub(crate) struct WaitOnRuntime(pub(crate) tokio::runtime::Handle);

impl WaitOnRuntime {
    /// Waits on the process-wide store runtime.
    pub(crate) fn new() -> Result<Self> {
        Ok(WaitOnRuntime(runtime()?.handle().clone()))
    }
}

impl AsyncToSyncBlockOn for WaitOnRuntime {
    fn block_on<F: core::future::Future>(&self, future: F) -> F::Output {
        let _context = self.0.enter();
        park_until_ready(future)
    }
}

/// Runs `future` with the store runtime's context entered and waits for it on this thread
/// (any thread, also inside another runtime).
pub(crate) fn wait<F: core::future::Future>(future: F) -> Result<F::Output> {
    Ok(WaitOnRuntime::new()?.block_on(future))
}

/// Polls `future` on this thread until it is ready, parking between polls.
///
/// Unlike `futures::executor::block_on` it may be nested: a caller that is itself polled by
/// the futures executor (user code, or a listing over a synchronous source) reaches a store
/// call that waits here, where the futures executor would panic ("cannot execute
/// `LocalPool` executor from within another executor").
fn park_until_ready<F: core::future::Future>(future: F) -> F::Output {
    use std::task::{Context, Poll, Wake, Waker};
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
        std::thread::park();
    }
}

#[cfg(test)]
mod tests {
    use super::park_until_ready;

    #[test]
    fn waits_nest_inside_another_executor() {
        let (tx, rx) = futures::channel::oneshot::channel::<u32>();
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(20));
            let _ = tx.send(7);
        });
        // futures' own block_on would panic on the inner wait.
        let got = futures::executor::block_on(async { park_until_ready(rx) });
        assert_eq!(got, Ok(7));
    }
}
