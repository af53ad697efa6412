//! The parts of a staged read that its device decoder shares with the workers and the
//! coordinator: a chunk left compressed for the device, how it decodes, and the device
//! decoder's settings. A leaf of `pipeline/`, so that `read/staged_read.rs`,
//! `read/read_driver.rs`, `read/slot_ring.rs` and `gpu_decode/device_batches.rs` all take
//! them from here without importing one another in a circle.

use crate::compression_formats::Compression;
use crate::zarr::BloscFrame;

/// A chunk left compressed in its slot for the device decoder.
pub(crate) struct Compressed {
    /// The bytes at the start of the slot.
    pub len: usize,
    /// How they decode.
    pub parts: DeviceParts,
}

/// How a chunk's compressed bytes decode on the device.
pub(crate) enum DeviceParts {
    /// One stream that decompresses to the whole chunk.
    Whole,
    /// A blosc frame: its streams decompress (or are copied) into the shuffled chunk, which
    /// is then unshuffled.
    Blosc(Box<BloscFrame>),
}

impl DeviceParts {
    /// The batch items the chunk takes.
    pub(super) fn items(&self) -> usize {
        match self {
            DeviceParts::Whole => 1,
            DeviceParts::Blosc(frame) => frame.compressed_streams(),
        }
    }
}

/// Most compressed streams a blosc chunk may have and still be decoded on the device (more
/// decode on the CPU): the batch descriptors hold at least this many.
pub(crate) const MAX_STREAMS_PER_CHUNK: usize = 4096;

/// The device decoder of one read.
#[derive(Clone, Copy)]
pub(crate) struct DeviceDecode {
    /// What the device decompresses (every chunk of a read has the same codecs).
    pub compression: Compression,
    /// CPU workers decode too ([`Decode::Both`](crate::options::Decode::Both)): the device takes
    /// batches from the front of the units, the workers decode from the back
    /// ([`super::hybrid`]).
    pub hybrid: bool,
    /// The chunks are blosc frames of many streams each: batches take more items.
    pub blosc: bool,
}
