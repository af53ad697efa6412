//! [`MemoryResource`]: where a buffer's memory came from, and how to get more of the same
//! (morok's `allocator_arc`, cuda.core's `Buffer.memory_resource`).

use super::{Allocator, Buffer, BufferPrototype};
use crate::errors::Result;
use crate::place::Memory;
use std::sync::Arc;

/// The allocator a buffer's memory came from.
///
/// ```
/// use zarrbuf::{Buffer, BufferPrototype, Memory};
/// use zarrbuf::alloc::MemoryResource;
/// let b = Buffer::zeros(16, &BufferPrototype::cpu())?;
/// assert!(matches!(b.memory_resource(), MemoryResource::Zarrbuf(Memory::Host)));
/// // More memory from the same place:
/// let more = b.memory_resource().allocate(32)?;
/// assert_eq!((more.len(), more.memory()), (32, Memory::Host));
/// assert!(matches!(Buffer::from_vec(vec![1u8]).memory_resource(), MemoryResource::Foreign(_)));
/// # Ok::<(), zarrbuf::Error>(())
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub enum MemoryResource {
    /// zarrbuf's own allocation of this kind of memory: the host block cache, page-locked
    /// blocks, or the CUDA device's memory pool.
    Zarrbuf(Memory),
    /// A user allocator plugged into a prototype with [`BufferPrototype::with_allocator`].
    Custom {
        /// The memory it hands out.
        memory: Memory,
        /// The allocator itself (the same `Arc` the prototype holds).
        allocator: Arc<dyn Allocator>,
    },
    /// Memory zarrbuf wraps but did not allocate: a `Vec`, `bytes::Bytes`, a raw pointer
    /// with its owner, a DLPack import. Its owner frees it; new memory "from" it comes from
    /// zarrbuf's own allocator for the same kind of memory.
    Foreign(Memory),
}

impl MemoryResource {
    /// The kind of memory this resource hands out.
    pub fn memory(&self) -> Memory {
        match self {
            MemoryResource::Zarrbuf(m) | MemoryResource::Foreign(m) => *m,
            MemoryResource::Custom { memory, .. } => *memory,
        }
    }

    /// A prototype that makes new buffers from this resource.
    ///
    /// ```
    /// use zarrbuf::{Buffer, BufferPrototype};
    /// let b = Buffer::zeros(4, &BufferPrototype::cpu())?;
    /// let proto = b.memory_resource().prototype();
    /// assert_eq!(proto.memory(), b.memory());
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn prototype(&self) -> BufferPrototype {
        match self {
            MemoryResource::Zarrbuf(m) | MemoryResource::Foreign(m) => {
                BufferPrototype::for_memory(*m)
            }
            MemoryResource::Custom { memory, allocator } => {
                BufferPrototype::for_memory(*memory).with_allocator(allocator.clone())
            }
        }
    }

    /// `len` new zero bytes from this resource.
    ///
    /// # Errors
    /// What the allocator reports (`OutOfMemory`, `DeviceUnavailable`, …).
    pub fn allocate(&self, len: usize) -> Result<Buffer> {
        Buffer::zeros(len, &self.prototype())
    }
}

impl std::fmt::Debug for MemoryResource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MemoryResource::Zarrbuf(m) => write!(f, "Zarrbuf({m})"),
            MemoryResource::Custom { memory, .. } => write!(f, "Custom({memory})"),
            MemoryResource::Foreign(m) => write!(f, "Foreign({m})"),
        }
    }
}

impl Buffer {
    /// Where this buffer's memory came from: zarrbuf's allocator, the user allocator of the
    /// prototype that made it, or foreign memory zarrbuf wraps. Views share it. A
    /// [lazy](Buffer::lazy) buffer reports the resource it will allocate from.
    ///
    /// ```
    /// use zarrbuf::{Buffer, BufferPrototype, Memory, Result};
    /// use zarrbuf::alloc::{Allocator, MemoryResource};
    /// use std::sync::Arc;
    /// struct Plain;
    /// impl Allocator for Plain {
    ///     fn allocate(&self, len: usize, memory: Memory) -> Result<Buffer> {
    ///         Buffer::empty(len, &BufferPrototype::for_memory(memory))
    ///     }
    /// }
    /// let plain: Arc<dyn Allocator> = Arc::new(Plain);
    /// let b = Buffer::zeros(8, &BufferPrototype::cpu().with_allocator(plain.clone()))?;
    /// match b.slice(2..).memory_resource() {
    ///     MemoryResource::Custom { allocator, .. } => assert!(Arc::ptr_eq(&allocator, &plain)),
    ///     other => panic!("{other:?}"),
    /// }
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn memory_resource(&self) -> MemoryResource {
        let memory = self.memory();
        if let Some(allocator) = self
            .origin()
            .and_then(|o| o.downcast_ref::<Arc<dyn Allocator>>())
        {
            return MemoryResource::Custom {
                memory,
                allocator: allocator.clone(),
            };
        }
        if self.is_foreign_memory() {
            MemoryResource::Foreign(memory)
        } else {
            MemoryResource::Zarrbuf(memory)
        }
    }
}
