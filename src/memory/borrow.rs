//! A thread-safe borrow flag per storage: many host readers or one writer.
//!
//! Buffers are shared handles (clones and views see the same memory, like numpy views), so
//! Rust's borrow checker cannot see two handles to one allocation. This flag makes the
//! `&[u8]` that [`crate::Buffer::as_host_bytes`] hands out sound: while it lives, writes
//! through any other handle fail with [`crate::Error::Busy`] instead of racing.

use crate::errors::{Error, Result};
use std::sync::atomic::{AtomicIsize, Ordering};

/// `n > 0`: n readers; `-1`: one writer; `0`: free.
#[derive(Default)]
pub(crate) struct BorrowFlag(AtomicIsize);

/// Proof of shared access; released on drop.
pub(crate) struct ReadGuard<'a>(&'a AtomicIsize);

/// Proof of exclusive access; released on drop.
pub(crate) struct WriteGuard<'a>(&'a AtomicIsize);

impl BorrowFlag {
    pub(crate) fn read(&self) -> Result<ReadGuard<'_>> {
        let mut current = self.0.load(Ordering::Acquire);
        loop {
            if current < 0 {
                return Err(Error::Busy(
                    "the buffer is being written by another handle; wait for that write to finish"
                        .into(),
                ));
            }
            match self.0.compare_exchange_weak(
                current,
                current + 1,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Ok(ReadGuard(&self.0)),
                Err(actual) => current = actual,
            }
        }
    }

    pub(crate) fn write(&self) -> Result<WriteGuard<'_>> {
        match self
            .0
            .compare_exchange(0, -1, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => Ok(WriteGuard(&self.0)),
            Err(n) if n > 0 => Err(Error::Busy(format!(
                "{n} host view(s) of this memory are borrowed (from `as_host_bytes` or `as_ndarray`); drop them before writing"
            ))),
            Err(_) => Err(Error::Busy(
                "another write to this memory is in progress; writes to one allocation cannot overlap"
                    .into(),
            )),
        }
    }
}

impl Drop for ReadGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Drop for WriteGuard<'_> {
    fn drop(&mut self) {
        self.0.store(0, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readers_exclude_writer_and_back() {
        let flag = BorrowFlag::default();
        let r1 = flag.read().unwrap();
        let r2 = flag.read().unwrap();
        assert!(flag.write().is_err());
        drop((r1, r2));
        let w = flag.write().unwrap();
        assert!(flag.read().is_err());
        assert!(flag.write().is_err());
        drop(w);
        assert!(flag.read().is_ok());
    }
}
