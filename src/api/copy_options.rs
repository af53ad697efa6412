//! `CopyOptions`: what a copy does of its own (the part copied, its block memory, resuming,
//! its progress), beside the options of the reads and writes it is made of.

use crate::buffer::BufferPrototype;
use crate::options::{Compress, Durability, PipelineMode, Progress, ProgressFn};
use crate::options::{ReadOptions, WriteOptions};
use std::ops::Range;
use std::sync::Arc;

/// Options for [`copy_array`](crate::copy_array).
///
/// A copy reads the source block by block and writes each block to the destination: `read`
/// is the options of every block's read (threads, path, checksums, object-store requests in
/// flight…) and `write` those of every block's write (threads, path, where chunks are
/// compressed, durability…). The two sides are set apart: a copy can decode on 8 threads and
/// compress on 2. The defaults of both are those of [`ReadOptions::default`] and
/// [`WriteOptions::default`], so a default copy reads and writes as a default read and
/// write do.
///
/// Two read options are the copy's to decide: it decodes every chunk whole
/// ([`ReadOptions::decode_needed_prefix`] is not used: what it writes must be all the source
/// vouches for), and a progress callback of `read` or `write` is called by each block's read
/// or write with that block's own progress — the copy's progress is [`CopyOptions::progress`].
///
/// ```
/// use zarrbuf::{BufferPrototype, options::{CopyOptions, ReadOptions, WriteOptions}};
/// let o = CopyOptions::default()
///     .with_subset(vec![0..10, 0..5])
///     .with_memory_bytes(64 << 20)
///     .with_prototype(BufferPrototype::cpu())
///     .with_read(ReadOptions::default().with_concurrency(8))
///     .with_write(WriteOptions::default().with_concurrency(2));
/// assert_eq!(o.memory_bytes, 64 << 20);
/// assert_eq!((o.read.concurrency, o.write.concurrency), (Some(8), Some(2)));
/// ```
#[derive(Clone)]
pub struct CopyOptions {
    /// The part of the source to copy (default: all of it); the destination's shape must be
    /// this subset's shape.
    pub subset: Option<Vec<Range<u64>>>,
    /// Where each block is staged between the read and the write (default: the CPU). A device
    /// prototype sends every block through the device read and write pipelines.
    pub prototype: BufferPrototype,
    /// Budget for the blocks in flight in bytes (default 1 GiB): two at most (one written
    /// while the next is read), each within half of it and at most 64 MiB. A block is never
    /// smaller than one destination chunk (shard, for sharded destinations), so one chunk
    /// larger than that is copied on its own.
    pub memory_bytes: usize,
    /// Called after each block with destination chunks (shards) written so far.
    pub progress: Option<ProgressFn>,
    /// Continue a copy that was interrupted (default false): blocks whose destination chunks
    /// (shards) are all stored and decode are skipped; the others are written again.
    pub resume: bool,
    /// The options of every block's read of the source (default [`ReadOptions::default`];
    /// `decode_needed_prefix` is not used: a copy decodes every chunk whole).
    pub read: ReadOptions,
    /// The options of every block's write to the destination (default
    /// [`WriteOptions::default`]). Its `durability` covers the destination's metadata too,
    /// and with `store_empty_chunks` blocks that read as the fill value on both sides are
    /// written instead of skipped.
    pub write: WriteOptions,
}

impl Default for CopyOptions {
    fn default() -> Self {
        CopyOptions {
            subset: None,
            prototype: BufferPrototype::cpu(),
            memory_bytes: 1 << 30,
            progress: None,
            resume: false,
            read: ReadOptions::default(),
            write: WriteOptions::default(),
        }
    }
}

impl CopyOptions {
    /// Copies only `subset` of the source.
    ///
    /// ```
    /// let o = zarrbuf::options::CopyOptions::default().with_subset(vec![2..8, 0..11]);
    /// assert_eq!(o.subset, Some(vec![2..8, 0..11]));
    /// ```
    pub fn with_subset(mut self, subset: Vec<Range<u64>>) -> Self {
        self.subset = Some(subset);
        self
    }

    /// Stages blocks in `proto`'s memory.
    ///
    /// ```
    /// use zarrbuf::{BufferPrototype, options::CopyOptions};
    /// let o = CopyOptions::default().with_prototype(BufferPrototype::pinned(0));
    /// assert_eq!(o.prototype.memory(), BufferPrototype::pinned(0).memory());
    /// ```
    pub fn with_prototype(mut self, proto: BufferPrototype) -> Self {
        self.prototype = proto;
        self
    }

    /// Sets the block budget in bytes.
    ///
    /// ```
    /// let o = zarrbuf::options::CopyOptions::default().with_memory_bytes(64 << 20);
    /// assert_eq!(o.memory_bytes, 64 << 20);
    /// ```
    pub fn with_memory_bytes(mut self, bytes: usize) -> Self {
        self.memory_bytes = bytes;
        self
    }

    /// Skips blocks the destination already holds whole (see [`CopyOptions::resume`]).
    ///
    /// ```
    /// let o = zarrbuf::options::CopyOptions::default().with_resume(true);
    /// assert!(o.resume);
    /// ```
    pub fn with_resume(mut self, resume: bool) -> Self {
        self.resume = resume;
        self
    }

    /// Sets a progress callback, called after each block (see [`CopyOptions::progress`]).
    ///
    /// ```
    /// let o = zarrbuf::options::CopyOptions::default().with_progress(|p| eprintln!("{}/{}", p.chunks_done, p.chunks_total));
    /// assert!(o.progress.is_some());
    /// ```
    pub fn with_progress(mut self, f: impl Fn(Progress) + Send + Sync + 'static) -> Self {
        self.progress = Some(Arc::new(f));
        self
    }

    /// Sets the options of every block's read (see [`CopyOptions::read`]).
    ///
    /// ```
    /// use zarrbuf::options::{CopyOptions, PipelineMode, ReadOptions};
    /// let o = CopyOptions::default().with_read(ReadOptions::default().with_mode(PipelineMode::Staged));
    /// assert_eq!(o.read.mode, PipelineMode::Staged);
    /// ```
    pub fn with_read(mut self, read: ReadOptions) -> Self {
        self.read = read;
        self
    }

    /// Sets the options of every block's write (see [`CopyOptions::write`]).
    ///
    /// ```
    /// use zarrbuf::options::{Compress, CopyOptions, WriteOptions};
    /// let o = CopyOptions::default().with_write(WriteOptions::default().with_compress(Compress::Gpu));
    /// assert_eq!(o.write.compress, Compress::Gpu);
    /// ```
    pub fn with_write(mut self, write: WriteOptions) -> Self {
        self.write = write;
        self
    }

    /// Sets the CPU threads of both sides: `read.concurrency` and `write.concurrency`.
    #[deprecated(
        since = "0.2.0",
        note = "set `read.concurrency` and `write.concurrency` with with_read and with_write; \
                removed in 0.3.0"
    )]
    pub fn with_concurrency(mut self, n: usize) -> Self {
        self.read = self.read.with_concurrency(n);
        self.write = self.write.with_concurrency(n);
        self
    }

    /// Chooses the path of both sides: `read.mode` and `write.mode`.
    #[deprecated(
        since = "0.2.0",
        note = "set `read.mode` and `write.mode` with with_read and with_write; removed in 0.3.0"
    )]
    pub fn with_mode(mut self, mode: PipelineMode) -> Self {
        self.read = self.read.with_mode(mode);
        self.write = self.write.with_mode(mode);
        self
    }

    /// Chooses where the destination's chunks are compressed: `write.compress`.
    #[deprecated(
        since = "0.2.0",
        note = "set `write.compress` with with_write; removed in 0.3.0"
    )]
    pub fn with_compress(mut self, compress: Compress) -> Self {
        self.write = self.write.with_compress(compress);
        self
    }

    /// Keeps up to `n` requests to an object store in flight on both sides:
    /// `read.io_concurrency` and `write.io_concurrency`.
    #[deprecated(
        since = "0.2.0",
        note = "set `read.io_concurrency` and `write.io_concurrency` with with_read and \
                with_write; removed in 0.3.0"
    )]
    pub fn with_io_concurrency(mut self, n: usize) -> Self {
        self.read = self.read.with_io_concurrency(n);
        self.write = self.write.with_io_concurrency(n);
        self
    }

    /// Chooses the destination writes' durability: `write.durability`.
    #[deprecated(
        since = "0.2.0",
        note = "set `write.durability` with with_write; removed in 0.3.0"
    )]
    pub fn with_durability(mut self, durability: Durability) -> Self {
        self.write = self.write.with_durability(durability);
        self
    }

    /// The options of every block's read and write, as the copy runs them: chunks decode
    /// whole, since what a copy writes must be all the source vouches for.
    pub(crate) fn block_options(&self) -> (ReadOptions, WriteOptions) {
        let read = self.read.clone().with_decode_needed_prefix(false);
        (read, self.write.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::CopyOptions;
    use crate::options::{Compress, Durability, PipelineMode};

    /// The deprecated setters set what they set before the split: the knobs of both sides
    /// where one field drove the read and the write, the write's own otherwise.
    #[test]
    #[allow(deprecated)]
    fn deprecated_setters_reach_the_side_they_drove() {
        let o = CopyOptions::default()
            .with_concurrency(3)
            .with_mode(PipelineMode::Staged)
            .with_io_concurrency(7)
            .with_compress(Compress::Cpu)
            .with_durability(Durability::Sync);
        assert_eq!(
            (o.read.concurrency, o.write.concurrency),
            (Some(3), Some(3))
        );
        assert_eq!(
            (o.read.mode, o.write.mode),
            (PipelineMode::Staged, PipelineMode::Staged)
        );
        assert_eq!(
            (o.read.io_concurrency, o.write.io_concurrency),
            (Some(7), Some(7))
        );
        assert_eq!(o.write.compress, Compress::Cpu);
        assert_eq!(o.write.durability, Durability::Sync);
    }

    #[test]
    fn a_copy_decodes_whole_whatever_its_read_options_say() {
        let (read, _) = CopyOptions::default().block_options();
        assert!(!read.decode_needed_prefix);
    }
}
