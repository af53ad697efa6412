//! Memory zarrbuf did not allocate, kept alive by an owner object dropped with the last view.

use bytes::Bytes;
use std::any::Any;

/// Host memory owned by someone else (`bytes::Bytes`, `Vec<u8>`, a user's pool block).
pub(crate) struct ForeignHost {
    ptr: *mut u8,
    len: usize,
    writable: bool,
    owner: Box<dyn Any + Send + Sync>,
}

// SAFETY: the owner is Send + Sync and keeps the memory alive; access is governed by the
// storage borrow flag.
unsafe impl Send for ForeignHost {}
// SAFETY: see Send above.
unsafe impl Sync for ForeignHost {}

impl ForeignHost {
    /// # Safety
    /// `[ptr, ptr+len)` must stay valid for reads and writes for as long as `owner` lives, and
    /// nothing else may write it while zarrbuf handles exist.
    pub(crate) unsafe fn new(ptr: *mut u8, len: usize, owner: Box<dyn Any + Send + Sync>) -> Self {
        ForeignHost {
            ptr,
            len,
            writable: true,
            owner,
        }
    }

    /// Takes a Vec without copying; its heap block does not move when the Vec is boxed.
    pub(crate) fn from_vec(mut vec: Vec<u8>) -> Self {
        let (ptr, len) = (vec.as_mut_ptr(), vec.len());
        ForeignHost {
            ptr,
            len,
            writable: true,
            owner: Box::new(vec),
        }
    }

    /// Takes a typed Vec without copying (the bytes of its elements).
    pub(crate) fn from_typed_vec<T: crate::data_types::Element>(mut vec: Vec<T>) -> Self {
        let (ptr, len) = (
            vec.as_mut_ptr() as *mut u8,
            std::mem::size_of_val(vec.as_slice()),
        );
        ForeignHost {
            ptr,
            len,
            writable: true,
            owner: Box::new(vec),
        }
    }

    /// Wraps `Bytes` read-only: other owners of the same `Bytes` may be reading it.
    pub(crate) fn from_bytes(bytes: Bytes) -> Self {
        let (ptr, len) = (bytes.as_ptr() as *mut u8, bytes.len());
        ForeignHost {
            ptr,
            len,
            writable: false,
            owner: Box::new(bytes),
        }
    }

    /// The Vec back, when this storage wraps one.
    pub(crate) fn into_vec(self) -> Option<Vec<u8>> {
        self.owner.downcast::<Vec<u8>>().ok().map(|v| *v)
    }

    pub(crate) fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn writable(&self) -> bool {
        self.writable
    }
}

/// Device memory owned by someone else (another library's allocation, a pool block).
pub(crate) struct ForeignCuda {
    ptr: u64,
    len: usize,
    ordinal: usize,
    _owner: Box<dyn Any + Send + Sync>,
}

impl ForeignCuda {
    /// # Safety
    /// `[ptr, ptr+len)` must be device memory of CUDA device `ordinal`, valid for as long as
    /// `owner` lives.
    pub(crate) unsafe fn new(
        ptr: u64,
        len: usize,
        ordinal: usize,
        owner: Box<dyn Any + Send + Sync>,
    ) -> Self {
        ForeignCuda {
            ptr,
            len,
            ordinal,
            _owner: owner,
        }
    }

    pub(crate) fn ptr(&self) -> u64 {
        self.ptr
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn ordinal(&self) -> usize {
        self.ordinal
    }
}
