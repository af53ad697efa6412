//! The write driver: plans a request's chunks, runs the staged write (gather, transpose and
//! byte swap on the device, copy to host staging) and compresses and stores each chunk on
//! the worker threads, through a [`ChunkSink`] (a sync array, or an async one).

use crate::buffer::NDBuffer;
use crate::data_types::ByteOrder;
use crate::device::{DeviceOps, max_chunk_bytes, ops_for};
use crate::errors::{Error, Result};
use crate::options::{Compress, WriteOptions};
use crate::pipeline::{
    ChunkSink, ChunkWriter, DeviceCompress, StagedWrite, StoreQueue, largest_unit_bytes,
};
use crate::zarr::{
    ChainPlan, ShardEncoder, Unit, WriteCodec, chunk_error, fill_bytes, plan_chunks,
};
use std::ops::Range;
use std::sync::{Arc, Once};
use zarrs::array::Array;

/// Device data (or a forced staged write): the staged write pipeline into `sink`. With
/// `shared_stores` (a queue whose store threads already run, storing into the same sink) the
/// write returns once its chunks are queued there, and the queue's owner gives their store
/// errors ([`StoreQueue::finish`]); without, the write stores its chunks on threads of its own
/// and returns once every one is stored.
pub(crate) fn write_staged<S: ?Sized + Send + Sync>(
    array: &Array<S>,
    sink: &dyn ChunkSink,
    subset: &[Range<u64>],
    data: &NDBuffer,
    opts: &WriteOptions,
    shared_stores: Option<&StoreQueue>,
) -> Result<()> {
    let ops = ops_for(data.memory())?;
    write_staged_on(ops, array, sink, subset, data, opts, shared_stores)
}

/// Whether, and how, a write on `ops` compresses on the device (see [`Compress`]); `None`
/// means the CPU workers compress. Falling back from an explicit [`Compress::Gpu`] says why
/// on stderr once per reason.
fn device_compress(
    choice: Compress,
    ops: &dyn DeviceOps,
    chain: Option<&ChainPlan>,
    chunk_bytes: usize,
) -> Option<DeviceCompress> {
    match choice {
        Compress::Cpu | Compress::Auto => return None,
        Compress::Gpu => {}
    }
    let say = |once: &'static Once, why: String| {
        once.call_once(|| eprintln!("zarrbuf: compressing on the CPU: {why}"));
    };
    // Chains the device cannot compress stay on the CPU without a word, as reads do.
    let codec = WriteCodec::of(&chain?.chain).ok()?;
    if let Err(why) = ops.batch_compressor() {
        static SAID: Once = Once::new();
        say(&SAID, why);
        return None;
    }
    let settings = codec.settings();
    let limit = max_chunk_bytes(settings.format);
    if chunk_bytes > limit {
        static SAID: Once = Once::new();
        say(
            &SAID,
            format!(
                "chunks of {chunk_bytes} bytes are larger than the {limit} the device compresses in {}",
                settings.format
            ),
        );
        return None;
    }
    Some(DeviceCompress {
        settings,
        adler32: codec.needs_adler32(),
    })
}

/// Chunks stored at once: `io_concurrency` into an object store, whose uploads each wait a
/// round trip; `store_concurrency` into anything else.
pub(crate) fn store_threads<S: ?Sized>(array: &Array<S>, opts: &WriteOptions) -> usize {
    if crate::stores::fetches_are_remote(array.storage().as_ref()) {
        crate::options::io_concurrency(opts.io_concurrency)
    } else {
        opts.store_concurrency.max(1)
    }
}

/// [`write_staged`] on the device `ops` (tests pass their own).
pub(crate) fn write_staged_on<S: ?Sized + Send + Sync>(
    ops: Arc<dyn DeviceOps>,
    array: &Array<S>,
    sink: &dyn ChunkSink,
    subset: &[Range<u64>],
    data: &NDBuffer,
    opts: &WriteOptions,
    shared_stores: Option<&StoreQueue>,
) -> Result<()> {
    let elem = data.dtype().size();
    let units = plan_chunks(array, subset)?;
    // No more store threads than chunks: a small write need not start sixteen.
    let own_stores;
    let stores = match shared_stores {
        Some(shared) => shared,
        None => {
            own_stores = StoreQueue::new(
                store_threads(array, opts).min(units.len()),
                opts.staging_bytes,
            );
            &own_stores
        }
    };
    let chain = ChainPlan::new(array.codecs(), elem, array.dimensionality())?;
    let chunk_bytes = largest_unit_bytes(&units, elem);
    let compress = device_compress(opts.compress, ops.as_ref(), chain.as_ref(), chunk_bytes);
    let codec = match (&compress, &chain) {
        (Some(_), Some(c)) => WriteCodec::of(&c.chain).ok(),
        _ => None,
    };
    // Whole shards of plainly encoded inner chunks are assembled here (zarrs would encode
    // each shard on one thread). Sharded arrays have no chain plan, so they never compress
    // on the device.
    let shards = match &chain {
        None => ShardEncoder::new(array, fill_bytes(array), data.dtype().swap_unit())?,
        Some(_) => None,
    };
    let request_start: Vec<u64> = subset.iter().map(|r| r.start).collect();
    let writer = ChunkWriter {
        array,
        sink,
        data,
        opts,
        chain: chain.as_ref(),
        codec,
        shards,
        request_start: &request_start,
        // Chunks are compressed in parallel, so each codec runs single-threaded.
        codec_opts: opts.codec_options().with_concurrent_target(1),
        fill_encoded: fill_encoded(array, chain.as_ref(), data)?,
        stores,
    };
    let unit_error = |unit: &Unit, why: String| -> Error { chunk_error(array, &unit.indices, why) };
    let in_place = |unit: &Unit| writer.whole_shard(unit).is_some();
    let staged = StagedWrite {
        ops,
        units: &units,
        layout: chain.as_ref().map(|c| c.layout.clone()),
        request_start: request_start.clone(),
        fill_value: fill_bytes(array),
        array_shape: array.shape().to_vec(),
        staging_bytes: opts.staging_bytes,
        threads: opts.threads(),
        progress: opts.progress.clone(),
        device_compress: compress,
        unit_error: &unit_error,
        in_place: Some(&in_place),
    };
    // Whole encoded chunks are stored by the store threads while the workers compress the
    // next ones; partial chunks (read-modify-write of the slot's bytes) on the workers.
    if shared_stores.is_some() {
        // The queue's owner finishes it (and gives the store error behind a "stopped" one).
        return staged.run(data, &|unit, gathered, bytes, device| {
            writer.consume(unit, gathered, bytes, device)
        });
    }
    std::thread::scope(|scope| {
        writer.stores.spawn_stores(scope, sink);
        let ran = staged.run(data, &|unit, gathered, bytes, device| {
            writer.consume(unit, gathered, bytes, device)
        });
        // The store error is the cause of any "stopped" error the run gives.
        let stored = writer.stores.finish();
        stored.and(ran)
    })
}

/// One element of the array's fill value in the byte order of the chain's encoded layout.
fn fill_encoded<S: ?Sized>(
    array: &Array<S>,
    chain: Option<&ChainPlan>,
    data: &NDBuffer,
) -> Result<Vec<u8>> {
    let mut fill = fill_bytes(array);
    if let Some(c) = chain
        && c.layout.endian != ByteOrder::native()
    {
        zarrbuf_codecs::host::byte_swap(&mut fill, data.dtype().swap_unit())?;
    }
    Ok(fill)
}

#[cfg(test)]
mod tests {
    //! The device-compression batches through a wrapper of the host device that counts the
    //! batches and can make one chunk fail, as nvCOMP reports a chunk it cannot compress.
    use super::*;
    use crate::compression_formats::{CompressSettings, Compression, Compressor};
    use crate::device::{
        BatchDesc, BatchItem, CopyBatch, Event, HostOps, Queue, StridedCast, StridedCopy, Unshuffle,
    };
    use crate::memory::Region;
    use crate::options::PipelineMode;
    use crate::place::Memory;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// The write with its own store threads (as every write but a copy's blocks).
    fn write_staged_on<S: ?Sized + Send + Sync>(
        ops: Arc<dyn DeviceOps>,
        array: &Array<S>,
        sink: &dyn ChunkSink,
        subset: &[Range<u64>],
        data: &NDBuffer,
        opts: &WriteOptions,
    ) -> Result<()> {
        super::write_staged_on(ops, array, sink, subset, data, opts, None)
    }
    use zarrbuf_codecs::Strided;
    use zarrs::array::{ArrayBuilder, ArraySubset, data_type};
    use zarrs::storage::store::MemoryStore;

    /// The host device; compression batches counted, and the chunk whose input starts with
    /// `fail_marker` reported as not compressible.
    struct Counting {
        host: HostOps,
        batches: AtomicUsize,
        chunks: AtomicUsize,
        formats: Mutex<Vec<Compressor>>,
        fail_marker: Option<u32>,
        /// The memory it says it is: anything but `Host` sends a write down the general
        /// (device) route, gather into scratch and copy into staging, as on a GPU.
        reports: Memory,
    }

    impl DeviceOps for Counting {
        fn memory(&self) -> Memory {
            self.reports
        }
        fn alloc(&self, len: usize) -> Result<Region> {
            self.host.alloc(len)
        }
        fn alloc_staging(&self, len: usize) -> Result<Region> {
            self.host.alloc_staging(len)
        }
        fn new_queue(&self) -> Result<Queue> {
            self.host.new_queue()
        }
        fn default_queue(&self) -> Queue {
            self.host.default_queue()
        }
        fn copy(&self, q: &Queue, src: &Region, dst: &Region) -> Result<()> {
            self.host.copy(q, src, dst)
        }
        fn strided_copy(&self, q: &Queue, op: StridedCopy<'_>) -> Result<()> {
            self.host.strided_copy(q, op)
        }
        fn strided_copy_batch(&self, q: &Queue, op: CopyBatch<'_>) -> Result<()> {
            self.host.strided_copy_batch(q, op)
        }
        fn fill(
            &self,
            q: &Queue,
            dst: &Region,
            view: Strided<'_>,
            shape: &[usize],
            pattern: &[u8],
        ) -> Result<()> {
            self.host.fill(q, dst, view, shape, pattern)
        }
        fn cast(&self, q: &Queue, op: StridedCast<'_>) -> Result<()> {
            self.host.cast(q, op)
        }
        fn blosc_unshuffle(&self, q: &Queue, op: Unshuffle<'_>) -> Result<()> {
            self.host.blosc_unshuffle(q, op)
        }
        fn adler32_pieces(
            &self,
            q: &Queue,
            src: &Region,
            nbytes: usize,
            piece: usize,
            out: &Region,
        ) -> Result<()> {
            self.host.adler32_pieces(q, src, nbytes, piece, out)
        }
        fn batch_decoder(&self) -> std::result::Result<(), String> {
            self.host.batch_decoder()
        }
        fn new_batch_desc(&self, capacity: usize) -> Result<BatchDesc> {
            self.host.new_batch_desc(capacity)
        }
        fn decompress_batch(
            &self,
            q: &Queue,
            format: Compression,
            items: &[BatchItem],
            desc: &mut BatchDesc,
        ) -> Result<()> {
            self.host.decompress_batch(q, format, items, desc)
        }
        fn describe_status(&self, status: i32) -> String {
            self.host.describe_status(status)
        }
        fn batch_compressor(&self) -> std::result::Result<(), String> {
            self.host.batch_compressor()
        }
        fn max_compressed_size(&self, s: CompressSettings, n: usize) -> Result<usize> {
            self.host.max_compressed_size(s, n)
        }
        fn compress_batch(
            &self,
            q: &Queue,
            settings: CompressSettings,
            items: &[BatchItem],
            desc: &mut BatchDesc,
        ) -> Result<()> {
            self.batches.fetch_add(1, Ordering::Relaxed);
            self.chunks.fetch_add(items.len(), Ordering::Relaxed);
            self.formats.lock().unwrap().push(settings.format);
            self.host.compress_batch(q, settings, items, desc)?;
            if let Some(marker) = self.fail_marker {
                for (i, it) in items.iter().enumerate() {
                    let (_g, input) = it.input.host_bytes()?;
                    if input[..4] == marker.to_le_bytes() {
                        desc.write_outcome(i, 0, 19)?;
                    }
                }
            }
            Ok(())
        }
        fn describe_compress_status(&self, status: i32) -> String {
            self.host.describe_compress_status(status)
        }
        fn record(&self, q: &Queue) -> Result<Event> {
            self.host.record(q)
        }
        fn synchronize(&self, q: &Queue) -> Result<()> {
            self.host.synchronize(q)
        }
    }

    fn counting(fail_marker: Option<u32>) -> Arc<Counting> {
        Arc::new(Counting {
            host: HostOps,
            batches: AtomicUsize::new(0),
            chunks: AtomicUsize::new(0),
            formats: Mutex::new(Vec::new()),
            fail_marker,
            reports: Memory::Host,
        })
    }

    /// A 1-d uint32 array of 8 chunks of 1000 elements with `codecs`, and data `i` at `i`.
    fn array(
        codecs: Vec<Arc<dyn zarrs::array::BytesToBytesCodecTraits>>,
    ) -> (Array<MemoryStore>, NDBuffer) {
        let array = ArrayBuilder::new(vec![8000], vec![1000], data_type::uint32(), 0u32)
            .bytes_to_bytes_codecs(codecs)
            .build(Arc::new(MemoryStore::new()), "/a")
            .unwrap();
        let data = NDBuffer::from_vec((0..8000u32).collect::<Vec<_>>(), &[8000]).unwrap();
        (array, data)
    }

    /// The whole array of [`array`] (one dimension).
    #[allow(clippy::single_range_in_vec_init)]
    const ALL: [Range<u64>; 1] = [0..8000];

    fn opts(compress: Compress) -> WriteOptions {
        WriteOptions::default()
            .with_mode(PipelineMode::Staged)
            .with_compress(compress)
            .with_concurrency(1)
    }

    #[test]
    fn chunks_go_to_the_device_in_batches_and_read_back() {
        let zstd: Arc<dyn zarrs::array::BytesToBytesCodecTraits> =
            Arc::new(zarrs::array::codec::ZstdCodec::new(3, false));
        let gzip: Arc<dyn zarrs::array::BytesToBytesCodecTraits> =
            Arc::new(zarrs::array::codec::GzipCodec::new(5).unwrap());
        for (codec, format) in [(zstd, Compressor::Zstd), (gzip, Compressor::Gzip)] {
            let (array, data) = array(vec![codec]);
            let ops = counting(None);
            write_staged_on(
                ops.clone(),
                &array,
                &array,
                &ALL,
                &data,
                &opts(Compress::Gpu),
            )
            .unwrap();
            assert_eq!(ops.chunks.load(Ordering::Relaxed), 8, "{format}");
            assert!(ops.batches.load(Ordering::Relaxed) >= 1);
            assert!(ops.formats.lock().unwrap().iter().all(|f| *f == format));
            let back: Vec<u32> = array.retrieve_array_subset(&array.subset_all()).unwrap();
            assert_eq!(back, (0..8000).collect::<Vec<_>>(), "{format}");
            // CPU and Auto never ask the device.
            for choice in [Compress::Cpu, Compress::Auto] {
                let ops = counting(None);
                write_staged_on(ops.clone(), &array, &array, &ALL, &data, &opts(choice)).unwrap();
                assert_eq!(ops.batches.load(Ordering::Relaxed), 0, "{choice:?}");
            }
        }
    }

    #[test]
    fn chains_the_device_cannot_compress_stay_on_the_cpu() {
        let crc: Arc<dyn zarrs::array::BytesToBytesCodecTraits> =
            Arc::new(zarrs::array::codec::Crc32cCodec::new());
        let zstd_checksum: Arc<dyn zarrs::array::BytesToBytesCodecTraits> =
            Arc::new(zarrs::array::codec::ZstdCodec::new(3, true));
        // blosc frames: the device decodes them, it does not write them.
        let blosc = "blosc:lz4:5:shuffle+crc32c"
            .parse::<crate::zarr::CodecSpec>()
            .unwrap()
            .bytes_to_bytes_codecs(4)
            .unwrap();
        for codecs in [vec![], vec![crc], vec![zstd_checksum], blosc] {
            let (array, data) = array(codecs);
            let ops = counting(None);
            write_staged_on(
                ops.clone(),
                &array,
                &array,
                &ALL,
                &data,
                &opts(Compress::Gpu),
            )
            .unwrap();
            assert_eq!(ops.batches.load(Ordering::Relaxed), 0);
            let back: Vec<u32> = array.retrieve_array_subset(&array.subset_all()).unwrap();
            assert_eq!(back, (0..8000).collect::<Vec<_>>());
        }
    }

    #[test]
    fn chunks_over_the_device_limit_stay_on_the_cpu() {
        use zarrs::array::codec::{ZlibCodec, ZlibCompressionLevel};
        // zlib goes through nvCOMP's DEFLATE compressor, which takes chunks up to 64 KiB.
        let level = ZlibCompressionLevel::try_from(5u32).unwrap();
        let zlib: Arc<dyn zarrs::array::BytesToBytesCodecTraits> = Arc::new(ZlibCodec::new(level));
        let big = ArrayBuilder::new(vec![40000], vec![20000], data_type::uint32(), 0u32)
            .bytes_to_bytes_codecs(vec![zlib.clone()])
            .build(Arc::new(MemoryStore::new()), "/big")
            .unwrap();
        let data = NDBuffer::from_vec((0..40000u32).collect::<Vec<_>>(), &[40000]).unwrap();
        let ops = counting(None);
        #[allow(clippy::single_range_in_vec_init)]
        let all = [0..40000u64];
        write_staged_on(ops.clone(), &big, &big, &all, &data, &opts(Compress::Gpu)).unwrap();
        assert_eq!(ops.batches.load(Ordering::Relaxed), 0);
        let back: Vec<u32> = big.retrieve_array_subset(&big.subset_all()).unwrap();
        assert_eq!(back, (0..40000).collect::<Vec<_>>());
        // Chunks of many Adler-32 pieces (16 of 4096 bytes) just under the limit.
        let wide = ArrayBuilder::new(vec![48000], vec![16000], data_type::uint32(), 0u32)
            .bytes_to_bytes_codecs(vec![zlib.clone()])
            .build(Arc::new(MemoryStore::new()), "/wide")
            .unwrap();
        let data = NDBuffer::from_vec((0..48000u32).collect::<Vec<_>>(), &[48000]).unwrap();
        let ops = counting(None);
        #[allow(clippy::single_range_in_vec_init)]
        let all = [0..48000u64];
        write_staged_on(ops.clone(), &wide, &wide, &all, &data, &opts(Compress::Gpu)).unwrap();
        assert_eq!(ops.chunks.load(Ordering::Relaxed), 3);
        let back: Vec<u32> = wide.retrieve_array_subset(&wide.subset_all()).unwrap();
        assert_eq!(back, (0..48000).collect::<Vec<_>>());
        // Chunks within the limit go to the device.
        let (small, data) = array(vec![zlib]);
        let ops = counting(None);
        write_staged_on(
            ops.clone(),
            &small,
            &small,
            &ALL,
            &data,
            &opts(Compress::Gpu),
        )
        .unwrap();
        assert_eq!(ops.chunks.load(Ordering::Relaxed), 8);
        assert_eq!(
            *ops.formats.lock().unwrap().first().unwrap(),
            Compressor::Deflate
        );
        let back: Vec<u32> = small.retrieve_array_subset(&small.subset_all()).unwrap();
        assert_eq!(back, (0..8000).collect::<Vec<_>>());
    }

    #[test]
    fn a_chunk_the_device_fails_on_is_named_and_earlier_chunks_are_kept() {
        let zstd: Arc<dyn zarrs::array::BytesToBytesCodecTraits> =
            Arc::new(zarrs::array::codec::ZstdCodec::new(3, false));
        let (array, data) = array(vec![zstd]);
        // Chunk 5 starts with the value 5000.
        let ops = counting(Some(5000));
        let e = write_staged_on(
            ops.clone(),
            &array,
            &array,
            &ALL,
            &data,
            &opts(Compress::Gpu),
        )
        .expect_err("chunk 5 fails")
        .to_string();
        assert!(
            e.contains("[5]")
                && e.contains("device compressor (zstd)")
                && e.contains("cannot compress"),
            "unclear error: {e}"
        );
        for i in 0..8u64 {
            let stored = array.retrieve_encoded_chunk(&[i]).unwrap();
            if i < 5 {
                let chunk: Vec<u32> = array.retrieve_chunk(&[i]).unwrap();
                let start = i as u32 * 1000;
                assert_eq!(
                    chunk,
                    (start..start + 1000).collect::<Vec<_>>(),
                    "chunk {i}"
                );
            } else if i == 5 {
                assert!(stored.is_none(), "the failed chunk was stored");
            }
        }
    }

    /// Whole shards take the shard encoder on both routes: cut in place from host data, and
    /// gathered into a slot first on the device route. Both give the same shards, which
    /// zarrs reads back.
    #[test]
    fn whole_shards_are_encoded_alike_on_the_host_and_device_routes() {
        let nz = |n: u64| std::num::NonZeroU64::new(n).unwrap();
        let sharded = || {
            let mut sharding = zarrs::array::codec::ShardingCodecBuilder::new(
                vec![nz(4), nz(5)],
                &data_type::uint32(),
            );
            sharding.bytes_to_bytes_codecs(vec![Arc::new(zarrs::array::codec::ZstdCodec::new(
                3, false,
            ))]);
            let array = ArrayBuilder::new(vec![30, 20], vec![8, 10], data_type::uint32(), 0u32)
                .array_to_bytes_codec(sharding.build_arc())
                .build(Arc::new(MemoryStore::new()), "/s")
                .unwrap();
            array.store_metadata().unwrap();
            array
        };
        let values: Vec<u32> = (0..600).map(|i| i * 7 + 1).collect();
        let data = NDBuffer::from_vec(values.clone(), &[30, 20]).unwrap();
        let all = [0..30u64, 0..20];
        let mut written = Vec::new();
        for reports in [Memory::Host, Memory::Pinned(0)] {
            let array = sharded();
            let mut ops = counting(None);
            Arc::get_mut(&mut ops).unwrap().reports = reports;
            write_staged_on(ops, &array, &array, &all, &data, &opts(Compress::Cpu)).unwrap();
            let back: Vec<u32> = array
                .retrieve_array_subset(&ArraySubset::new_with_ranges(&all))
                .unwrap();
            assert_eq!(back, values, "{reports:?}");
            let shards: Vec<_> = (0..4u64)
                .flat_map(|y| (0..2u64).map(move |x| [y, x]))
                .map(|at| array.retrieve_encoded_chunk(&at).unwrap())
                .collect();
            written.push(shards);
        }
        assert_eq!(written[0], written[1], "the two routes' shards differ");
    }
}
