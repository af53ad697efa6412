//! A bounded cache of large freed host and pinned blocks, reused by the next allocation of a
//! similar size (the way PyTorch's caching allocators work).
//!
//! Fresh pages cost a page fault and the kernel's zeroing on first write; page-locking
//! (`cuMemHostAlloc`) costs far more. A data loader reads array after array of the same size,
//! so handing back the last freed block turns both costs into nothing. The cache holds at
//! most `ZARRBUF_CACHE_BYTES` bytes (default 4 GiB; 0 disables it), keeps blocks only of at
//! least 4 MiB, and is emptied by [`release_cached_memory`], which also empties the other
//! pools of memory kept for reuse: those registered here from the layers above (the
//! pipeline's staging slots) and the devices' memory pools.

use std::sync::{Mutex, OnceLock};

/// A block that can be parked in the cache.
pub(crate) trait Reusable: Send {
    /// Bytes the block really holds.
    fn capacity(&self) -> usize;
    /// Where the block lives (host, or pinned for a device ordinal).
    fn kind(&self) -> BlockKind;
    /// Makes the block serve a request of `len` bytes (≤ capacity), returning to the cache
    /// when dropped again.
    fn set_len(&mut self, len: usize);
    /// For downcasting back to the concrete owner.
    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any>;
}

/// What kind of memory a cached block is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BlockKind {
    Host,
    Pinned(usize),
}

/// Smallest block worth keeping.
pub(crate) const MIN_CACHED: usize = 4 << 20;

struct Cache {
    blocks: Vec<Box<dyn Reusable>>,
    held: usize,
}

fn cache() -> &'static Mutex<Cache> {
    static CACHE: OnceLock<Mutex<Cache>> = OnceLock::new();
    CACHE.get_or_init(|| {
        Mutex::new(Cache {
            blocks: Vec::new(),
            held: 0,
        })
    })
}

/// The cache's byte limit.
pub(crate) fn limit() -> usize {
    static LIMIT: OnceLock<usize> = OnceLock::new();
    *LIMIT.get_or_init(|| {
        std::env::var("ZARRBUF_CACHE_BYTES")
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(4 << 30)
    })
}

/// Takes a cached block of `kind` that can hold `len` bytes without wasting more than half.
pub(crate) fn take(kind: BlockKind, len: usize) -> Option<Box<dyn Reusable>> {
    if len < MIN_CACHED || limit() == 0 {
        return None;
    }
    let mut c = cache().lock().ok()?;
    let best = c
        .blocks
        .iter()
        .enumerate()
        .filter(|(_, b)| b.kind() == kind && b.capacity() >= len && b.capacity() / 2 <= len)
        .min_by_key(|(_, b)| b.capacity())
        .map(|(i, _)| i)?;
    let mut block = c.blocks.swap_remove(best);
    c.held -= block.capacity();
    block.set_len(len);
    Some(block)
}

/// Parks a freed block; returns it back when the cache will not keep it.
pub(crate) fn give(block: Box<dyn Reusable>) -> Option<Box<dyn Reusable>> {
    let size = block.capacity();
    if size < MIN_CACHED || size > limit() {
        return Some(block);
    }
    let Ok(mut c) = cache().lock() else {
        return Some(block);
    };
    // Oldest blocks go first when the limit would be exceeded.
    let mut evicted = Vec::new();
    while c.held + size > limit() && !c.blocks.is_empty() {
        let old = c.blocks.remove(0);
        c.held -= old.capacity();
        evicted.push(old);
    }
    c.held += size;
    c.blocks.push(block);
    drop(c);
    drop(evicted);
    None
}

/// Frees the large host and pinned blocks, the pipeline staging slots and the device memory
/// pools' parked memory that zarrbuf keeps for reuse; returns the bytes freed.
///
/// Freed blocks of at least 4 MiB are kept (up to `ZARRBUF_CACHE_BYTES`, default 4 GiB; 0
/// turns the cache off) because fresh pages and page-locking cost more than the reads that
/// fill them; freed device memory stays in the device's default pool for the same reason.
///
/// ```
/// let freed = zarrbuf::alloc::release_cached_memory();
/// println!("released {freed} bytes");
/// ```
pub fn release_cached_memory() -> usize {
    let pools: Vec<Release> = match other_pools().lock() {
        Ok(p) => p.clone(),
        Err(_) => Vec::new(),
    };
    pools.iter().map(|release| release()).sum::<usize>()
        + release_all()
        + crate::driver::trim_device_pools()
}

/// Frees what a pool of memory kept for reuse holds; returns the bytes freed.
type Release = fn() -> usize;

/// The release functions of pools kept above this layer (the pipeline's staging slots).
fn other_pools() -> &'static Mutex<Vec<Release>> {
    static POOLS: OnceLock<Mutex<Vec<Release>>> = OnceLock::new();
    POOLS.get_or_init(|| Mutex::new(Vec::new()))
}

/// Makes [`release_cached_memory`] call `release` too: a pool of memory kept for reuse above
/// this layer frees what it holds and returns the bytes. Registering one twice is a no-op.
pub(crate) fn register_pool(release: Release) {
    if let Ok(mut p) = other_pools().lock()
        && !p.iter().any(|f| std::ptr::fn_addr_eq(*f, release))
    {
        p.push(release);
    }
}

/// Frees every cached block; returns the bytes released.
pub(crate) fn release_all() -> usize {
    let blocks = match cache().lock() {
        Ok(mut c) => {
            c.held = 0;
            std::mem::take(&mut c.blocks)
        }
        Err(_) => Vec::new(),
    };
    blocks.iter().map(|b| b.capacity()).sum()
}
