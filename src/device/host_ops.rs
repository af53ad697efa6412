//! The host implementation of the device trait: host memory, memcpy, host kernels.

use super::batch::{
    BatchDesc, BatchItem, CANNOT_DECOMPRESS, DescLayout, decode_on_host, describe_host_status,
};
use super::compress::{compress_on_host, describe_host_compress_status, host_max_compressed_size};
use super::ops::HostQueue;
use super::ops::{CopyBatch, StridedCast, StridedCopy, Unshuffle};
use super::{DeviceOps, Event, Queue};
use crate::compression_formats::{CompressSettings, Compression};
use crate::errors::{Error, Result};
use crate::memory::{Init, Region};
use crate::place::Memory;
use std::sync::Arc;
use zarrbuf_codecs::{CopyItem, Strided, host};

/// Runs every operation immediately on the calling thread.
pub(crate) struct HostOps;

/// Host pointers of a source and destination, with the guards that keep them valid.
fn host_regions(src: &Region, dst: &Region) -> Result<(*const u8, *mut u8)> {
    let s = src.host_ptr().ok_or_else(|| {
        Error::NotHostAccessible(format!("host kernel source in {}", src.memory()))
    })?;
    let d = dst.host_ptr().ok_or_else(|| {
        Error::NotHostAccessible(format!("host kernel destination in {}", dst.memory()))
    })?;
    Ok((s, d))
}

impl DeviceOps for HostOps {
    fn memory(&self) -> Memory {
        Memory::Host
    }

    fn alloc(&self, len: usize) -> Result<Region> {
        Region::alloc_host(len, Init::Unwritten)
    }

    fn alloc_staging(&self, len: usize) -> Result<Region> {
        Region::alloc_host(len, Init::Unwritten)
    }

    fn new_queue(&self) -> Result<Queue> {
        Ok(Queue::Host(HostQueue::new()))
    }

    fn default_queue(&self) -> Queue {
        Queue::Host(HostQueue::DEFAULT)
    }

    fn copy(&self, _q: &Queue, src: &Region, dst: &Region) -> Result<()> {
        if src.len() != dst.len() {
            return Err(Error::ShapeMismatch(format!(
                "copy of {} bytes into a buffer of {} bytes",
                src.len(),
                dst.len()
            )));
        }
        let (s, d) = host_regions(src, dst)?;
        let _guards = src.lock_pair(dst)?;
        // SAFETY: both regions are live (buffers hold their storage) and len bytes long;
        // `ptr::copy` tolerates overlap when both handles view one allocation.
        unsafe { std::ptr::copy(s, d, src.len()) };
        Ok(())
    }

    fn strided_copy(&self, _q: &Queue, op: StridedCopy<'_>) -> Result<()> {
        let StridedCopy {
            src,
            src_view,
            dst,
            dst_view,
            shape,
            elem_size,
            swap_unit,
        } = op;
        let (s, d) = host_regions(src, dst)?;
        let _guards = src.lock_pair(dst)?;
        // SAFETY: the regions are live for the buffers' lengths; the kernel checks every
        // element against those lengths before copying.
        unsafe {
            host::strided_copy(
                s,
                src.len(),
                src_view,
                d,
                dst.len(),
                dst_view,
                shape,
                elem_size,
                swap_unit,
            )?
        };
        Ok(())
    }

    fn strided_copy_batch(&self, _q: &Queue, op: CopyBatch<'_>) -> Result<()> {
        let d = op.dst.host_ptr().ok_or_else(|| {
            Error::NotHostAccessible(format!("batched copy destination in {}", op.dst.memory()))
        })?;
        let mut items = Vec::with_capacity(op.items.len());
        for it in op.items {
            let s = it.src.host_ptr().ok_or_else(|| {
                Error::NotHostAccessible(format!("batched copy source in {}", it.src.memory()))
            })?;
            items.push(CopyItem {
                src: s as u64,
                src_len: it.src.len(),
                src_view: it.src_view,
                dst_view: it.dst_view,
                shape: it.shape,
            });
        }
        // The destination written, every other storage read, each guarded once.
        let _write = op.dst.storage().write()?;
        let mut seen = std::collections::HashSet::from([Arc::as_ptr(op.dst.storage())]);
        let mut _reads = Vec::new();
        for it in op.items {
            let st = it.src.storage();
            if seen.insert(Arc::as_ptr(st)) {
                _reads.push(st.read()?);
            }
        }
        // SAFETY: every source and the destination are live host regions of the stated
        // lengths, held by the guards above; the kernel checks every item's bounds and that
        // no source overlaps the destination before copying.
        unsafe { host::strided_copy_batch(&items, d, op.dst.len(), op.elem_size, op.swap_unit)? };
        Ok(())
    }

    fn fill(
        &self,
        _q: &Queue,
        dst: &Region,
        view: Strided<'_>,
        shape: &[usize],
        pattern: &[u8],
    ) -> Result<()> {
        dst.with_host_mut(|bytes| Ok(host::fill(bytes, view, shape, pattern)?))
    }

    fn cast(&self, _q: &Queue, op: StridedCast<'_>) -> Result<()> {
        let StridedCast {
            src,
            src_view,
            src_kind,
            dst,
            dst_view,
            dst_kind,
            shape,
        } = op;
        let (s, d) = host_regions(src, dst)?;
        let _guards = src.lock_pair(dst)?;
        // SAFETY: regions live for the buffers' lengths; the kernel checks bounds.
        unsafe {
            host::cast(
                s,
                src.len(),
                src_view,
                src_kind,
                d,
                dst.len(),
                dst_view,
                dst_kind,
                shape,
            )?
        };
        Ok(())
    }

    fn blosc_unshuffle(&self, _q: &Queue, op: Unshuffle<'_>) -> Result<()> {
        let Unshuffle {
            src,
            dst,
            nbytes,
            shuffle,
            typesize,
            blocksize,
        } = op;
        let (_guard, input) = src.host_bytes()?;
        dst.with_host_mut(|out| {
            Ok(host::blosc_unshuffle(
                input, out, nbytes, shuffle, typesize, blocksize,
            )?)
        })
    }

    fn adler32_pieces(
        &self,
        _q: &Queue,
        src: &Region,
        nbytes: usize,
        piece: usize,
        out: &Region,
    ) -> Result<()> {
        let (_guard, input) = src.host_bytes()?;
        let mut sums = vec![0u32; out.len() / 4];
        host::adler32_pieces(input, nbytes, piece, &mut sums)?;
        out.with_host_mut(|bytes| {
            for (w, chunk) in sums.iter().zip(bytes.chunks_exact_mut(4)) {
                chunk.copy_from_slice(&w.to_ne_bytes());
            }
            Ok(())
        })
    }

    fn sm_count(&self) -> Result<usize> {
        Ok(super::ops::host_sm_count())
    }

    fn wait_for(&self, _q: &Queue, _after: &Queue) -> Result<()> {
        Ok(())
    }

    fn batch_decoder(&self) -> std::result::Result<(), String> {
        Ok(())
    }

    fn new_batch_desc(&self, capacity: usize) -> Result<BatchDesc> {
        let host = Region::alloc_host(DescLayout::new(capacity).len, Init::Zeroed)?;
        Ok(BatchDesc {
            capacity,
            device: host.clone(),
            host,
            temp: None,
        })
    }

    fn decompress_batch(
        &self,
        _q: &Queue,
        format: Compression,
        items: &[BatchItem],
        desc: &mut BatchDesc,
    ) -> Result<()> {
        // The same request arrays the GPU decoder gets (host addresses here), then the
        // chunks decoded one by one with the CPU codecs, results in nvCOMP's layout. Buffers
        // nvCOMP would refuse as misaligned are refused here too, so CI catches them.
        let align = format.required_alignment();
        desc.write_requests(items, &|r| {
            let addr = r.host_ptr().map(|p| p as u64).ok_or_else(|| {
                Error::NotHostAccessible(format!("batch chunk in {}", r.memory()))
            })?;
            if !addr.is_multiple_of(align as u64) {
                return Err(Error::InvalidArgument(format!(
                    "a {format} batch buffer at an address that is not a multiple of {align} \
                     (nvCOMP's alignment; internal error: please report)"
                )));
            }
            Ok(addr)
        })?;
        for (i, it) in items.iter().enumerate() {
            let (_guard, input) = it.input.host_bytes()?;
            let decoded = it
                .output
                .with_host_mut(|out| Ok(decode_on_host(format, input, out)))?;
            match decoded {
                Ok(n) => desc.write_outcome(i, n, 0)?,
                Err(_) => desc.write_outcome(i, 0, CANNOT_DECOMPRESS)?,
            }
        }
        Ok(())
    }

    fn describe_status(&self, status: i32) -> String {
        describe_host_status(status)
    }

    fn batch_compressor(&self) -> std::result::Result<(), String> {
        Ok(())
    }

    fn max_compressed_size(&self, settings: CompressSettings, chunk_bytes: usize) -> Result<usize> {
        Ok(host_max_compressed_size(settings.format, chunk_bytes))
    }

    fn compress_batch(
        &self,
        _q: &Queue,
        settings: CompressSettings,
        items: &[BatchItem],
        desc: &mut BatchDesc,
    ) -> Result<()> {
        // As decompress_batch: nvCOMP's request arrays, then each chunk compressed with the
        // CPU compressors, sizes and statuses written where nvCOMP writes them.
        desc.write_requests(items, &|r| {
            r.host_ptr()
                .map(|p| p as u64)
                .ok_or_else(|| Error::NotHostAccessible(format!("batch chunk in {}", r.memory())))
        })?;
        for (i, it) in items.iter().enumerate() {
            let (_guard, input) = it.input.host_bytes()?;
            let compressed = it
                .output
                .with_host_mut(|out| Ok(compress_on_host(settings, input, out)))?;
            match compressed {
                Ok(n) => desc.write_outcome(i, n, 0)?,
                Err(status) => desc.write_outcome(i, 0, status)?,
            }
        }
        Ok(())
    }

    fn describe_compress_status(&self, status: i32) -> String {
        describe_host_compress_status(status)
    }

    fn record(&self, _q: &Queue) -> Result<Event> {
        Ok(Event::Complete)
    }

    fn synchronize(&self, _q: &Queue) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::{CopyBatchItem, DeviceOps};

    fn region(bytes: &[u8]) -> Region {
        let r = Region::alloc_host(bytes.len(), Init::Zeroed).expect("host memory");
        r.with_host_mut(|b| {
            b.copy_from_slice(bytes);
            Ok(())
        })
        .expect("host write");
        r
    }

    fn bytes(r: &Region) -> Vec<u8> {
        r.host_bytes().expect("host read").1.to_vec()
    }

    #[test]
    fn batch_of_items_sharing_a_source_equals_separate_copies() {
        // Two items from one scratch allocation (as a decode batch's), byte-swapped u16s,
        // the second transposed.
        let scratch = region(&(0u8..16).collect::<Vec<_>>());
        let (a, b) = (scratch.sub(0, 8), scratch.sub(8, 16));
        let q = HostOps.default_queue();
        let (c, t, out_strides) = ([4isize, 2], [2isize, 4], [8isize, 2]);
        fn item<'a>(
            src: &'a Region,
            s: &'a [isize],
            o: &'a [isize],
            at: usize,
        ) -> CopyBatchItem<'a> {
            CopyBatchItem {
                src,
                src_view: Strided {
                    offset: 0,
                    strides: s,
                },
                dst_view: Strided {
                    offset: at,
                    strides: o,
                },
                shape: &[2, 2],
            }
        }
        let batched = region(&[0xee; 16]);
        let items = [item(&a, &c, &out_strides, 0), item(&b, &t, &out_strides, 4)];
        let op = CopyBatch {
            items: &items,
            dst: &batched,
            elem_size: 2,
            swap_unit: 2,
        };
        HostOps.strided_copy_batch(&q, op).expect("a valid batch");
        let separate = region(&[0xee; 16]);
        for it in &items {
            HostOps
                .strided_copy(
                    &q,
                    StridedCopy {
                        src: it.src,
                        src_view: it.src_view,
                        dst: &separate,
                        dst_view: it.dst_view,
                        shape: it.shape,
                        elem_size: 2,
                        swap_unit: 2,
                    },
                )
                .expect("a valid copy");
        }
        assert_eq!(bytes(&batched), bytes(&separate));
        assert_eq!(&bytes(&batched)[..4], &[1, 0, 3, 2]);
    }

    #[test]
    fn batch_with_an_out_of_bounds_item_writes_nothing() {
        let src = region(&[5; 8]);
        let dst = region(&[0; 8]);
        let s = [1isize];
        let item = |at| CopyBatchItem {
            src: &src,
            src_view: Strided {
                offset: 0,
                strides: &s,
            },
            dst_view: Strided {
                offset: at,
                strides: &s,
            },
            shape: &[4],
        };
        let items = [item(0), item(6)];
        let err = HostOps
            .strided_copy_batch(
                &HostOps.default_queue(),
                CopyBatch {
                    items: &items,
                    dst: &dst,
                    elem_size: 1,
                    swap_unit: 0,
                },
            )
            .expect_err("item 1 ends past the destination")
            .to_string();
        assert!(err.contains("item 1"), "{err}");
        assert_eq!(bytes(&dst), [0; 8]);
    }
}
