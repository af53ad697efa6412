//! A copy's blocks read one ahead of their writes.
//!
//! Copying block by block (read a block, write it, read the next) leaves the source idle
//! while the destination stores and the destination idle while the source fetches: at an
//! object store's latency each block pays both round trips in turn. Here a reader thread
//! reads block `i + 1` while the calling thread writes block `i`; it hands each block over
//! a rendezvous channel, so at most two blocks are held at once (the one being written, the
//! one read and waiting), which is what the block size is chosen for. Blocks are written in
//! order on the calling thread; the first error stops both sides, and every block written
//! before it stays written.

use crate::errors::Result;
use std::sync::Mutex;
use std::sync::mpsc::sync_channel;

/// Reads each of `blocks` with `read` one block ahead of writing it with `write` (see the
/// module docs). `read` answers `None` for a block to skip; `write` gets it all the same
/// (to count it). Falls back to reading and writing in turn when no thread can start.
pub(super) fn read_ahead_of_writes<B, D>(
    blocks: impl Iterator<Item = B> + Send,
    read: impl Fn(&B) -> Result<Option<D>> + Sync,
    mut write: impl FnMut(&B, Option<D>) -> Result<()>,
) -> Result<()>
where
    B: Send,
    D: Send,
{
    // Taken by the reader when it starts; still here if no thread could start.
    let blocks = Mutex::new(Some(blocks));
    let read = &read;
    let outcome = std::thread::scope(|scope| {
        // Capacity 0: the reader holds a read block until the writer takes it.
        let (tx, rx) = sync_channel::<(B, Result<Option<D>>)>(0);
        let blocks = &blocks;
        let reader = std::thread::Builder::new()
            .name("zarrbuf-copy-read".into())
            .spawn_scoped(scope, move || {
                let taken = blocks.lock().unwrap_or_else(|p| p.into_inner()).take();
                for block in taken.into_iter().flatten() {
                    let data = read(&block);
                    let failed = data.is_err();
                    // The writer stopped (an error): nothing more to read.
                    if tx.send((block, data)).is_err() || failed {
                        break;
                    }
                }
            })
            .ok()?;
        let mut outcome = Ok(());
        for (block, data) in rx.iter() {
            if let Err(e) = data.and_then(|d| write(&block, d)) {
                outcome = Err(e);
                break;
            }
        }
        // The reader's next send fails now, and it stops.
        drop(rx);
        if let Err(panic) = reader.join() {
            std::panic::resume_unwind(panic);
        }
        Some(outcome)
    });
    if let Some(outcome) = outcome {
        return outcome;
    }
    // No reader thread: read and write in turn.
    let taken = blocks.into_inner().unwrap_or_else(|p| p.into_inner());
    for block in taken.into_iter().flatten() {
        let data = read(&block)?;
        write(&block, data)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::read_ahead_of_writes;
    use crate::Error;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn blocks_are_written_in_order_and_at_most_two_are_held() {
        let held = AtomicUsize::new(0);
        let most = AtomicUsize::new(0);
        let mut written = Vec::new();
        read_ahead_of_writes(
            0..50u32,
            |&b| {
                let now = held.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                Ok((b % 7 != 3).then_some(b * 10))
            },
            |&b, d| {
                assert_eq!(d, (b % 7 != 3).then_some(b * 10));
                written.push(b);
                held.fetch_sub(1, Ordering::SeqCst);
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(written, (0..50).collect::<Vec<_>>());
        // The one being written, and the one read and waiting to be taken.
        assert!(
            most.load(Ordering::SeqCst) <= 2,
            "{}",
            most.load(Ordering::SeqCst)
        );
    }

    #[test]
    fn the_first_error_of_either_side_stops_the_copy_after_the_blocks_before_it() {
        let reads = AtomicUsize::new(0);
        let mut written = Vec::new();
        let e = read_ahead_of_writes(
            0..100u32,
            |&b| {
                reads.fetch_add(1, Ordering::SeqCst);
                if b == 5 {
                    Err(Error::InvalidArgument("bad block 5".into()))
                } else {
                    Ok(Some(b))
                }
            },
            |&b, _| {
                written.push(b);
                Ok(())
            },
        )
        .unwrap_err();
        assert!(e.to_string().contains("bad block 5"), "{e}");
        assert_eq!(written, vec![0, 1, 2, 3, 4]);
        assert_eq!(reads.load(Ordering::SeqCst), 6);
        let mut written = Vec::new();
        let e = read_ahead_of_writes(
            0..100u32,
            |&b| {
                reads.fetch_add(1, Ordering::SeqCst);
                Ok(Some(b))
            },
            |&b, _| {
                if b == 3 {
                    return Err(Error::InvalidArgument("cannot store block 3".into()));
                }
                written.push(b);
                Ok(())
            },
        )
        .unwrap_err();
        assert!(e.to_string().contains("block 3"), "{e}");
        assert_eq!(written, vec![0, 1, 2]);
        // At most one block read past the failed write.
        assert!(
            reads.load(Ordering::SeqCst) <= 6 + 5,
            "{}",
            reads.load(Ordering::SeqCst)
        );
    }
}
