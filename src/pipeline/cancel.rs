//! Cancellation of async reads and writes whose futures were dropped.
//!
//! An async read or write runs its pipeline on a blocking thread. Dropping the future
//! cancels it: the blocking half stops at its next unit, and a fetch or put in flight is
//! abandoned at once. The drop then waits until the blocking half has stopped, so once the
//! future is gone nothing writes into the caller's buffer (or reads its data) any more.

use crate::errors::{Error, Result};
use crate::process_local::MadeIn;
use std::sync::{Arc, Condvar, Mutex};
use tokio::sync::watch;

/// What the future and its blocking half share.
pub(crate) struct Cancel {
    stop: watch::Sender<bool>,
    finished: Mutex<bool>,
    finished_cv: Condvar,
    /// The blocking half runs on a thread of this process only.
    made_in: MadeIn,
}

impl Cancel {
    /// A new link, with the guards for both halves: `StopOnDrop` for the future, and
    /// `FinishOnDrop` to move into the blocking closure (dropped with it even if it never
    /// runs, so the future's drop cannot wait forever).
    pub(crate) fn pair() -> (StopOnDrop, FinishOnDrop) {
        let cancel = Arc::new(Cancel {
            stop: watch::Sender::new(false),
            finished: Mutex::new(false),
            finished_cv: Condvar::new(),
            made_in: MadeIn::here(),
        });
        (StopOnDrop(cancel.clone()), FinishOnDrop(cancel))
    }

    /// Errs once the future was dropped.
    pub(crate) fn check(&self, what: &str) -> Result<()> {
        if *self.stop.borrow() {
            return Err(Error::Cancelled(format!("the {what} future was dropped")));
        }
        Ok(())
    }

    /// Runs `fut` to completion unless the future is dropped first.
    pub(crate) async fn unless_dropped<T>(
        &self,
        what: &str,
        fut: impl Future<Output = Result<T>>,
    ) -> Result<T> {
        let mut stop = self.stop.subscribe();
        tokio::select! {
            r = fut => r,
            _ = stop.wait_for(|s| *s) => {
                Err(Error::Cancelled(format!("the {what} future was dropped")))
            }
        }
    }
}

/// Held by the future: on drop, cancels the blocking half and waits until it has stopped.
pub(crate) struct StopOnDrop(Arc<Cancel>);

impl StopOnDrop {
    /// Asks the blocking half to stop now, without waiting (the drop still waits): a stream
    /// signals all its reads first, so they stop together.
    pub(crate) fn signal(&self) {
        self.0.stop.send_replace(true);
    }
}

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        if self.0.made_in.is_another_process() {
            // A forked child dropping its parent's future: the blocking half ran on a parent
            // thread that does not exist here and will never finish, and nothing in this
            // process writes into the future's buffers. Waiting would hang (a DataLoader
            // worker collecting inherited garbage); there is nothing to wait for.
            return;
        }
        self.0.stop.send_replace(true);
        let mut finished = self.0.finished.lock().unwrap_or_else(|p| p.into_inner());
        while !*finished {
            finished = self
                .0
                .finished_cv
                .wait(finished)
                .unwrap_or_else(|p| p.into_inner());
        }
    }
}

/// Held by the blocking half: marks it stopped when dropped (returned, panicked, or never run).
pub(crate) struct FinishOnDrop(Arc<Cancel>);

impl FinishOnDrop {
    pub(crate) fn cancel(&self) -> &Cancel {
        &self.0
    }
}

impl Drop for FinishOnDrop {
    fn drop(&mut self) {
        *self.0.finished.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.0.finished_cv.notify_all();
    }
}
