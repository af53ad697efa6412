//! The `zarrbuf` command line: inspect, read and benchmark zarr arrays on the CPU or a GPU.

use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::ops::Range;
use std::path::PathBuf;
use std::time::Instant;
use zarrbuf::{
    ArrayReadExt, BufferPrototype, Compress, Decode, Device, Durability, Error, NDBuffer,
    OpenOptions, ReadOptions, Result,
};

/// The CLI's Rust allocations (encoded chunks as stores read them — object_store's local
/// files zero-fill each one first —, zarrs' per-chunk decode buffers) come from mimalloc,
/// which keeps freed memory for reuse. With glibc's malloc those ~1 MiB buffers were trimmed
/// back to the OS when freed, so every chunk faulted fresh pages in again: a third of the
/// time of an async read of an uncompressed 256 MiB array was the kernel zeroing pages.
/// Output buffers are zarrbuf's own (block cache) either way.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "zarrbuf",
    version,
    about = "Read zarr arrays into host or CUDA device memory"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
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
        /// auto (the fastest measured: today cpu; default).
        #[arg(long, default_value = "auto")]
        decode: Decode,
        /// Use the async (object_store) reader also for a directory path.
        #[arg(long = "async")]
        force_async: bool,
        #[command(flatten)]
        version: VersionArgs,
    },
    /// Copy an array (or a subset) into a new array with other chunks, shards or codecs.
    Copy(Box<CopyCli>),
    /// Check a stored array for damage: chunks that do not decode, decode to the wrong size or
    /// fail their checksum, keys outside the chunk grid, temporary files of killed writes.
    /// Exits with status 1 when it finds any.
    Check {
        /// Store location: a directory path, a zip file or a file:// URL.
        store: String,
        /// Path of the array inside the store (default: the store root).
        #[arg(long, default_value = "")]
        path: String,
        /// Print the report as one JSON document.
        #[arg(long)]
        json: bool,
        /// Remove leftovers and undecodable chunks, and rewrite shards without their damaged
        /// inner chunks (which then read as the fill value); says what it did.
        #[arg(long)]
        repair: bool,
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
        #[arg(long)]
        subset: Option<String>,
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
        #[command(flatten)]
        version: VersionArgs,
    },
}

/// Which version of an icechunk repository to open (`info`, `read`, `bench`, `check`).
#[derive(clap::Args, Clone, Default)]
struct VersionArgs {
    /// Icechunk repositories: read the tip of this branch (default main).
    #[arg(long, conflicts_with_all = ["tag", "snapshot"])]
    branch: Option<String>,
    /// Icechunk repositories: read the snapshot this tag names.
    #[arg(long, conflicts_with = "snapshot")]
    tag: Option<String>,
    /// Icechunk repositories: read this snapshot (its id, e.g. 1CECHNKREP0F1RSTCMT0).
    #[arg(long)]
    snapshot: Option<String>,
    /// Icechunk repositories: a virtual chunk container (its URL prefix) that reads may
    /// fetch virtual chunks from, with credentials from the environment; repeatable.
    #[arg(long = "virtual-access", value_name = "URL_PREFIX")]
    virtual_access: Vec<String>,
}

impl VersionArgs {
    fn options(&self) -> Result<OpenOptions> {
        let version = zarrbuf::IcechunkVersion::from_choice(
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
struct BenchWriteCli {
    /// Scratch directory for the stores (emptied between repetitions).
    dir: PathBuf,
    /// Array size in MiB.
    #[arg(long, default_value_t = 256)]
    mib: u64,
    /// Timed repetitions per writer and codec (after one warm-up write each).
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// Codecs to measure, comma-separated (see `copy --codec`).
    #[arg(long, default_value = "zstd:1,none")]
    codecs: String,
    /// Where the staged pipeline column compresses: cpu, gpu (its host twin here; nvCOMP
    /// with --device cuda) or auto (default: the CPU).
    #[arg(long, default_value = "auto")]
    compress: Compress,
    /// Where the staged pipeline column's data lives: cpu (default), cuda or cuda:N.
    #[arg(long)]
    device: Option<String>,
    /// Also measure sharded arrays: shards of N³ elements holding the 64³ chunks, the
    /// codecs inside the shard (N a multiple of 64).
    #[arg(long)]
    shards: Option<u64>,
    /// zarrbuf's writes sync each file and its directory (`Durability::Sync`; zarrs'
    /// column always syncs each file, writing in place).
    #[arg(long)]
    sync: bool,
}

/// `zarrbuf copy`'s arguments.
#[derive(clap::Args)]
struct CopyCli {
    /// Source store: a directory path, a zip file, or a URL (s3://, gs://, az://,
    /// http(s)://, file://; object-store options from the environment).
    src: String,
    /// Destination store: a directory path (created if missing), or a URL (s3://, gs://,
    /// az://, file://). Zip files are read-only.
    dst: String,
    /// Path of the array inside the source store.
    #[arg(long, default_value = "")]
    src_path: String,
    /// Path of the new array inside the destination store.
    #[arg(long, default_value = "")]
    dst_path: String,
    /// A layout chosen for the reader: `gpu` writes shards of about 64 MiB holding inner
    /// chunks of about 128 KiB compressed with zstd 1, so that a GPU decompresses thousands
    /// of frames at once (--chunks, --shards and --codec override its parts).
    #[arg(long, value_parser = ["gpu"])]
    layout: Option<String>,
    /// Destination chunk shape, e.g. 64,64,64 (inner chunks when --shards is given;
    /// default: the source's).
    #[arg(long)]
    chunks: Option<String>,
    /// Destination shard shape, a multiple of the chunks, e.g. 256,256,256 (default: the
    /// source's shards when --chunks is not given either, else no sharding).
    #[arg(long)]
    shards: Option<String>,
    /// Compressors and checksums: none, zstd:LEVEL, gzip:LEVEL,
    /// blosc:CNAME:CLEVEL:SHUFFLE, crc32c, joined by + (e.g. zstd:3+crc32c; default: the
    /// source's).
    #[arg(long)]
    codec: Option<String>,
    /// Zarr format of the destination: 3 (zarr v2 output is not written).
    #[arg(long)]
    zarr_format: Option<u8>,
    /// Copy only this half-open subset of the source, e.g. 0:10,5:20.
    #[arg(long)]
    subset: Option<String>,
    /// Where each block is staged between read and write: cpu, cuda, cuda:N or auto.
    #[arg(long)]
    device: Option<String>,
    /// Memory for one block, e.g. 512MiB, 2GiB or a byte count (default 1GiB); a block
    /// is never smaller than one destination chunk (shard).
    #[arg(long, default_value = "1GiB")]
    memory: String,
    /// Replace an existing array (or group) at the destination; everything under its
    /// path is deleted first.
    #[arg(long, conflicts_with = "resume")]
    overwrite: bool,
    /// Continue a copy that was interrupted: give the same arguments again; blocks whose
    /// destination chunks are all stored and decode are skipped, the rest written.
    #[arg(long)]
    resume: bool,
    /// Sync every destination file and its directory before a chunk counts as written
    /// (survives power loss; slower). Without it each chunk is still written atomically.
    #[arg(long)]
    sync: bool,
    /// Where to compress the destination's chunks: cpu, gpu (nvCOMP, for blocks staged on
    /// a CUDA --device) or auto (default: the CPU).
    #[arg(long, default_value = "auto")]
    compress: Compress,
    /// Icechunk destination: the branch to commit the copy to, as one snapshot, when the
    /// whole copy succeeded (default main; a missing or empty directory becomes a new
    /// repository).
    #[arg(long)]
    branch: Option<String>,
    /// Refused: a tag names a snapshot that never changes (commit to a --branch).
    #[arg(long)]
    tag: Option<String>,
    /// Refused: a snapshot never changes (commit to a --branch).
    #[arg(long)]
    snapshot: Option<String>,
    /// Icechunk destination: the commit message (default: says what was copied).
    #[arg(long)]
    message: Option<String>,
    /// Icechunk source: read the tip of this branch (default main).
    #[arg(long, conflicts_with_all = ["src_tag", "src_snapshot"])]
    src_branch: Option<String>,
    /// Icechunk source: read the snapshot this tag names.
    #[arg(long, conflicts_with = "src_snapshot")]
    src_tag: Option<String>,
    /// Icechunk source: read this snapshot (its id).
    #[arg(long)]
    src_snapshot: Option<String>,
    /// Icechunk source: a virtual chunk container (URL prefix) reads may fetch from;
    /// repeatable.
    #[arg(long = "virtual-access", value_name = "URL_PREFIX")]
    virtual_access: Vec<String>,
}

fn main() {
    // A bug must still end as one `error:` line, not a backtrace.
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        eprintln!("error: internal error (please report): {msg}");
    }));
    let cli = Cli::parse();
    let result = std::panic::catch_unwind(|| run(cli));
    match result {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            eprintln!("error: {}", one_line(&e.to_string()));
            std::process::exit(1);
        }
        Err(_) => std::process::exit(101),
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// zarrs knows an array only by its node path; name the store in messages too.
fn relabel(e: Error, store: &str, path: &str) -> Error {
    match e {
        Error::Zarr {
            array,
            message,
            source,
            ..
        } if !array.contains(store) => Error::Zarr {
            array: zarrbuf::location_label(store, path),
            message,
            source,
        },
        other => other,
    }
}

fn run(cli: Cli) -> Result<()> {
    let (store, path) = match &cli.command {
        Command::Info { store, path, .. }
        | Command::Check { store, path, .. }
        | Command::Read { store, path, .. }
        | Command::Bench { store, path, .. } => (store.clone(), path.clone()),
        // Copy errors name their array (source or destination) themselves.
        Command::Copy(_) | Command::BenchWrite(_) => return dispatch(cli),
    };
    dispatch(cli).map_err(|e| relabel(e, &store, &path))
}

fn dispatch(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Info {
            store,
            path,
            json,
            version,
        } => info(&store, &path, json, &version.options()?),
        Command::Read {
            store,
            path,
            subset,
            device,
            out,
            decode,
            force_async,
            version,
        } => read(
            &store,
            &path,
            subset.as_deref(),
            device.as_deref(),
            out,
            decode,
            &Opening {
                force_async,
                options: version.options()?,
            },
        ),
        Command::Copy(args) => copy(&args),
        Command::Check {
            store,
            path,
            json,
            repair,
            version,
        } => check(&store, &path, json, repair, &version.options()?),
        Command::BenchWrite(args) => bench_write(&args),
        Command::Bench {
            store,
            path,
            subset,
            device,
            reps,
            decode,
            force_async,
            staged,
            direct,
            version,
        } => {
            let mode = match (staged, direct) {
                (true, _) => zarrbuf::PipelineMode::Staged,
                (_, true) => zarrbuf::PipelineMode::Direct,
                _ => zarrbuf::PipelineMode::Auto,
            };
            bench(
                &store,
                &path,
                subset.as_deref(),
                device.as_deref(),
                reps,
                &Opening {
                    force_async,
                    options: version.options()?,
                },
                &ReadOptions::default().with_decode(decode).with_mode(mode),
            )
        }
    }
}

fn prototype(device: Option<&str>) -> Result<BufferPrototype> {
    match device {
        None => zarrbuf::default_prototype(),
        Some("auto") => {
            let device = if Device::Cuda(0).is_available() {
                Device::Cuda(0)
            } else {
                Device::Cpu
            };
            Ok(BufferPrototype::for_device(device))
        }
        Some(d) => {
            let device: Device = d.parse().map_err(|_| {
                Error::InvalidArgument(format!("--device {d:?}: use cpu, cuda, cuda:N or auto"))
            })?;
            device.check_available()?;
            Ok(BufferPrototype::for_device(device))
        }
    }
}

/// How `read` and `bench` open their array: the async reader also for a directory, and the
/// icechunk version.
struct Opening {
    force_async: bool,
    options: OpenOptions,
}

/// An array opened from a directory (sync) or a URL (async, driven by a tokio runtime).
enum Source {
    Local(Box<zarrbuf::DynArray>),
    Remote(Box<zarrbuf::AsyncArray>, tokio::runtime::Runtime),
}

impl Source {
    fn open(store: &str, path: &str, force_async: bool, opts: &OpenOptions) -> Result<Self> {
        let remote = store
            .split_once("://")
            .is_some_and(|(scheme, _)| scheme != "file" && scheme != "memory");
        if !remote && !force_async {
            return Ok(Source::Local(Box::new(zarrbuf::open_with(
                store, path, opts,
            )?)));
        }
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .map_err(|e| Error::InvalidArgument(format!("cannot start the async runtime: {e}")))?;
        let array = rt.block_on(zarrbuf::open_async_with(store, path, opts))?;
        Ok(Source::Remote(Box::new(array), rt))
    }

    fn shape(&self) -> Vec<u64> {
        match self {
            Source::Local(a) => a.shape().to_vec(),
            Source::Remote(a, _) => a.shape().to_vec(),
        }
    }

    fn describe(&self) -> Result<zarrbuf::ArrayInfo> {
        match self {
            Source::Local(a) => zarrbuf::describe(a.as_ref()),
            Source::Remote(a, _) => zarrbuf::describe(a.as_ref()),
        }
    }

    fn read(
        &self,
        subset: &[Range<u64>],
        proto: &BufferPrototype,
        opts: &ReadOptions,
    ) -> Result<NDBuffer> {
        use zarrbuf::ArrayReadAsyncExt;
        match self {
            Source::Local(a) => a.read_opt(subset, proto, opts),
            Source::Remote(a, rt) => rt.block_on(a.read_opt_async(subset, proto, opts)),
        }
    }
}

fn info(store: &str, path: &str, json: bool, opts: &OpenOptions) -> Result<()> {
    if json {
        let hierarchy = zarrbuf::list_hierarchy_with(store, path, opts)?;
        let text = serde_json::to_string_pretty(&hierarchy)
            .map_err(|e| Error::InvalidArgument(format!("cannot write the JSON: {e}")))?;
        println!("{text}");
        return Ok(());
    }
    let array = match Source::open(store, path, false, opts) {
        Ok(array) => array,
        Err(Error::IsGroup { .. }) => {
            print!("{}", zarrbuf::list_hierarchy_with(store, path, opts)?);
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    let i = array.describe()?;
    println!("array:      {}", zarrbuf::location_label(store, path));
    println!("zarr:       v{}", i.zarr_format);
    println!("shape:      {:?}", i.shape);
    match &i.inner_chunks {
        Some(inner) => {
            println!("shards:     {:?}", i.chunks);
            println!("chunks:     {inner:?} (inside each shard)");
        }
        None => println!("chunks:     {:?}", i.chunks),
    }
    println!("data type:  {}", i.data_type);
    println!("codecs:     {}", i.codecs.join(", "));
    println!("fill value: {}", i.fill_value);
    Ok(())
}

fn progress_options(total_hint: &str) -> (ReadOptions, Option<ProgressBar>) {
    let opts = ReadOptions::default();
    if !std::io::stderr().is_terminal() {
        return (opts, None);
    }
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg} [{bar:30}] {pos}/{len} chunks {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_message(total_hint.to_string());
    let b = bar.clone();
    let opts = opts.with_progress(move |p| {
        b.set_length(p.chunks_total as u64);
        b.set_position(p.chunks_done as u64);
    });
    (opts, Some(bar))
}

fn read(
    store: &str,
    path: &str,
    subset: Option<&str>,
    device: Option<&str>,
    out: Option<PathBuf>,
    decode: Decode,
    opening: &Opening,
) -> Result<()> {
    let proto = prototype(device)?;
    let array = Source::open(store, path, opening.force_async, &opening.options)?;
    let shape = array.shape();
    let ranges = match subset {
        Some(s) => zarrbuf::parse_subset(s, &shape)?,
        None => shape.iter().map(|&n| 0..n).collect(),
    };
    let (opts, bar) = progress_options("reading");
    let opts = opts.with_decode(decode);
    let start = Instant::now();
    let data = array.read(&ranges, &proto, &opts)?;
    let seconds = start.elapsed().as_secs_f64();
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    match out {
        Some(file) => {
            zarrbuf::npy::write(&file, &data)?;
            eprintln!(
                "wrote {} ({:?} {}) read in {:.3} s",
                file.display(),
                data.shape(),
                data.dtype(),
                seconds
            );
        }
        None => summary(&data, seconds)?,
    }
    Ok(())
}

fn summary(data: &NDBuffer, seconds: f64) -> Result<()> {
    // Hash in place when the result already sits in host memory, C-contiguous and
    // little-endian: a copy would double the peak memory of a whole-array read.
    let crc = if data.is_c_contiguous()
        && data.byte_order() == zarrbuf::ByteOrder::Little
        && data.buffer().is_host_accessible()
    {
        let host = data.buffer().as_host_bytes()?;
        crc32fast::hash(&host[data.offset()..data.offset() + data.nbytes()])
    } else {
        crc32fast::hash(&data.to_native_bytes()?)
    };
    println!("shape:      {:?}", data.shape());
    println!("dtype:      {}", data.dtype());
    println!("memory:     {}", data.memory());
    println!("checksum:   crc32 {crc:08x} (C order, little-endian)");
    println!(
        "throughput: {:.3} GB/s ({} bytes in {:.4} s)",
        data.nbytes() as f64 / seconds.max(1e-9) / 1e9,
        data.nbytes(),
        seconds
    );
    Ok(())
}

fn bench(
    store: &str,
    path: &str,
    subset: Option<&str>,
    device: Option<&str>,
    reps: usize,
    opening: &Opening,
    opts: &ReadOptions,
) -> Result<()> {
    if reps == 0 {
        return Err(Error::InvalidArgument("--reps must be at least 1".into()));
    }
    let proto = prototype(device)?;
    let array = Source::open(store, path, opening.force_async, &opening.options)?;
    let shape = array.shape();
    let all: Vec<Range<u64>> = match subset {
        Some(s) => zarrbuf::parse_subset(s, &shape)?,
        None => shape.iter().map(|&n| 0..n).collect(),
    };
    let warm = array.read(&all, &proto, opts)?;
    let bytes = warm.nbytes();
    drop(warm);
    let mut rates = Vec::with_capacity(reps);
    for _ in 0..reps {
        let start = Instant::now();
        let data = array.read(&all, &proto, opts)?;
        let s = start.elapsed().as_secs_f64();
        drop(data);
        rates.push(bytes as f64 / s.max(1e-9) / 1e9);
    }
    rates.sort_by(f64::total_cmp);
    let median = rates[rates.len() / 2];
    println!(
        "{}: {bytes} bytes into {}: median {median:.3} GB/s over {reps} reads (min {:.3}, max {:.3})",
        zarrbuf::location_label(store, path),
        proto.memory(),
        rates[0],
        rates[rates.len() - 1]
    );
    Ok(())
}

/// `--chunks 64,64,64` → `[64, 64, 64]`.
fn parse_shape(what: &str, text: &str) -> Result<Vec<u64>> {
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    text.split(',')
        .map(|p| {
            p.trim().parse::<u64>().map_err(|_| {
                Error::InvalidArgument(format!(
                    "--{what} {text:?}: {p:?} is not a positive integer; give one size per dimension, e.g. 64,64,64"
                ))
            })
        })
        .collect()
}

/// `--memory 512MiB` → bytes (units B, KiB, MiB, GiB, KB, MB, GB; none means bytes).
fn parse_bytes(text: &str) -> Result<usize> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let scale: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kib" | "k" => 1 << 10,
        "mib" | "m" => 1 << 20,
        "gib" | "g" => 1 << 30,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        _ => 0,
    };
    match num.parse::<u64>() {
        Ok(n) if scale > 0 && n > 0 => usize::try_from(n.saturating_mul(scale)).map_err(|_| {
            Error::InvalidArgument(format!(
                "--memory {text:?} is larger than this machine can address"
            ))
        }),
        _ => Err(Error::InvalidArgument(format!(
            "--memory {text:?}: give a positive size such as 512MiB, 2GiB or 1000000"
        ))),
    }
}

/// The directory of a local store location (a path or a file:// URL); `None` for the URL of
/// an object store.
fn local_dir(location: &str) -> Option<PathBuf> {
    match location.split_once("://") {
        None => Some(PathBuf::from(location)),
        Some(("file", rest)) => Some(PathBuf::from(rest)),
        Some(_) => None,
    }
}

/// Whether `src` and `dst` are the same store (the same directory, or the same URL).
fn same_store(src: &str, dst: &str) -> bool {
    match (local_dir(src), local_dir(dst)) {
        (Some(s), Some(d)) => matches!(
            (std::fs::canonicalize(s), std::fs::canonicalize(d)),
            (Ok(s), Ok(d)) if s == d
        ),
        (None, None) => src.trim_end_matches('/') == dst.trim_end_matches('/'),
        _ => false,
    }
}

/// The destination store of a copy: a local directory (created if missing; a zip file is
/// refused) or an object-store URL.
fn destination_store(
    a: &CopyCli,
) -> Result<std::sync::Arc<dyn zarrs::storage::ReadableWritableListableStorageTraits>> {
    let Some(dir) = local_dir(&a.dst) else {
        return zarrbuf::open_store(&a.dst);
    };
    refuse_zip_destination(a, &dir)?;
    std::fs::create_dir_all(&dir).map_err(|e| Error::Io {
        path: dir.display().to_string(),
        source: e,
    })?;
    zarrbuf::open_store(&dir.to_string_lossy())
}

/// Refuses a zip file (or a path named `.zip`) as copy's destination: zip stores are read
/// only. Other files are refused as not being directories.
fn refuse_zip_destination(a: &CopyCli, dst: &std::path::Path) -> Result<()> {
    let named_zip = dst
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("zip"));
    if named_zip || dst.is_file() {
        let zip = named_zip || {
            use std::io::Read;
            let mut head = [0u8; 4];
            std::fs::File::open(dst)
                .and_then(|mut f| f.read_exact(&mut head))
                .is_ok_and(|()| &head == b"PK\x03\x04" || &head == b"PK\x05\x06")
        };
        let why = if zip {
            format!(
                "zip stores are read-only in zarrbuf; copy the array into a directory instead: \
                 zarrbuf copy {} out.zarr",
                a.src
            )
        } else {
            "it is a file, not a directory; give a directory path (created if missing)".into()
        };
        return Err(Error::Unsupported(format!(
            "copy destination {}: {why}",
            a.dst
        )));
    }
    Ok(())
}

/// The destination layout `copy`'s flags ask for (`shape`: the copied shape, `elem_bytes`:
/// the data type's size, for `--layout gpu`).
fn copy_layout(a: &CopyCli, shape: &[u64], elem_bytes: usize) -> Result<zarrbuf::ArrayLayout> {
    let base = match a.layout.as_deref() {
        Some(_) => zarrbuf::ArrayLayout::for_gpu(shape, elem_bytes),
        None => zarrbuf::ArrayLayout::default(),
    };
    let parse =
        |what, text: &Option<String>| text.as_deref().map(|c| parse_shape(what, c)).transpose();
    Ok(zarrbuf::ArrayLayout {
        chunks: parse("chunks", &a.chunks)?.or(base.chunks),
        shards: parse("shards", &a.shards)?.or(base.shards),
        codecs: a
            .codec
            .as_deref()
            .map(str::parse)
            .transpose()?
            .or(base.codecs),
        zarr_format: a.zarr_format,
    })
}

/// The branch a copy commits to when its destination is an icechunk repository (named by
/// `--branch`/`--message`, or a directory laid out as one); `None` for a zarr store.
fn icechunk_destination(a: &CopyCli) -> Result<Option<String>> {
    if let Some((flag, name)) = a
        .tag
        .as_ref()
        .map(|t| ("--tag", t))
        .or(a.snapshot.as_ref().map(|s| ("--snapshot", s)))
    {
        return Err(Error::Unsupported(format!(
            "copy writes into a branch of an icechunk repository, and {flag} {name} names a              snapshot, which never changes; give --branch NAME instead (the copy is committed              there as one snapshot)"
        )));
    }
    let repository = zarrbuf::is_icechunk_repository(&a.dst);
    if a.branch.is_none() && a.message.is_none() && !repository {
        return Ok(None);
    }
    if a.resume {
        return Err(Error::InvalidArgument(
            "--resume continues a copy into a zarr store; a failed copy into an icechunk              repository committed nothing, so run it again without --resume"
                .into(),
        ));
    }
    Ok(Some(a.branch.clone().unwrap_or_else(|| "main".into())))
}

/// A writable session on a branch of an icechunk repository (feature `icechunk`).
#[cfg(feature = "icechunk")]
type Writer = zarrbuf::IcechunkWriter;

#[cfg(feature = "icechunk")]
fn open_writer(dst: &str, branch: &str) -> Result<Writer> {
    zarrbuf::IcechunkWriter::open(dst, branch)
}

#[cfg(feature = "icechunk")]
fn writer_store(
    w: &Writer,
) -> std::sync::Arc<dyn zarrs::storage::ReadableWritableListableStorageTraits> {
    w.store()
}

#[cfg(feature = "icechunk")]
fn commit(w: Writer, message: &str) -> Result<String> {
    w.commit(message)
}

/// Without the `icechunk` feature there is no writer: opening one says so.
#[cfg(not(feature = "icechunk"))]
enum Writer {}

#[cfg(not(feature = "icechunk"))]
fn open_writer(dst: &str, _branch: &str) -> Result<Writer> {
    Err(Error::Unsupported(format!(
        "{dst} is an icechunk destination, and this zarrbuf was built without icechunk \
         support; rebuild it with the `icechunk` feature (cargo install --path . --features \
         icechunk; it needs Rust 1.95)"
    )))
}

#[cfg(not(feature = "icechunk"))]
fn writer_store(
    w: &Writer,
) -> std::sync::Arc<dyn zarrs::storage::ReadableWritableListableStorageTraits> {
    match *w {}
}

#[cfg(not(feature = "icechunk"))]
fn commit(w: Writer, _message: &str) -> Result<String> {
    match w {}
}

fn copy(a: &CopyCli) -> Result<()> {
    let proto = prototype(a.device.as_deref())?;
    let memory_bytes = parse_bytes(&a.memory)?;
    let branch = icechunk_destination(a)?;
    if branch.is_none()
        && let Some(dir) = local_dir(&a.dst)
    {
        refuse_zip_destination(a, &dir)?;
    }
    let src_opts = VersionArgs {
        branch: a.src_branch.clone(),
        tag: a.src_tag.clone(),
        snapshot: a.src_snapshot.clone(),
        virtual_access: a.virtual_access.clone(),
    }
    .options()?;
    let src = zarrbuf::open_with(&a.src, &a.src_path, &src_opts)
        .map_err(|e| relabel(e, &a.src, &a.src_path))?;
    // Into an icechunk branch the source is read from the snapshot it was opened at, which
    // the copy's writes never change.
    if branch.is_none() {
        refuse_overlap(a)?;
    }
    let shape = src.shape().to_vec();
    let ranges = match a.subset.as_deref() {
        Some(s) => zarrbuf::parse_subset(s, &shape)?,
        None => shape.iter().map(|&n| 0..n).collect(),
    };
    let new_shape: Vec<u64> = ranges.iter().map(|r| r.end - r.start).collect();
    let layout = copy_layout(a, &new_shape, zarrbuf::describe(&src)?.data_type.size())?;
    let writer = branch
        .as_deref()
        .map(|b| open_writer(&a.dst, b))
        .transpose()?;
    let store = match &writer {
        Some(w) => writer_store(w),
        None => destination_store(a)?,
    };
    let dst = if a.resume {
        zarrbuf::resume_like(&src, &new_shape, store, &a.dst_path, &layout)
    } else {
        zarrbuf::create_like(&src, &new_shape, store, &a.dst_path, &layout, a.overwrite)
    }
    .map_err(|e| relabel(e, &a.dst, &a.dst_path))?;
    let mut opts = zarrbuf::CopyOptions::default()
        .with_subset(ranges)
        .with_prototype(proto.clone())
        .with_memory_bytes(memory_bytes)
        .with_compress(a.compress)
        .with_resume(a.resume)
        .with_durability(if a.sync {
            Durability::Sync
        } else {
            Durability::Rename
        });
    let bar = chunk_progress("copying", true);
    if let Some((_, update)) = &bar {
        opts = opts.with_progress(update.clone());
    }
    let bar = bar.map(|(b, _)| b);
    let start = Instant::now();
    let result = zarrbuf::copy_array(&src, &dst, &opts);
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    result.map_err(|e| name_copy_side(e, a))?;
    if let (Some(w), Some(b)) = (writer, &branch) {
        let message = a.message.clone().unwrap_or_else(|| {
            format!(
                "zarrbuf copy {} to {}",
                zarrbuf::location_label(&a.src, &a.src_path),
                a.dst_path.trim_matches('/')
            )
        });
        let id = commit(w, &message)?;
        eprintln!("committed snapshot {id} to branch {b} of {}", a.dst);
    }
    copy_summary(a, &dst, &new_shape, &proto, start)
}

/// Refuses to copy an array onto itself or into itself: --overwrite would delete the source.
fn refuse_overlap(a: &CopyCli) -> Result<()> {
    let (sp, dp) = (
        zarrbuf::node_path(&a.src_path)?,
        zarrbuf::node_path(&a.dst_path)?,
    );
    if same_store(&a.src, &a.dst) {
        let inside = |outer: &str, inner: &str| {
            outer == "/" || inner == outer || inner.starts_with(&format!("{outer}/"))
        };
        if inside(&sp, &dp) || inside(&dp, &sp) {
            return Err(Error::InvalidArgument(format!(
                "the destination {} is the source {} or overlaps it; copy into another store or path",
                zarrbuf::location_label(&a.dst, &a.dst_path),
                zarrbuf::location_label(&a.src, &a.src_path)
            )));
        }
    }
    Ok(())
}

/// A copy error naming its array as `copy_array` does ("source /p", "destination /p"), with
/// the store the user gave.
fn name_copy_side(e: Error, a: &CopyCli) -> Error {
    match e {
        Error::Zarr {
            array,
            message,
            source,
            ..
        } => {
            let array = if let Some(p) = array.strip_prefix("source ") {
                format!("{} (source)", zarrbuf::location_label(&a.src, p))
            } else if let Some(p) = array.strip_prefix("destination ") {
                format!("{} (destination)", zarrbuf::location_label(&a.dst, p))
            } else {
                array
            };
            Error::Zarr {
                array,
                message,
                source,
            }
        }
        other => other,
    }
}

/// The line a finished copy (started at `start`) prints on stderr: what was copied where, in
/// what layout, and how fast.
fn copy_summary(
    a: &CopyCli,
    dst: &zarrbuf::DynArray,
    new_shape: &[u64],
    proto: &BufferPrototype,
    start: Instant,
) -> Result<()> {
    let info = zarrbuf::describe(dst)?;
    let seconds = start.elapsed().as_secs_f64();
    let bytes = new_shape.iter().product::<u64>() * info.data_type.size() as u64;
    eprintln!(
        "copied {} {:?} {} into {} (chunks {:?}{}, codecs {}) via {} in {:.3} s ({:.3} GB/s)",
        zarrbuf::location_label(&a.src, &a.src_path),
        new_shape,
        info.data_type,
        zarrbuf::location_label(&a.dst, &a.dst_path),
        info.inner_chunks.as_ref().unwrap_or(&info.chunks),
        match &info.inner_chunks {
            Some(_) => format!(" in shards {:?}", info.chunks),
            None => String::new(),
        },
        info.codecs.join(", "),
        proto.memory(),
        seconds,
        bytes as f64 / seconds.max(1e-9) / 1e9
    );
    Ok(())
}

/// `zarrbuf check`: one line per finding (or one JSON document), an error when any is damage.
fn check(store: &str, path: &str, json: bool, repair: bool, open: &OpenOptions) -> Result<()> {
    // A group is checked array by array.
    let (reports, group) = match check_one(store, path, json, repair, open) {
        Ok(report) => (vec![report], None),
        Err(Error::IsGroup { group, arrays }) => {
            let reports = arrays
                .iter()
                .map(|a| check_one(store, a, json, repair, open))
                .collect::<Result<Vec<_>>>()?;
            (reports, Some(group))
        }
        Err(e) => return Err(e),
    };
    if json {
        let all: Vec<serde_json::Value> = reports.iter().map(check_json).collect();
        let doc = match &group {
            Some(g) => serde_json::json!({
                "group": g, "clean": reports.iter().all(|r| r.is_clean()), "arrays": all,
            }),
            None => all.into_iter().next().unwrap_or_default(),
        };
        println!("{doc}");
    }
    let damaged: usize = reports.iter().map(damage_count).sum();
    if damaged == 0 || repair {
        return Ok(());
    }
    Err(Error::Damaged {
        count: damaged,
        array: group.unwrap_or_else(|| reports.iter().map(|r| r.array.clone()).collect()),
    })
}

fn damage_count(report: &zarrbuf::CheckReport) -> usize {
    report
        .findings
        .iter()
        .filter(|f| f.problem.is_damage())
        .count()
}

/// A progress bar of chunks done ("{verb} [===  ] n/m chunks") on a terminal when `show`,
/// and the callback that moves it.
fn chunk_progress(
    verb: &str,
    show: bool,
) -> Option<(
    ProgressBar,
    impl Fn(zarrbuf::Progress) + Clone + Send + Sync + 'static,
)> {
    if !show || !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template(&format!(
            "{{spinner}} {verb} [{{bar:30}}] {{pos}}/{{len}} chunks {{elapsed}}"
        ))
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let b = bar.clone();
    let update = move |p: zarrbuf::Progress| {
        b.set_length(p.chunks_total as u64);
        b.set_position(p.chunks_done as u64);
    };
    Some((bar, update))
}

/// Checks one array with a progress bar; prints its findings unless `json`.
fn check_one(
    store: &str,
    path: &str,
    json: bool,
    repair: bool,
    open: &OpenOptions,
) -> Result<zarrbuf::CheckReport> {
    let mut opts = zarrbuf::CheckOptions::default()
        .with_repair(repair)
        .with_open(open.clone());
    let bar = chunk_progress("checking", !json);
    if let Some((_, update)) = &bar {
        opts = opts.with_progress(update.clone());
    }
    let bar = bar.map(|(b, _)| b);
    let report = zarrbuf::check_array(store, path, &opts);
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let report = report?;
    if !json {
        for f in &report.findings {
            println!("{f}");
        }
        for r in &report.repaired {
            println!("repaired: {r}");
        }
        eprintln!(
            "checked {}: {} chunks ({} inner chunks), {} stored bytes; {} damaged",
            report.array,
            report.chunks_checked,
            report.inner_chunks_checked,
            report.stored_bytes,
            damage_count(&report)
        );
    }
    Ok(report)
}

/// The check report as JSON for scripts.
fn check_json(report: &zarrbuf::CheckReport) -> serde_json::Value {
    let findings: Vec<serde_json::Value> = report
        .findings
        .iter()
        .map(|f| {
            serde_json::json!({
                "key": f.key, "inner": f.inner, "problem": f.problem.name(),
                "damage": f.problem.is_damage(), "detail": f.detail,
            })
        })
        .collect();
    serde_json::json!({
        "array": report.array,
        "clean": report.is_clean(),
        "chunks_checked": report.chunks_checked,
        "inner_chunks_checked": report.inner_chunks_checked,
        "stored_bytes": report.stored_bytes,
        "findings": findings,
        "repaired": report.repaired,
    })
}

/// Smooth float32 data with noise in the low bits (compresses like measurements, partly).
fn bench_data(shape: &[usize]) -> Result<NDBuffer> {
    let n: usize = shape.iter().product();
    let (ny, nx) = (shape[1], shape[2]);
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let values: Vec<f32> = (0..n)
        .map(|i| {
            let (z, y, x) = (i / (ny * nx), (i / nx) % ny, i % nx);
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let noise = (state >> 40) as f32 / (1u64 << 24) as f32;
            ((z as f32 * 0.05).sin() + (y as f32 * 0.03).cos() + x as f32 * 1e-3) * 100.0 + noise
        })
        .collect();
    NDBuffer::from_vec(values, shape)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn bench_write(a: &BenchWriteCli) -> Result<()> {
    let (dir, mib, reps, compress, shards) = (a.dir.as_path(), a.mib, a.reps, a.compress, a.shards);
    let durability = if a.sync {
        Durability::Sync
    } else {
        Durability::Rename
    };
    if reps == 0 || mib == 0 {
        return Err(Error::InvalidArgument(
            "--reps and --mib must be at least 1".into(),
        ));
    }
    if let Some(n) = shards
        && (n == 0 || n % 64 != 0)
    {
        return Err(Error::InvalidArgument(format!(
            "--shards {n}: a shard's edge must be a positive multiple of the 64-element chunks"
        )));
    }
    let specs: Vec<zarrbuf::CodecSpec> =
        a.codecs.split(',').map(str::parse).collect::<Result<_>>()?;
    let shape = [mib as usize, 512, 512];
    let data = bench_data(&shape)?;
    let bytes = data.nbytes();
    std::fs::create_dir_all(dir).map_err(|e| bench_io(dir, e))?;
    zarrbuf::npy::write(&dir.join("data.npy"), &data)?;
    // The staged column's source: the data in the chosen device's memory.
    let staged_data = match a.device.as_deref() {
        Some(device) => data.to_prototype(&prototype(Some(device))?)?,
        None => data.clone(),
    };
    let host = data.buffer().as_host_bytes()?;
    let bench = WriteBench {
        dir,
        shape,
        data: &data,
        raw: &host[data.offset()..data.offset() + bytes],
        staged_data: &staged_data,
        compress,
        durability,
        reps,
    };
    println!(
        "write benchmark: float32 {shape:?} ({bytes} bytes), 64³ chunks, median of {reps} writes (after a warm-up), GB/s of array data; staged pipeline from {}, compress {compress:?}, zarrbuf durability {durability:?}",
        staged_data.memory()
    );
    println!("| codec | zarrs store_array_subset | zarrbuf write_all | zarrbuf staged pipeline |");
    println!("|---|---|---|---|");
    let variants = specs
        .iter()
        .flat_map(|spec| std::iter::once((spec, None)).chain(shards.map(|n| (spec, Some(n)))));
    for (spec, shard) in variants {
        let [a, b, c] = bench.rates(spec, shard)?.map(median);
        let name = match shard {
            Some(n) => format!("{spec}, sharded {n}³/64³"),
            None => spec.to_string(),
        };
        println!(
            "| {name} | {a:.3} | {b:.3} ({:.2}× zarrs) | {c:.3} ({:.2}× zarrs) |",
            b / a,
            c / a
        );
    }
    Ok(())
}

fn bench_io(dir: &std::path::Path, e: std::io::Error) -> Error {
    Error::Io {
        path: dir.display().to_string(),
        source: e,
    }
}

/// One `zarrbuf bench-write` run: the data (as raw bytes for zarrs, and in the staged
/// column's memory), where the arrays are written, and the repetitions.
struct WriteBench<'a> {
    dir: &'a std::path::Path,
    shape: [usize; 3],
    data: &'a NDBuffer,
    raw: &'a [u8],
    staged_data: &'a NDBuffer,
    compress: Compress,
    /// zarrbuf's durability (zarrs' column writes in place, each file synced).
    durability: Durability,
    reps: usize,
}

impl WriteBench<'_> {
    /// A fresh array of codecs `spec` (in shards of `shard`³ when given) in
    /// `bench-write.zarr`, deleting the one before: in zarrs' own file-system store (in
    /// place, each file synced) for zarrs' column, else in the store zarrbuf opens (atomic:
    /// unnamed file or rename).
    fn fresh_array(
        &self,
        spec: &zarrbuf::CodecSpec,
        shard: Option<u64>,
        zarrs_store: bool,
    ) -> Result<zarrbuf::DynArray> {
        use zarrs::array::{ArrayBuilder, data_type};
        let io = |e| bench_io(self.dir, e);
        let store_dir = self.dir.join("bench-write.zarr");
        if store_dir.exists() {
            std::fs::remove_dir_all(&store_dir).map_err(io)?;
        }
        std::fs::create_dir_all(&store_dir).map_err(io)?;
        let store: std::sync::Arc<dyn zarrs::storage::ReadableWritableListableStorageTraits> =
            if zarrs_store {
                std::sync::Arc::new(
                    zarrs::filesystem::FilesystemStore::new(&store_dir)
                        .map_err(|e| Error::InvalidArgument(e.to_string()))?,
                )
            } else {
                zarrbuf::open_store(&store_dir.to_string_lossy())?
            };
        let mut builder = ArrayBuilder::new(
            self.shape.iter().map(|&n| n as u64).collect::<Vec<_>>(),
            vec![shard.unwrap_or(64); 3],
            data_type::float32(),
            0.0f32,
        );
        builder.bytes_to_bytes_codecs(spec.bytes_to_bytes_codecs(4)?);
        if shard.is_some() {
            builder.subchunk_shape(vec![64u64; 3]);
        }
        let array = builder
            .build(store, "/")
            .map_err(|e| Error::InvalidArgument(e.to_string()))?;
        array
            .store_metadata()
            .map_err(|e| Error::InvalidArgument(e.to_string()))?;
        Ok(array)
    }

    /// The GB/s of each writer (zarrs, `write_all`, the staged pipeline) in every timed
    /// repetition, each write into a fresh array.
    fn rates(&self, spec: &zarrbuf::CodecSpec, shard: Option<u64>) -> Result<[Vec<f64>; 3]> {
        use zarrbuf::{ArrayWriteExt, PipelineMode, WriteOptions};
        use zarrs::array::ArraySubset;
        let shape = self.shape;
        let bytes = self.data.nbytes();
        let all = ArraySubset::new_with_shape(shape.iter().map(|&n| n as u64).collect());
        let mut rates = [Vec::new(), Vec::new(), Vec::new()];
        for rep in 0..=self.reps {
            // Each repetition starts with the next writer: a writer's figure does not depend
            // on which one ran just before it (the store deleted before a write, written by
            // the one before, was seen to slow it).
            for step in 0..rates.len() {
                let k = (rep + step) % rates.len();
                let rate = &mut rates[k];
                let array = self.fresh_array(spec, shard, k == 0)?;
                let ranges: Vec<Range<u64>> = shape.iter().map(|&n| 0..n as u64).collect();
                let opts = WriteOptions::default().with_durability(self.durability);
                let start = Instant::now();
                match k {
                    0 => array
                        .store_array_subset(&all, zarrs::array::ArrayBytes::from(self.raw))
                        .map_err(|e| Error::InvalidArgument(e.to_string()))?,
                    1 => array.write_opt(&ranges, self.data, &opts)?,
                    _ => array.write_opt(
                        &ranges,
                        self.staged_data,
                        &opts
                            .with_mode(PipelineMode::Staged)
                            .with_compress(self.compress),
                    )?,
                }
                let s = start.elapsed().as_secs_f64();
                if rep > 0 {
                    rate.push(bytes as f64 / s.max(1e-9) / 1e9);
                }
            }
        }
        Ok(rates)
    }
}
