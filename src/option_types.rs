//! Options for reads and writes, and the progress report.

use crate::stage_timings::StageTimings;
use std::sync::Arc;

/// Progress of a read or write: units are chunks (or inner chunks of shards).
///
/// ```
/// let p = zarrbuf::options::Progress { chunks_done: 1, chunks_total: 4, bytes_done: 1024 };
/// assert_eq!(p.fraction(), 0.25);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// Chunks finished so far.
    pub chunks_done: usize,
    /// Chunks the operation touches.
    pub chunks_total: usize,
    /// Decoded bytes delivered so far.
    pub bytes_done: u64,
}

impl Progress {
    /// Share of the chunks done, in `0.0..=1.0`.
    pub fn fraction(&self) -> f64 {
        if self.chunks_total == 0 {
            1.0
        } else {
            self.chunks_done as f64 / self.chunks_total as f64
        }
    }
}

/// A progress callback; called from the pipeline's coordinating thread.
pub type ProgressFn = Arc<dyn Fn(Progress) + Send + Sync>;

/// A decoded-chunk cache a read consults, as [`ReadOptions`] holds it: set it with
/// `ReadOptions::with_cache(zarrbuf::cache::ChunkCache)` and read it back with
/// `ReadOptions::chunk_cache()`.
///
/// Opaque because this file is a leaf of the crate's layers (ARCHITECTURE.md): it may not
/// name the cache (`zarrbuf::cache`, a layer above the buffers), so the option holds the
/// cache's shared state behind `Any`, and the two methods above, defined beside the cache,
/// put it in and take it out. Clones share the cache.
#[derive(Clone)]
pub struct CacheHandle(Arc<dyn std::any::Any + Send + Sync>);

impl CacheHandle {
    /// Wraps a cache's shared state.
    pub(crate) fn new<T: std::any::Any + Send + Sync>(inner: Arc<T>) -> Self {
        CacheHandle(inner)
    }

    /// The cache's shared state, if it is a `T`.
    pub(crate) fn get<T: std::any::Any + Send + Sync>(&self) -> Option<Arc<T>> {
        self.0.clone().downcast::<T>().ok()
    }
}

impl std::fmt::Debug for CacheHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CacheHandle")
    }
}

/// Which read path to take.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum PipelineMode {
    /// Reads: device outputs use the staged pipeline; CPU-accessible outputs too when the
    /// read touches at least 8 chunks (inner chunks of shards), where it was measured faster
    /// than zarrs' decode-into; smaller reads are decoded straight into place by zarrs.
    /// Writes: device data, and host data spanning several chunks (shards) of an array whose
    /// chain zarrbuf encodes itself, use the staged pipeline (it stores chunks on separate
    /// threads while its workers compress); other host data is encoded and stored by zarrs.
    #[default]
    Auto,
    /// Always use the staged pipeline (CPU decompression → staging → device kernels), also for
    /// host outputs, where the "device" is the host implementation. This is how the pipeline's
    /// logic is tested without a GPU.
    Staged,
    /// Host outputs are always decoded straight into place by zarrs (`retrieve_array_subset_into`)
    /// and host data is always encoded and stored by zarrs, whatever the read's or write's
    /// size; device buffers, and outputs zarrs cannot decode into (another byte order, a
    /// strided view), still take the staged pipeline. For comparing with zarrs, or for
    /// many small reads, where the staged pipeline's per-read start costs more.
    Direct,
}

/// Where the staged pipeline decompresses chunks.
///
/// Decompression on the device covers chunks whose bytes-to-bytes codecs are one `zstd`,
/// `gzip`, `zlib`, numcodecs `lz4` or `blosc` codec (blosc with lz4, lz4hc, zstd or zlib
/// inside), optionally followed by `crc32c`; other chains are always decoded on the CPU. On
/// CUDA the device decoder is nVIDIA's nvCOMP, loaded at run time (`pip install
/// nvidia-libnvcomp-cu13`, or `ZARRBUF_NVCOMP=/path/to/libnvcomp.so.6`); without it reads
/// decode on the CPU and say so once on stderr. For host outputs in
/// [`PipelineMode::Staged`], the "device" decoder is its host twin (the same batches,
/// decoded with the CPU codecs), which is how CI tests the batch logic.
///
/// The device decoder takes chunks in batches of at least 4 × the device's SM count (528 on
/// an H100), or the whole read when it has fewer: nvCOMP decodes each chunk with about one
/// thread block, so smaller batches leave most of the GPU idle. Batches hold compressed
/// bytes only, in device memory (two in flight, each at most half of
/// [`ReadOptions::staging_bytes`]); see ARCHITECTURE.md for the memory a read takes.
///
/// Measured on an H100 with 16 host cores (`benches/gpu-runs/gpu-run-12-nvcomp-1GiB.txt`),
/// 1 GiB float32 zstd-1 in 1 MiB chunks into CUDA memory, with batches of about 110 chunks
/// (before batches were sized by SM count): CPU 9.3 GB/s, GPU 7.9, both 8.2. `Auto`
/// therefore decodes on the CPU except for the formats a later GPU run showed the device
/// decoder exact and faster for: zstd so far.
///
/// ```
/// use zarrbuf::options::ReadOptions;
/// use zarrbuf::options::Decode;
/// let o = ReadOptions::default().with_decode(Decode::Gpu);
/// assert_eq!(o.decode, Decode::Gpu);
/// assert_eq!("both".parse::<Decode>().unwrap(), Decode::Both);
/// assert!("tpu".parse::<Decode>().is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Decode {
    /// CPU threads decode every chunk.
    Cpu,
    /// The device decodes every chunk it can, in batches.
    Gpu,
    /// Both at once into CUDA outputs: the device takes batches from the front of the
    /// read's chunks, CPU threads single chunks from the back, and the size of each batch
    /// follows the rates observed so far, so that neither side finishes long before the
    /// other (a read of one batch or less goes to the device whole).
    Both,
    /// The CPU, or `Both` for formats a GPU run has shown the device decoder exact and
    /// faster for, into CUDA outputs, with nvCOMP present and at least two batches of
    /// chunks. Zstd is the one format so marked (`benches/gpu-runs/gpu-run-21-all.txt`).
    #[default]
    Auto,
}

impl std::str::FromStr for Decode {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "cpu" => Ok(Decode::Cpu),
            "gpu" => Ok(Decode::Gpu),
            "both" => Ok(Decode::Both),
            "auto" => Ok(Decode::Auto),
            other => Err(format!(
                "unknown decode choice {other:?}; use cpu, gpu, both or auto"
            )),
        }
    }
}

/// Where the staged write pipeline compresses chunks.
///
/// Compression on the device covers chunks whose bytes-to-bytes codecs are one `zstd`,
/// `gzip`, `zlib` or numcodecs `lz4` codec, optionally followed by `crc32c` (the chains the
/// device decoder reads; zstd with `checksum: true` excepted). Other chains, chunks a write
/// only partly covers (they are merged into the stored chunk by zarrs) and sharded arrays are
/// always compressed on the CPU. On CUDA the compressor is nvCOMP 6, loaded at run time (as
/// for [`Decode`]); without it writes compress on the CPU and say so once on stderr. For host
/// data in [`PipelineMode::Staged`], the "device" compressor is its host twin (the same
/// batches, compressed with the CPU compressors), which is how CI tests the batch logic.
///
/// The device returns a zstd frame, a whole gzip member (nvCOMP's gzip compressor, CRC-32
/// included), an LZ4 block or a raw DEFLATE stream (zlib), and only that crosses back to the
/// host; the CPU adds the rest of the codec's framing (lz4's size header, zlib's header and
/// Adler-32, a trailing crc32c). zlib's Adler-32 is summed on the device in 4 KiB pieces
/// that the CPU combines. Chunks of only the fill value are still not stored
/// (`store_empty_chunks` false, the default): a chunk that compressed to at most 1/64 of its
/// size (as one repeated value does) is decoded on the CPU to check. nvCOMP's limits on chunk
/// sizes hold: zlib chunks over 64 KiB and zstd or lz4 chunks over 16 MB are compressed on
/// the CPU (one line on stderr says so). The levels: nvCOMP's zstd compressor has none (the
/// codec's level is recorded in the metadata but not applied); gzip and zlib levels pick the
/// nearest nvCOMP algorithm (fast up to level 3, medium up to 6, high above).
///
/// `Auto` compresses on the CPU: on an H100 every chunk compressed on the GPU read back
/// exactly, but nvCOMP compressed zstd and lz4 several times slower than 16 CPU cores
/// (docs/gpu-verification.md).
///
/// ```
/// use zarrbuf::options::WriteOptions;
/// use zarrbuf::options::Compress;
/// let o = WriteOptions::default().with_compress(Compress::Gpu);
/// assert_eq!(o.compress, Compress::Gpu);
/// assert_eq!("cpu".parse::<Compress>().unwrap(), Compress::Cpu);
/// assert!("tpu".parse::<Compress>().is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Compress {
    /// CPU threads compress every chunk.
    Cpu,
    /// The device compresses every chunk it can, in batches.
    Gpu,
    /// Today the CPU (see above).
    #[default]
    Auto,
}

impl std::str::FromStr for Compress {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "cpu" => Ok(Compress::Cpu),
            "gpu" => Ok(Compress::Gpu),
            "auto" => Ok(Compress::Auto),
            other => Err(format!(
                "unknown compress choice {other:?}; use cpu, gpu or auto"
            )),
        }
    }
}

/// How far a write to a directory store has gone before it is reported done.
///
/// Every write zarrbuf makes to a directory store (chunks, shards, metadata) goes to a
/// temporary file beside its key and is renamed into place, so whatever happens to the
/// writing process each key is absent, wholly old or wholly new — never torn. What differs is
/// a crash of the whole machine:
///
/// ```
/// use zarrbuf::options::WriteOptions;
/// use zarrbuf::options::Durability;
/// let o = WriteOptions::default().with_durability(Durability::Sync);
/// assert_eq!(o.durability, Durability::Sync);
/// assert_eq!("sync".parse::<Durability>().unwrap(), Durability::Sync);
/// assert!("fast".parse::<Durability>().is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Durability {
    /// Temporary file and rename (the default): safe against the writer being killed; after a
    /// power loss the operating system may not yet have written recent chunks back.
    #[default]
    Rename,
    /// Also `fsync` each file before its rename and its directory after: once the write
    /// returns, its chunks survive a power loss. Costs a disk flush per chunk (see
    /// docs/benchmarks.md). While such a write runs, every directory-store write of the
    /// process syncs.
    Sync,
}

impl std::str::FromStr for Durability {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "rename" => Ok(Durability::Rename),
            "sync" | "fsync" => Ok(Durability::Sync),
            other => Err(format!(
                "unknown durability {other:?}; use rename (the default) or sync"
            )),
        }
    }
}

/// The requested thread count, or every core.
fn threads_or_all_cores(requested: Option<usize>) -> usize {
    requested.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    })
}

/// Requests to an object store kept in flight when neither the options nor
/// `ZARRBUF_IO_CONCURRENCY` say: enough for a link with 80 ms to the first byte and 50 MiB/s
/// per connection, with chunks of 0.1–1 MiB (a request then takes 80–100 ms; 128 of them
/// carry 0.15–1.3 GB/s). tensorstore keeps 32 by default and reads such links best at 128.
/// Whole reads and checks scale it by the square root of the store's measured time to first
/// byte over 80 ms (at least 16 requests): a store next door needs few, and more only take
/// CPU time.
pub const DEFAULT_IO_CONCURRENCY: usize = 128;

/// The most requests to an object store one read or write keeps in flight, whatever it asks.
pub const MAX_IO_CONCURRENCY: usize = 1024;

/// The requests in flight a read or write of an object store keeps: `requested` (an option),
/// else the environment variable `ZARRBUF_IO_CONCURRENCY`, else [`DEFAULT_IO_CONCURRENCY`];
/// at least 1, at most [`MAX_IO_CONCURRENCY`]. An environment value that is not a positive
/// number is ignored.
///
/// ```
/// use zarrbuf::options::{io_concurrency, MAX_IO_CONCURRENCY};
/// assert_eq!(io_concurrency(Some(16)), 16);
/// assert_eq!(io_concurrency(Some(1 << 20)), MAX_IO_CONCURRENCY);
/// ```
pub fn io_concurrency(requested: Option<usize>) -> usize {
    requested
        .or_else(io_concurrency_from_env)
        .unwrap_or(DEFAULT_IO_CONCURRENCY)
        .clamp(1, MAX_IO_CONCURRENCY)
}

/// Whether neither `requested` nor `ZARRBUF_IO_CONCURRENCY` chose the requests in flight:
/// reads then take more of them for small chunks than [`DEFAULT_IO_CONCURRENCY`].
///
/// ```
/// assert!(!zarrbuf::options::io_concurrency_is_default(Some(16)));
/// ```
pub fn io_concurrency_is_default(requested: Option<usize>) -> bool {
    requested.is_none() && io_concurrency_from_env().is_none()
}

/// `ZARRBUF_IO_CONCURRENCY` when it is a positive number.
fn io_concurrency_from_env() -> Option<usize> {
    std::env::var("ZARRBUF_IO_CONCURRENCY")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
}

/// Options for reads.
///
/// ```
/// let o = zarrbuf::options::ReadOptions::default().with_concurrency(4).with_staging_bytes(64 << 20);
/// assert_eq!(o.concurrency, Some(4));
/// ```
#[derive(Clone)]
pub struct ReadOptions {
    /// CPU threads decoding chunks (default: all cores).
    pub concurrency: Option<usize>,
    /// Host memory for staging decoded chunks on their way to a device (default 256 MiB);
    /// it also bounds the aligned scratch of CPU reads into outputs that do not start on a
    /// cache line (at most 64 MiB, at least one row of chunks), and, with the device
    /// decoding ([`Decode::Gpu`], [`Decode::Both`]), the compressed bytes of its batches in
    /// device memory (each of the two in flight gets half).
    pub staging_bytes: usize,
    /// Verify checksums (crc32c, zstd checksums) while decoding (default true).
    pub validate_checksums: bool,
    /// Which path to take (default [`PipelineMode::Auto`]).
    pub mode: PipelineMode,
    /// Called as chunks complete.
    pub progress: Option<ProgressFn>,
    /// Where the staged pipeline decompresses (default [`Decode::Auto`]).
    pub decode: Decode,
    /// The largest output a read allocates, in bytes (default `None`: the host memory this
    /// process may still take — the system's available memory, its cgroup's limit and its
    /// address-space limit, whichever leaves least). A larger read is refused before
    /// anything is allocated ([`crate::Error::TooLarge`]), naming its size; read a subset
    /// instead. Outputs the caller passes in (`read_into`) are not limited.
    pub max_bytes: Option<u64>,
    /// A decoded-chunk cache the read consults and fills (default `None`: every chunk is
    /// decoded from the store). Set it with `with_cache` (see `zarrbuf::cache::ChunkCache`).
    pub cache: Option<CacheHandle>,
    /// Decode only the part of a chunk a small read needs (default true; see
    /// [`ReadOptions::with_decode_needed_prefix`]).
    pub decode_needed_prefix: bool,
    /// Requests to an object store a read keeps in flight ahead of its decoders (default
    /// `None`: `ZARRBUF_IO_CONCURRENCY`, else 128; see [`ReadOptions::with_io_concurrency`]).
    pub io_concurrency: Option<usize>,
    /// Where the staged read's device-decode route adds what each of its stages took
    /// (default `None`: nothing is timed). Set it with
    /// [`ReadOptions::with_stage_timings`].
    pub stage_timings: Option<Arc<StageTimings>>,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            concurrency: None,
            staging_bytes: 256 << 20,
            validate_checksums: true,
            mode: PipelineMode::Auto,
            progress: None,
            decode: Decode::Auto,
            max_bytes: None,
            cache: None,
            decode_needed_prefix: true,
            io_concurrency: None,
            stage_timings: None,
        }
    }
}

impl ReadOptions {
    /// Limits a read's output to `bytes` (see [`ReadOptions::max_bytes`]).
    ///
    /// ```
    /// use zarrbuf::{ArrayReadExt, BufferPrototype, options::ReadOptions};
    /// use zarrs::array::{ArrayBuilder, data_type};
    /// let store = std::sync::Arc::new(zarrs::storage::store::MemoryStore::new());
    /// let array = ArrayBuilder::new(vec![1_000_000], vec![1000], data_type::float64(), 0.0f64)
    ///     .build(store, "/x").map_err(|e| zarrbuf::Error::InvalidArgument(e.to_string()))?;
    /// let opts = ReadOptions::default().with_max_bytes(1 << 20);
    /// let err = array.read_opt(&[0..1_000_000], &BufferPrototype::cpu(), &opts).unwrap_err();
    /// assert!(matches!(err, zarrbuf::Error::TooLarge { bytes: 8_000_000, .. }));
    /// assert!(array.read_opt(&[0..1000], &BufferPrototype::cpu(), &opts).is_ok());
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn with_max_bytes(mut self, bytes: u64) -> Self {
        self.max_bytes = Some(bytes);
        self
    }

    /// Sets the number of decoding threads.
    pub fn with_concurrency(mut self, n: usize) -> Self {
        self.concurrency = Some(n.max(1));
        self
    }

    /// Sets the staging budget in bytes.
    pub fn with_staging_bytes(mut self, bytes: usize) -> Self {
        self.staging_bytes = bytes;
        self
    }

    /// Turns checksum validation on or off.
    pub fn with_validate_checksums(mut self, on: bool) -> Self {
        self.validate_checksums = on;
        self
    }

    /// Chooses the read path.
    pub fn with_mode(mut self, mode: PipelineMode) -> Self {
        self.mode = mode;
        self
    }

    /// Chooses where chunks are decompressed.
    pub fn with_decode(mut self, decode: Decode) -> Self {
        self.decode = decode;
        self
    }

    /// Decodes only the needed prefix of zstd, blosc (LZ4, zstd) and — without validated
    /// checksums — gzip and zlib chunks in small reads (on by default; `false` decodes
    /// every chunk whole).
    ///
    /// A chunk's elements are stored in C order, so a read that needs a few planes of a
    /// chunk needs only the decoded bytes up to its last element: a 1 × 64 × 64 patch at
    /// depth `k` of a 64³ chunk, `(k + 1) / 64` of the chunk, half of it on average. A zstd
    /// frame and a DEFLATE stream decode from their start, and a blosc frame's blocks are
    /// independent; small host reads (a few chunks or inner chunks, the route of a training
    /// loop's random patches) decode such chunks only that far (blosc: only the blocks that
    /// hold the read's elements, from its first in the chunk to its last).
    ///
    /// Why this is safe: a read returns only bytes the chunk's own structure vouches for.
    /// zstd and DEFLATE refer only to earlier data and blosc blocks to nothing outside
    /// themselves, so the bytes decoded from an intact prefix are the bytes that were
    /// written. Everything that can be checked without decoding the rest still is, and is
    /// refused with the whole decode's error: a zstd frame's header and declared content size
    /// (the chunk's size), every block header, blocks inside the stored bytes, no trailing
    /// bytes; a blosc frame's header, sizes and every block's and stream's place; a gzip or
    /// zlib header (and gzip's declared size). What goes unseen is damage inside the
    /// compressed contents after the prefix (and, for blosc, in the blocks before the
    /// read's first element) — which a whole decode does not always see
    /// either (a flipped bit in a raw or literal block decodes to other bytes); only a
    /// checksum does, and checksummed chunks decode whole. A read that needs those later
    /// elements reports the damage, and so does `check`. These chunks are decoded whole:
    /// those with a crc32c codec, zstd frames with a content checksum and gzip and zlib
    /// chunks (whose trailers are content checksums) while checksums are validated, frames
    /// that do not declare their size, several frames, other compressors (lz4, blosc's
    /// blosclz, snappy and zlib), byte-swapped or transposed layouts, reads through a
    /// [`crate::cache::ChunkCache`] (a cached chunk is decoded whole), the staged pipeline's
    /// reads, copies and `check`.
    ///
    /// ```
    /// let o = zarrbuf::options::ReadOptions::default().with_decode_needed_prefix(false);
    /// assert!(!o.decode_needed_prefix);
    /// assert!(zarrbuf::options::ReadOptions::default().decode_needed_prefix);
    /// ```
    pub fn with_decode_needed_prefix(mut self, on: bool) -> Self {
        self.decode_needed_prefix = on;
        self
    }

    /// Keeps up to `n` requests to an object store in flight (at least 1, at most 1024).
    ///
    /// Reads from object stores (`s3://`, `gs://`, `az://`, `http(s)://`) fetch chunks ahead
    /// of the decoders on I/O threads of their own: each request waits a round trip (20–80 ms
    /// on S3) before its bytes come, so a link is filled only with many requests at once —
    /// about latency × throughput ÷ chunk size. The default, 128 (or the environment variable
    /// `ZARRBUF_IO_CONCURRENCY`), fills a link with 80 ms to the first byte and 50 MiB/s per
    /// connection for chunks of 0.1–1 MiB. Left at the default, a read keeps fewer for a
    /// store that answers sooner — 128 × √(its time to first byte ÷ 80 ms)
    /// ([`time_to_first_byte`](crate::store::time_to_first_byte)), at least 16 requests or
    /// 4 MiB of them — and more for small chunks; a limit set here or in the environment is
    /// kept as it is. Bytes fetched and not yet decoded stay within
    /// [`ReadOptions::staging_bytes`]. Local stores are read by the decoding threads
    /// themselves and ignore this.
    ///
    /// ```
    /// let o = zarrbuf::options::ReadOptions::default().with_io_concurrency(32);
    /// assert_eq!(o.io_concurrency, Some(32));
    /// ```
    pub fn with_io_concurrency(mut self, n: usize) -> Self {
        self.io_concurrency = Some(n.max(1));
        self
    }

    /// Adds what each stage of the staged read's device-decode route takes (fetch, header
    /// walk, staging copy, host-to-device copy, batched decompression, scatter; see
    /// [`StageTimings`]) to `timings`, with the read's end-to-end time and the time its device
    /// was busy. For measurements: the device side is timed with CUDA events, which costs a
    /// few microseconds per chunk; reads without it time nothing.
    ///
    /// ```
    /// let t = std::sync::Arc::new(zarrbuf::options::StageTimings::default());
    /// let o = zarrbuf::options::ReadOptions::default().with_stage_timings(t);
    /// assert!(o.stage_timings.is_some());
    /// ```
    pub fn with_stage_timings(mut self, timings: Arc<StageTimings>) -> Self {
        self.stage_timings = Some(timings);
        self
    }

    /// Sets a progress callback.
    ///
    /// ```
    /// let o = zarrbuf::options::ReadOptions::default().with_progress(|p| eprintln!("{:.0}%", 100.0 * p.fraction()));
    /// assert!(o.progress.is_some());
    /// ```
    pub fn with_progress(mut self, f: impl Fn(Progress) + Send + Sync + 'static) -> Self {
        self.progress = Some(Arc::new(f));
        self
    }

    pub(crate) fn threads(&self) -> usize {
        threads_or_all_cores(self.concurrency)
    }

    pub(crate) fn codec_options(&self) -> zarrs::array::CodecOptions {
        zarrs::array::CodecOptions::default()
            .with_validate_checksums(self.validate_checksums)
            .with_concurrent_target(self.threads())
    }
}

/// Options for read streams ([`crate::ArrayReadAsyncExt::read_stream`],
/// [`crate::ArrayReadExt::read_stream`]).
///
/// `prefetch` is how many subsets are read at once, counting those finished but not yet
/// taken by the consumer: while the consumer works on item k, items k+1..=k+prefetch are
/// being read. `0` counts as `1` (one read in flight, none ahead). Memory held by a stream is
/// bounded by these options, not by the number of subsets: at most `prefetch` outputs, each
/// read's staging (at most `read.staging_bytes`, pooled) and the encoded chunks the reads in
/// flight share.
///
/// ```
/// use zarrbuf::options::ReadOptions;
/// use zarrbuf::options::StreamOptions;
/// let o = StreamOptions::default().with_prefetch(8).with_read(ReadOptions::default().with_concurrency(2));
/// assert_eq!(o.prefetch, 8);
/// assert_eq!(o.read.concurrency, Some(2));
/// assert_eq!(StreamOptions::default().prefetch, 4);
/// ```
#[derive(Clone)]
pub struct StreamOptions {
    /// Subsets read at once (default 4; `0` counts as `1`).
    pub prefetch: usize,
    /// Options of each subset's read (threads, staging, checksums, decode). A progress
    /// callback, if set, is called by every read with that read's own progress.
    pub read: ReadOptions,
}

impl Default for StreamOptions {
    fn default() -> Self {
        StreamOptions {
            prefetch: 4,
            read: ReadOptions::default(),
        }
    }
}

impl StreamOptions {
    /// Sets how many subsets are read at once.
    pub fn with_prefetch(mut self, n: usize) -> Self {
        self.prefetch = n;
        self
    }

    /// Sets the options of each subset's read.
    pub fn with_read(mut self, read: ReadOptions) -> Self {
        self.read = read;
        self
    }

    /// Reads in flight at most (`prefetch`, at least 1).
    pub(crate) fn in_flight(&self) -> usize {
        self.prefetch.max(1)
    }
}

/// Options for writes.
///
/// ```
/// let o = zarrbuf::options::WriteOptions::default().with_concurrency(2);
/// assert_eq!(o.concurrency, Some(2));
/// ```
#[derive(Clone)]
pub struct WriteOptions {
    /// CPU threads compressing chunks (default: all cores).
    pub concurrency: Option<usize>,
    /// Host memory for staging chunks coming back from a device (default 256 MiB).
    pub staging_bytes: usize,
    /// Write chunks that hold only the fill value (default false: they are erased, as zarrs does).
    pub store_empty_chunks: bool,
    /// Which path to take (see [`PipelineMode`]).
    pub mode: PipelineMode,
    /// Called as chunks complete (in the staged pipeline: once a chunk is encoded and
    /// queued for its store; the write returns after every store has finished).
    pub progress: Option<ProgressFn>,
    /// Where the staged pipeline compresses (default [`Compress::Auto`]).
    pub compress: Compress,
    /// Chunks the staged pipeline stores at once (default 16), on threads of their own:
    /// stores mostly wait (a file system store syncs each file, an object store waits a
    /// round trip), so more of them than compressing threads keep the disk or the network
    /// busy. Encoded chunks waiting for a store take at most `staging_bytes` more memory.
    pub store_concurrency: usize,
    /// What a directory store has done before a write is reported done (default
    /// [`Durability::Rename`]).
    pub durability: Durability,
    /// Chunks stored at once into an object store (default `None`: `ZARRBUF_IO_CONCURRENCY`,
    /// else 128; see [`WriteOptions::with_io_concurrency`]); local stores take
    /// `store_concurrency`.
    pub io_concurrency: Option<usize>,
}

impl Default for WriteOptions {
    fn default() -> Self {
        WriteOptions {
            concurrency: None,
            staging_bytes: 256 << 20,
            store_empty_chunks: false,
            mode: PipelineMode::Auto,
            progress: None,
            compress: Compress::Auto,
            store_concurrency: 16,
            durability: Durability::Rename,
            io_concurrency: None,
        }
    }
}

impl WriteOptions {
    /// Sets the number of compressing threads.
    pub fn with_concurrency(mut self, n: usize) -> Self {
        self.concurrency = Some(n.max(1));
        self
    }

    /// Sets how many chunks the staged pipeline stores at once (at least 1).
    ///
    /// ```
    /// let o = zarrbuf::options::WriteOptions::default().with_store_concurrency(4);
    /// assert_eq!(o.store_concurrency, 4);
    /// ```
    pub fn with_store_concurrency(mut self, n: usize) -> Self {
        self.store_concurrency = n.max(1);
        self
    }

    /// Stores up to `n` chunks into an object store at once (at least 1, at most 1024).
    ///
    /// Each upload to an object store waits a round trip before it is acknowledged, so the
    /// staged pipeline's store threads for `s3://`, `gs://`, `az://` and `http(s)://` arrays
    /// number this many (default 128, or `ZARRBUF_IO_CONCURRENCY`) instead of
    /// [`WriteOptions::store_concurrency`]. Every chunk is still one PUT: stored whole or not
    /// at all. Encoded chunks waiting for an upload take at most `staging_bytes`.
    ///
    /// ```
    /// let o = zarrbuf::options::WriteOptions::default().with_io_concurrency(64);
    /// assert_eq!(o.io_concurrency, Some(64));
    /// ```
    pub fn with_io_concurrency(mut self, n: usize) -> Self {
        self.io_concurrency = Some(n.max(1));
        self
    }

    /// Chooses the write path.
    pub fn with_mode(mut self, mode: PipelineMode) -> Self {
        self.mode = mode;
        self
    }

    /// Chooses where the staged pipeline compresses (see [`Compress`]).
    ///
    /// ```
    /// let o = zarrbuf::options::WriteOptions::default().with_compress(zarrbuf::options::Compress::Gpu);
    /// assert_eq!(o.compress, zarrbuf::options::Compress::Gpu);
    /// ```
    pub fn with_compress(mut self, compress: Compress) -> Self {
        self.compress = compress;
        self
    }

    /// Chooses what a directory store does before the write is reported done.
    pub fn with_durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// Writes chunks that hold only the fill value too (see `store_empty_chunks`).
    ///
    /// ```
    /// let o = zarrbuf::options::WriteOptions::default().with_store_empty_chunks(true);
    /// assert!(o.store_empty_chunks);
    /// ```
    pub fn with_store_empty_chunks(mut self, store: bool) -> Self {
        self.store_empty_chunks = store;
        self
    }

    /// Sets a progress callback.
    pub fn with_progress(mut self, f: impl Fn(Progress) + Send + Sync + 'static) -> Self {
        self.progress = Some(Arc::new(f));
        self
    }

    pub(crate) fn threads(&self) -> usize {
        threads_or_all_cores(self.concurrency)
    }

    pub(crate) fn codec_options(&self) -> zarrs::array::CodecOptions {
        zarrs::array::CodecOptions::default()
            .with_store_empty_chunks(self.store_empty_chunks)
            .with_concurrent_target(self.threads())
    }
}
