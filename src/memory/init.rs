//! [`Init`]: what the bytes of a new allocation hold, which every allocator takes.

/// What a new allocation holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Init {
    /// Every byte zero: what every public constructor hands out. Fresh pages from the OS
    /// are zero already; recycled blocks are cleared.
    Zeroed,
    /// Whatever the memory held: another allocation's bytes when the block was recycled.
    /// Only for zarrbuf's own writers, under the invariant that every byte is written before
    /// any safe code can see the buffer (a read that fails drops it instead of returning it).
    Unwritten,
}
