//! The command line's arguments (clap).

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use zarrbuf::options::{Compress, Decode};
use zarrbuf::{Result, options::OpenOptions};

#[derive(Parser)]
#[command(
    name = "zarrbuf",
    version,
    about = "Read zarr arrays into host or CUDA device memory"
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Subcommand)]
pub(crate) enum Command {
    /// Shape, chunks/shards, data type, codecs and fill value of an array; for a group, its
    /// hierarchy as a tree (groups, and each array's layout, codecs and stored size).
    Info {
        /// Store location: a directory path, a zip file or a URL (s3://, gs://, az://,
        /// http(s)://, file://).
        store: String,
        /// Path of the array or group inside the store (default: the store root).
        #[arg(long, default_value = "")]
        path: String,
        /// Print the hierarchy (of a group, or the one array) as JSON for scripts.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        version: VersionArgs,
    },
    /// Read an array (or a subset) and write it as .npy, or print a summary.
    Read {
        /// Store location: a directory path, a zip file or a URL (s3://, gs://, az://,
        /// http(s)://, file://).
        store: String,
        /// Path of the array inside the store.
        #[arg(long, default_value = "")]
        path: String,
        /// Half-open subset, one start:stop per dimension, e.g. 0:10,5:20.
        #[arg(long)]
        subset: Option<String>,
        /// Where to read to: cpu, cuda, cuda:N or auto (CUDA when present); default:
        /// ZARRBUF_DEVICE, else cpu.
        #[arg(long)]
        device: Option<String>,
        /// Write the result as a C-order little-endian .npy file.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Where to decompress: cpu, gpu (nvCOMP), both (CPU threads and the GPU at once) or
        /// auto (nvCOMP and the CPU together for zstd reads into CUDA memory of more than
        /// one device batch, as GPU runs measured fastest; the CPU otherwise; default).
        #[arg(long, default_value = "auto")]
        decode: Decode,
        /// Use the async (object_store) reader also for a directory path.
        #[arg(long = "async")]
        force_async: bool,
        /// The most memory the result may take, e.g. 512MiB, 2GiB or a byte count (default:
        /// the memory available to this process); a larger read is refused before anything
        /// is allocated: read a --subset of it instead.
        #[arg(long)]
        memory: Option<String>,
        /// Requests to an object store kept in flight (default: ZARRBUF_IO_CONCURRENCY, else
        /// 128 for a store 80 ms away, fewer for a nearer one, more for small chunks); local
        /// stores ignore it.
        #[arg(long, value_name = "N")]
        io_concurrency: Option<usize>,
        #[command(flatten)]
        version: VersionArgs,
    },
    /// Copy an array (or a subset) into a new array with other chunks, shards or codecs.
    Copy(Box<CopyCli>),
    /// Check a stored array for damage: chunks that do not decode, decode to the wrong size or
    /// fail their checksum, keys outside the chunk grid, temporary files of killed writes.
    /// Exits with status 1 when it finds any. Object stores are checked through their listing
    /// or, where the store does not list (a plain HTTP server), by fetching every key of the
    /// chunk grid.
    Check {
        /// Store location: a directory path, a zip file, an icechunk repository or a URL
        /// (s3://, gs://, az://, http(s)://, file://).
        store: String,
        /// Path of the array inside the store (default: the store root).
        #[arg(long, default_value = "")]
        path: String,
        /// Print the report as one JSON document.
        #[arg(long)]
        json: bool,
        /// Remove leftovers and undecodable chunks, and rewrite shards without their damaged
        /// inner chunks (which then read as the fill value); says what it did. Directory
        /// stores only.
        #[arg(long)]
        repair: bool,
        /// Requests to an object store kept in flight (default: ZARRBUF_IO_CONCURRENCY, else
        /// 128 for a store 80 ms away, fewer for a nearer one, more for small chunks); local
        /// stores ignore it.
        #[arg(long, value_name = "N")]
        io_concurrency: Option<usize>,
        #[command(flatten)]
        version: VersionArgs,
    },
    /// Median whole-array write throughput of zarrbuf and zarrs in one run: a float32 array of
    /// --mib MiB (shape MiB×512×512) with 64³ chunks, once per codec, written to fresh stores
    /// under DIR (also leaves DIR/data.npy for benches/write_peers.py).
    BenchWrite(BenchWriteCli),
    /// Median read throughput in decoded GB/s (the whole array, or a subset).
    Bench {
        /// Store location: a directory path, a zip file or a URL (s3://, gs://, az://,
        /// http(s)://, file://).
        store: String,
        /// Path of the array inside the store.
        #[arg(long, default_value = "")]
        path: String,
        /// Read only this half-open subset, e.g. 0:10,5:20 (default: the whole array).
        #[arg(long, conflicts_with = "subsets")]
        subset: Option<String>,
        /// Read the subsets listed in FILE (one start:stop,... per line) one at a time, all
        /// of them per repetition: the reads per second of each repetition and the median
        /// time of one read (small random reads, `benches/small_reads.py`).
        #[arg(long, value_name = "FILE")]
        subsets: Option<PathBuf>,
        /// Where to read to: cpu, cuda or cuda:N.
        #[arg(long)]
        device: Option<String>,
        /// Timed repetitions (after one warm-up read).
        #[arg(long, default_value_t = 5)]
        reps: usize,
        /// Where to decompress: cpu, gpu (nvCOMP), both or auto (default).
        #[arg(long, default_value = "auto")]
        decode: Decode,
        /// Use the async (object_store) reader also for a directory path.
        #[arg(long = "async")]
        force_async: bool,
        /// Read through the staged pipeline also into host memory (decode into staging
        /// slots, scatter on the decoding threads) instead of zarrs' decode-into.
        #[arg(long, conflicts_with = "direct")]
        staged: bool,
        /// Read host outputs with zarrs' decode-into whatever the read's size (the route
        /// small reads take; `PipelineMode::Direct`).
        #[arg(long)]
        direct: bool,
        /// Small reads decode every zstd chunk whole, instead of only up to their last
        /// element (`ReadOptions::with_decode_needed_prefix(false)`; see docs/caching.md).
        #[arg(long)]
        no_prefix_decode: bool,
        /// The default (small reads decode a zstd chunk only up to their last element);
        /// kept so that scripts written for the opt-in keep working.
        #[arg(long, hide = true, conflicts_with = "no_prefix_decode")]
        prefix_decode: bool,
        /// Requests to an object store kept in flight (default: ZARRBUF_IO_CONCURRENCY, else
        /// 128 for a store 80 ms away, fewer for a nearer one, more for small chunks); local
        /// stores ignore it.
        #[arg(long, value_name = "N")]
        io_concurrency: Option<usize>,
        /// Also measure the codec's limit: every stored chunk's (inner chunk's) compressed
        /// bytes read into memory, then decoded one after another on one thread into a
        /// reused buffer with a reused zstd context, one such pass after each timed read;
        /// prints that rate × the cores and the read's share of it (zarr v3, bytes + zstd
        /// chunks, a local store, the whole array).
        #[arg(long, conflicts_with_all = ["subset", "subsets", "force_async"])]
        codec_limit: bool,
        #[command(flatten)]
        version: VersionArgs,
    },
}

/// Which version of an icechunk repository to open (`info`, `read`, `bench`, `check`).
#[derive(clap::Args, Clone, Default)]
pub(crate) struct VersionArgs {
    /// Icechunk repositories: read the tip of this branch (default main).
    #[arg(long, conflicts_with_all = ["tag", "snapshot"])]
    pub(crate) branch: Option<String>,
    /// Icechunk repositories: read the snapshot this tag names.
    #[arg(long, conflicts_with = "snapshot")]
    pub(crate) tag: Option<String>,
    /// Icechunk repositories: read this snapshot (its id, e.g. 1CECHNKREP0F1RSTCMT0).
    #[arg(long)]
    pub(crate) snapshot: Option<String>,
    /// Icechunk repositories: a virtual chunk container (its URL prefix) that reads may
    /// fetch virtual chunks from, with credentials from the environment; repeatable.
    #[arg(long = "virtual-access", value_name = "URL_PREFIX")]
    pub(crate) virtual_access: Vec<String>,
}

impl VersionArgs {
    pub(crate) fn options(&self) -> Result<OpenOptions> {
        let version = zarrbuf::icechunk::IcechunkVersion::from_choice(
            self.branch.as_deref(),
            self.tag.as_deref(),
            self.snapshot.as_deref(),
        )?;
        let mut opts = OpenOptions::default();
        if let Some(v) = version {
            opts = opts.with_version(v);
        }
        for prefix in &self.virtual_access {
            opts = opts.with_virtual_access(prefix.clone());
        }
        Ok(opts)
    }
}

/// `zarrbuf bench-write`'s arguments.
#[derive(clap::Args)]
pub(crate) struct BenchWriteCli {
    /// Scratch directory for the stores (emptied between repetitions).
    pub(crate) dir: PathBuf,
    /// Array size in MiB.
    #[arg(long, default_value_t = 256)]
    pub(crate) mib: u64,
    /// Timed repetitions per writer and codec (after one warm-up write each).
    #[arg(long, default_value_t = 5)]
    pub(crate) reps: usize,
    /// Codecs to measure, comma-separated (see `copy --codec`).
    #[arg(long, default_value = "zstd:1,none")]
    pub(crate) codecs: String,
    /// Where the staged pipeline column compresses: cpu, gpu (its host twin here; nvCOMP
    /// with --device cuda) or auto (default: the CPU).
    #[arg(long, default_value = "auto")]
    pub(crate) compress: Compress,
    /// Where the staged pipeline column's data lives: cpu (default), cuda or cuda:N.
    #[arg(long)]
    pub(crate) device: Option<String>,
    /// Also measure sharded arrays: shards of N³ elements holding the 64³ chunks, the
    /// codecs inside the shard (N a multiple of 64).
    #[arg(long)]
    pub(crate) shards: Option<u64>,
    /// zarrbuf's writes sync each file and its directory (`Durability::Sync`; zarrs'
    /// column always syncs each file, writing in place).
    #[arg(long)]
    pub(crate) sync: bool,
}

/// `zarrbuf copy`'s arguments.
#[derive(clap::Args)]
pub(crate) struct CopyCli {
    /// Source store: a directory path, a zip file, or a URL (s3://, gs://, az://,
    /// http(s)://, file://; object-store options from the environment).
    pub(crate) src: String,
    /// Destination store: a directory path (created if missing), or a URL (s3://, gs://,
    /// az://, file://). Zip files are read-only.
    pub(crate) dst: String,
    /// Path of the array inside the source store.
    #[arg(long, default_value = "")]
    pub(crate) src_path: String,
    /// Path of the new array inside the destination store.
    #[arg(long, default_value = "")]
    pub(crate) dst_path: String,
    /// A layout chosen for the reader: `gpu` writes shards of about 64 MiB holding inner
    /// chunks of about 128 KiB compressed with zstd 1, so that a GPU decompresses thousands
    /// of frames at once (--chunks, --shards and --codec override its parts).
    #[arg(long, value_parser = ["gpu"])]
    pub(crate) layout: Option<String>,
    /// Destination chunk shape, e.g. 64,64,64 (inner chunks when --shards is given;
    /// default: the source's).
    #[arg(long)]
    pub(crate) chunks: Option<String>,
    /// Destination shard shape, a multiple of the chunks, e.g. 256,256,256 (default: the
    /// source's shards when --chunks is not given either, else no sharding).
    #[arg(long)]
    pub(crate) shards: Option<String>,
    /// Compressors and checksums: none, zstd:LEVEL, gzip:LEVEL,
    /// blosc:CNAME:CLEVEL:SHUFFLE, crc32c, joined by + (e.g. zstd:3+crc32c; default: the
    /// source's).
    #[arg(long)]
    pub(crate) codec: Option<String>,
    /// Zarr format of the destination: 3 (zarr v2 output is not written).
    #[arg(long)]
    pub(crate) zarr_format: Option<u8>,
    /// Copy only this half-open subset of the source, e.g. 0:10,5:20.
    #[arg(long)]
    pub(crate) subset: Option<String>,
    /// Where each block is staged between read and write: cpu, cuda, cuda:N or auto.
    #[arg(long)]
    pub(crate) device: Option<String>,
    /// Memory for the blocks in flight, e.g. 512MiB, 2GiB or a byte count (default 1GiB):
    /// two at most (one written while the next is read), each at most half of it and at
    /// most 64 MiB, never smaller than one destination chunk (shard).
    #[arg(long, default_value = "1GiB")]
    pub(crate) memory: String,
    /// Replace an existing array (or group) at the destination; everything under its
    /// path is deleted first.
    #[arg(long, conflicts_with = "resume")]
    pub(crate) overwrite: bool,
    /// Continue a copy that was interrupted: give the same arguments again; blocks whose
    /// destination chunks are all stored and decode are skipped, the rest written.
    #[arg(long)]
    pub(crate) resume: bool,
    /// Sync every destination file and its directory before a chunk counts as written
    /// (survives power loss; slower). Without it each chunk is still written atomically.
    #[arg(long)]
    pub(crate) sync: bool,
    /// Where to compress the destination's chunks: cpu, gpu (nvCOMP, for blocks staged on
    /// a CUDA --device) or auto (default: the CPU).
    #[arg(long, default_value = "auto")]
    pub(crate) compress: Compress,
    /// Icechunk destination: the branch to commit the copy to, as one snapshot, when the
    /// whole copy succeeded (default main; a missing or empty directory becomes a new
    /// repository).
    #[arg(long)]
    pub(crate) branch: Option<String>,
    /// Refused: a tag names a snapshot that never changes (commit to a --branch).
    #[arg(long)]
    pub(crate) tag: Option<String>,
    /// Refused: a snapshot never changes (commit to a --branch).
    #[arg(long)]
    pub(crate) snapshot: Option<String>,
    /// Icechunk destination: the commit message (default: says what was copied).
    #[arg(long)]
    pub(crate) message: Option<String>,
    /// Icechunk source: read the tip of this branch (default main).
    #[arg(long, conflicts_with_all = ["src_tag", "src_snapshot"])]
    pub(crate) src_branch: Option<String>,
    /// Icechunk source: read the snapshot this tag names.
    #[arg(long, conflicts_with = "src_snapshot")]
    pub(crate) src_tag: Option<String>,
    /// Icechunk source: read this snapshot (its id).
    #[arg(long)]
    pub(crate) src_snapshot: Option<String>,
    /// Icechunk source: a virtual chunk container (URL prefix) reads may fetch from;
    /// repeatable.
    #[arg(long = "virtual-access", value_name = "URL_PREFIX")]
    pub(crate) virtual_access: Vec<String>,
    /// Requests to an object store kept in flight, reading the source and writing the
    /// destination (default: ZARRBUF_IO_CONCURRENCY, else 128); local stores ignore it.
    #[arg(long, value_name = "N")]
    pub(crate) io_concurrency: Option<usize>,
}
