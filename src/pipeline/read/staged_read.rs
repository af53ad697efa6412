//! The staged read pipeline: fetch → CPU decompress into a staging slot → copy to the device
//! → device kernels (byte swap + transpose + scatter, fused into one strided copy; fill for
//! missing chunks).
//!
//! This file holds what every route of a staged read shares ([`StagedRead`]: the units, their
//! layout, where the request starts, the fill value, progress, the error for a rejected unit,
//! the device) and what a worker hands back for a unit ([`Produced`]). The routes own their
//! own state, each in a file of its own, and `read_route.rs` chooses one per read:
//!
//! - the host route (`host_scatter.rs`, [`super::host_scatter::HostScatter`]): into host
//!   memory on the host "device", workers decode and scatter their units themselves;
//! - the general route (`slot_ring.rs`, [`super::slot_ring::SlotRing`]): workers decode into a
//!   ring of staging slots, the coordinator copies each to the device and scatters it; with a
//!   device decoder, chunks go to the device still compressed, in batches
//!   (`gpu_decode/device_batches.rs`,
//!   [`crate::pipeline::gpu_decode::device_batches::DeviceBatches`]);
//! - the cached route (`cache/device_cached_read.rs`): hits placed from the decoded-chunk
//!   cache in the device's memory, the misses through the general route, which keeps them
//!   (`cache/miss_keeper.rs`).
//!
//! The pipeline is written against [`DeviceOps`]; with [`crate::device::HostOps`] every step runs
//! on the host, which is how CI exercises this logic without a GPU.

use crate::buffer::NDBuffer;
use crate::data_types::ByteOrder;
use crate::device::DeviceOps;
use crate::errors::{Error, Result};
use crate::options::{Progress, ProgressFn};
use crate::pipeline::gpu_decode::device_parts::Compressed;
use crate::stage_timings::StageTimings;
use crate::zarr::{EncodedLayout, Unit};
use std::sync::Arc;

/// What decoding one unit into a staging slot produced.
pub(crate) enum Produced {
    /// The unit is not stored: it reads as the fill value.
    Missing,
    /// This many bytes were written at the start of the slot.
    Decoded(usize),
    /// Still-compressed bytes (checked, framing removed) were written at the start of the
    /// slot, for the device decoder.
    Compressed(Compressed),
    /// The unit's decoded bytes are its stored bytes, handed over as fetched (a chain with no
    /// bytes-to-bytes codecs): the host route scatters from them without a copy into the
    /// slot; the other route copies them there first.
    Stored(bytes::Bytes),
}

impl Produced {
    /// `Stored` bytes copied to the start of `slot`, as `Decoded`; every other outcome as it is.
    pub(crate) fn into_slot(self, slot: &mut [u8], unit: &Unit) -> Result<Produced> {
        let Produced::Stored(bytes) = self else {
            return Ok(self);
        };
        let capacity = slot.len();
        let dst = slot.get_mut(..bytes.len()).ok_or_else(|| {
            Error::ShapeMismatch(format!(
                "chunk {:?} holds {} bytes, more than the {capacity} a chunk of shape {:?} decodes to",
                unit.indices,
                bytes.len(),
                unit.shape
            ))
        })?;
        dst.copy_from_slice(&bytes);
        Ok(Produced::Decoded(bytes.len()))
    }
}

/// Which decoder a unit taken by a worker is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Decoder {
    /// The CPU: the unit is decoded into its slot.
    Cpu,
    /// The device decoder: a chunk it can decode is left compressed in the slot.
    Device,
}

/// Fetches one unit and decodes it into the slot (called on worker threads), or for
/// [`Decoder::Device`] may leave the chunk compressed for the device decoder.
pub(crate) type Producer<'a> = dyn Fn(&Unit, &mut [u8], Decoder) -> Result<Produced> + Sync + 'a;

/// What every route of a staged read shares (the routes' own settings are
/// [`super::read_route::RouteOptions`]).
pub(crate) struct StagedRead<'a> {
    pub ops: Arc<dyn DeviceOps>,
    pub units: &'a [Unit],
    pub layout: EncodedLayout,
    /// Array coordinates of the output's element 0.
    pub request_start: Vec<u64>,
    /// One element of fill value, native byte order.
    pub fill_value: Vec<u8>,
    pub staging_bytes: usize,
    pub threads: usize,
    pub progress: Option<ProgressFn>,
    /// The error for a unit the device decoder rejected (names the array and chunk).
    pub unit_error: &'a (dyn Fn(&Unit, String) -> Error + Sync),
    /// Where the device-decode route adds its stage timings (`None`: nothing is timed).
    pub stage_timings: Option<Arc<StageTimings>>,
}

impl<'a> StagedRead<'a> {
    /// The same read over `units` (a cached read's misses), reporting through `progress`.
    pub(in crate::pipeline) fn over(
        &self,
        units: &'a [Unit],
        progress: Option<ProgressFn>,
    ) -> StagedRead<'a> {
        StagedRead {
            ops: self.ops.clone(),
            units,
            layout: self.layout.clone(),
            request_start: self.request_start.clone(),
            fill_value: self.fill_value.clone(),
            staging_bytes: self.staging_bytes,
            threads: self.threads,
            progress,
            unit_error: self.unit_error,
            stage_timings: self.stage_timings.clone(),
        }
    }

    /// No unit done yet, of this read's units.
    pub(in crate::pipeline) fn no_progress(&self) -> Progress {
        Progress {
            chunks_done: 0,
            chunks_total: self.units.len(),
            bytes_done: 0,
        }
    }

    /// Counts one unit of `region_shape` done and reports it.
    pub(in crate::pipeline) fn report(
        &self,
        progress: &mut Progress,
        region_shape: &[usize],
        elem: usize,
    ) {
        progress.chunks_done += 1;
        progress.bytes_done += (region_shape.iter().product::<usize>() * elem) as u64;
        if let Some(cb) = &self.progress {
            cb(*progress);
        }
    }

    /// The byte-swap unit from the decoded layout to `out`'s byte order (0: none).
    pub(super) fn swap_into(&self, out: &NDBuffer) -> usize {
        if self.layout.endian == out.byte_order() {
            0
        } else {
            out.dtype().swap_unit()
        }
    }

    /// One element of fill value in `out`'s byte order.
    pub(super) fn fill_for(&self, out: &NDBuffer) -> Result<Vec<u8>> {
        let mut fill = self.fill_value.clone();
        if out.byte_order() != ByteOrder::native() {
            zarrbuf_codecs::host::byte_swap(&mut fill, out.dtype().swap_unit())?;
        }
        Ok(fill)
    }

    /// True when the whole unit, decoded, is exactly one contiguous run of `out`: nothing to
    /// transpose or swap (`swap` is the byte-swap unit, 0 for none), and the output's strides
    /// are the unit's C strides.
    pub(in crate::pipeline) fn is_one_run(&self, unit: &Unit, out: &NDBuffer, swap: usize) -> bool {
        if !unit.is_whole() || self.layout.order.is_some() || swap != 0 {
            return false;
        }
        let shape = unit.shape_usize();
        let c = crate::data_types::Order::C.strides(&shape, out.dtype().size());
        shape
            .iter()
            .zip(c.iter().zip(out.strides()))
            .all(|(&n, (&want, &have))| n <= 1 || want == have)
    }
}
