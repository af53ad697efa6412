//! Process-wide values that a forked child builds afresh instead of inheriting.
//!
//! `fork()` copies a process's memory but only the calling thread. Whatever the parent's
//! other threads were doing at that moment is frozen in the child's copy: a lock one of them
//! held stays locked forever, a fetch one of them was leading (a flight in
//! [`crate::pipeline`]'s single-flight table) never finishes, a thread pool or tokio runtime
//! has bookkeeping but no threads. A child that touched such a value — a PyTorch DataLoader
//! worker, a `multiprocessing` pool on Linux — would wait forever.
//!
//! A [`ProcessLocal`] holds one value per process: the first use in a process builds it, and
//! a use in a forked child finds the parent's copy stamped with another process id and builds
//! its own, never touching (not even locking) the inherited one. Values are leaked, never
//! dropped: the parent's copy in a child may hold locks or handles of threads that do not
//! exist there, and one value per process and per fork is a few hundred bytes.

use std::sync::atomic::{AtomicPtr, Ordering};

/// One value of `T` per process (see the module docs); meant for `static`s.
pub(crate) struct ProcessLocal<T: 'static> {
    current: AtomicPtr<Owned<T>>,
    build: fn() -> T,
}

/// A value and the process that built it.
struct Owned<T> {
    pid: u32,
    value: T,
}

impl<T: Send + Sync + 'static> ProcessLocal<T> {
    /// A slot whose value `build` makes on first use in each process.
    pub(crate) const fn new(build: fn() -> T) -> Self {
        ProcessLocal {
            current: AtomicPtr::new(std::ptr::null_mut()),
            build,
        }
    }

    /// This process's value, built now if this process has none yet.
    pub(crate) fn get(&self) -> &T {
        let pid = std::process::id();
        let seen = self.current.load(Ordering::Acquire);
        if let Some(owned) = Self::deref(seen)
            && owned.pid == pid
        {
            return &owned.value;
        }
        // None yet in this process (first use, or the parent's copy after a fork): build one
        // and install it, unless another thread of this process installed one meanwhile.
        let fresh = Box::into_raw(Box::new(Owned {
            pid,
            value: (self.build)(),
        }));
        match self
            .current
            .compare_exchange(seen, fresh, Ordering::AcqRel, Ordering::Acquire)
        {
            // `seen` (null, or the parent's copy) is left as it is: leaked on purpose.
            Ok(_) => match Self::deref(fresh) {
                Some(owned) => &owned.value,
                None => self.get(),
            },
            Err(_) => {
                // SAFETY: `fresh` came from `Box::into_raw` just above and was never shared
                // (the exchange failed), so this is its only owner.
                drop(unsafe { Box::from_raw(fresh) });
                // Another thread of this process installed its value: take that one.
                self.get()
            }
        }
    }

    /// The value behind a pointer this slot stored (null: none).
    fn deref<'a>(p: *mut Owned<T>) -> Option<&'a Owned<T>> {
        // SAFETY: every non-null pointer in `current` came from `Box::into_raw` and is never
        // freed (values are leaked: see the module docs), and the `Acquire` load that read
        // it pairs with the `AcqRel` exchange that published it, so it points at a fully
        // built `Owned<T>` that lives for the rest of the process.
        unsafe { p.as_ref() }
    }
}

/// The process a value was made in: a forked child that finds itself dropping a value its
/// parent made (garbage a DataLoader worker inherited) must not wait for the parent's
/// threads or take locks they may hold — it leaves the value alone instead.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MadeIn(u32);

impl MadeIn {
    /// Stamps a value made now, in this process.
    pub(crate) fn here() -> Self {
        MadeIn(std::process::id())
    }

    /// Whether this is a forked child of the process the value was made in.
    pub(crate) fn is_another_process(self) -> bool {
        self.0 != std::process::id()
    }
}

#[cfg(test)]
mod tests {
    use super::ProcessLocal;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    static BUILT: AtomicUsize = AtomicUsize::new(0);
    static SLOT: ProcessLocal<Mutex<Vec<u32>>> = ProcessLocal::new(|| {
        BUILT.fetch_add(1, Ordering::SeqCst);
        Mutex::new(Vec::new())
    });

    #[test]
    fn one_value_per_process_whatever_the_threads() {
        std::thread::scope(|s| {
            for i in 0..8 {
                s.spawn(move || SLOT.get().lock().unwrap().push(i));
            }
        });
        assert_eq!(SLOT.get().lock().unwrap().len(), 8);
        assert!(std::ptr::eq(SLOT.get(), SLOT.get()));
        // Racing first uses may build more than one, but only one is ever installed.
        assert!(BUILT.load(Ordering::SeqCst) >= 1);
    }

    #[test]
    fn a_forked_child_builds_its_own_and_never_waits_on_the_parents() {
        static HELD: ProcessLocal<Mutex<u32>> = ProcessLocal::new(|| Mutex::new(7));
        let parent = HELD.get();
        // The parent holds the lock across the fork, as one of its threads might.
        let guard = parent.lock().unwrap();
        // SAFETY: the child only calls async-signal-safe-enough code that takes no lock the
        // parent holds (a fresh allocation, its own mutex) and leaves with `_exit`.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            let mine = HELD.get();
            let ok = !std::ptr::eq(mine, parent) && mine.try_lock().is_ok_and(|v| *v == 7);
            // SAFETY: `_exit` ends the child without running the parent's atexit handlers.
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        drop(guard);
        let mut status = 0;
        // SAFETY: `pid` is this process's child; `status` is a valid out-pointer.
        let waited = unsafe { libc::waitpid(pid, &mut status, 0) };
        assert_eq!(waited, pid);
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "child saw the parent's value or hung: {status}"
        );
    }
}
