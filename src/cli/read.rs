//! `zarrbuf info`, `read` and `bench`: describe an array, read it (into a .npy file or a
//! summary), and time repeated reads.

use super::codec_limit::{CodecLimit, process_cpu_seconds};
use super::names::label;
use super::output::{errln, out, outln};
use super::parse::prototype;
use super::progress::progress_options;
use super::source::{Opening, Reader, Source};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Instant;
use zarrbuf::options::Decode;
use zarrbuf::{
    Error, NDBuffer, Result,
    options::{OpenOptions, ReadOptions},
};

pub(crate) fn info(store: &str, path: &str, json: bool, opts: &OpenOptions) -> Result<()> {
    if json {
        let hierarchy = zarrbuf::list_hierarchy_opt(store, path, opts)?;
        let text = serde_json::to_string_pretty(&hierarchy)
            .map_err(|e| Error::InvalidArgument(format!("cannot write the JSON: {e}")))?;
        outln!("{text}")?;
        return Ok(());
    }
    let array = match Source::open(store, path, Reader::ByLocation, opts) {
        Ok(array) => array,
        Err(Error::IsGroup { .. }) => {
            out!("{}", zarrbuf::list_hierarchy_opt(store, path, opts)?)?;
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    if array.varlen_kind().is_some() {
        return super::read_varlen::info(store, path, &array.describe_varlen()?);
    }
    let i = array.describe()?;
    outln!("array:      {}", label(store, path))?;
    outln!("zarr:       v{}", i.zarr_format)?;
    outln!("shape:      {:?}", i.shape)?;
    match &i.inner_chunks {
        Some(inner) => {
            outln!("shards:     {:?}", i.chunks)?;
            outln!("chunks:     {inner:?} (inside each shard)")?;
        }
        None => outln!("chunks:     {:?}", i.chunks)?,
    }
    outln!("data type:  {}", i.data_type)?;
    outln!("codecs:     {}", i.codecs.join(", "))?;
    outln!("fill value: {}", i.fill_value)?;
    Ok(())
}

/// `read`'s choices of how to read: where to decompress, and the most memory the result may
/// take (`--memory`).
pub(crate) struct ReadChoices {
    pub(crate) decode: Decode,
    pub(crate) max_bytes: Option<u64>,
    /// `--io-concurrency`: requests to an object store in flight.
    pub(crate) io_concurrency: Option<usize>,
}

pub(crate) fn read(
    store: &str,
    path: &str,
    subset: Option<&str>,
    device: Option<&str>,
    out: Option<PathBuf>,
    choices: ReadChoices,
    opening: &Opening,
) -> Result<()> {
    let proto = prototype(device)?;
    let array = Source::open(store, path, opening.reader, &opening.options)?;
    let shape = array.shape();
    let ranges = match subset {
        Some(s) => zarrbuf::subset::parse_subset(s, &shape)?,
        None => shape.iter().map(|&n| 0..n).collect(),
    };
    let (opts, bar) = progress_options("reading");
    let mut opts = opts.with_decode(choices.decode);
    if let Some(n) = choices.max_bytes {
        opts = opts.with_max_bytes(n);
    }
    opts.io_concurrency = choices.io_concurrency;
    if array.varlen_kind().is_some() {
        let read = super::read_varlen::read(&array, &ranges, &proto, &opts, out.as_deref());
        if let Some(b) = bar {
            b.finish_and_clear();
        }
        return read;
    }
    let start = Instant::now();
    let data = array.read(&ranges, &proto, &opts)?;
    let seconds = start.elapsed().as_secs_f64();
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    match out {
        Some(file) => {
            zarrbuf::npy::write(&file, &data)?;
            errln!(
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

/// `bench --subsets`: reads every subset of `list` one at a time, once to warm up and then
/// `reps` times, and prints each repetition's reads per second and the median read's time.
fn bench_subsets(
    name: &str,
    array: &Source,
    list: &[Vec<Range<u64>>],
    proto: &zarrbuf::BufferPrototype,
    reps: usize,
    opts: &ReadOptions,
) -> Result<()> {
    if list.is_empty() {
        return Err(Error::InvalidArgument("--subsets lists no subset".into()));
    }
    for s in list {
        drop(array.read(s, proto, opts)?);
    }
    let mut rates = Vec::with_capacity(reps);
    let mut times = Vec::with_capacity(reps * list.len());
    for _ in 0..reps {
        let round = Instant::now();
        for s in list {
            let start = Instant::now();
            let data = array.read(s, proto, opts)?;
            times.push(start.elapsed().as_secs_f64());
            drop(data);
        }
        rates.push(list.len() as f64 / round.elapsed().as_secs_f64().max(1e-9));
    }
    times.sort_by(f64::total_cmp);
    let rates: Vec<String> = rates.iter().map(|r| format!("{r:.1}")).collect();
    outln!(
        "{name}: {} subsets read one at a time into {}: reads/s {}; median read {:.1} µs",
        list.len(),
        proto.memory(),
        rates.join(" "),
        times[times.len() / 2] * 1e6
    )?;
    Ok(())
}

pub(crate) fn summary(data: &NDBuffer, seconds: f64) -> Result<()> {
    // Hash in place when the result already sits in host memory, C-contiguous and
    // little-endian: a copy would double the peak memory of a whole-array read.
    let crc = if data.is_c_contiguous()
        && data.byte_order() == zarrbuf::dtype::ByteOrder::Little
        && data.buffer().is_host_accessible()
    {
        let host = data.buffer().as_host_bytes()?;
        crc32fast::hash(&host[data.offset()..data.offset() + data.nbytes()])
    } else {
        crc32fast::hash(&data.to_native_bytes()?)
    };
    outln!("shape:      {:?}", data.shape())?;
    outln!("dtype:      {}", data.dtype())?;
    outln!("memory:     {}", data.memory())?;
    outln!("checksum:   crc32 {crc:08x} (C order, little-endian)")?;
    outln!(
        "throughput: {:.3} GB/s ({} bytes in {:.4} s)",
        data.nbytes() as f64 / seconds.max(1e-9) / 1e9,
        data.nbytes(),
        seconds
    )?;
    Ok(())
}

/// For object-store URLs, the limit on requests in flight the reads ran with.
fn io_note(store: &str, opts: &ReadOptions) -> String {
    let remote = zarrbuf::store::Location::parse(store).is_ok_and(|l| l.is_url());
    if !remote {
        return String::new();
    }
    let n = zarrbuf::options::io_concurrency(opts.io_concurrency);
    let auto = if zarrbuf::options::io_concurrency_is_default(opts.io_concurrency) {
        ", more for small chunks"
    } else {
        ""
    };
    format!(", io concurrency {n}{auto}")
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn bench(
    store: &str,
    path: &str,
    subset: Option<&str>,
    subsets: Option<&Path>,
    device: Option<&str>,
    reps: usize,
    opening: &Opening,
    opts: &ReadOptions,
    codec_limit: bool,
) -> Result<()> {
    if reps == 0 {
        return Err(Error::InvalidArgument("--reps must be at least 1".into()));
    }
    let proto = prototype(device)?;
    let array = Source::open(store, path, opening.reader, &opening.options)?;
    let shape = array.shape();
    if let Some(file) = subsets {
        let text = std::fs::read_to_string(file).map_err(|e| {
            Error::InvalidArgument(format!("cannot read --subsets {}: {e}", file.display()))
        })?;
        let list = text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| zarrbuf::subset::parse_subset(l.trim(), &shape))
            .collect::<Result<Vec<_>>>()?;
        return bench_subsets(&label(store, path), &array, &list, &proto, reps, opts);
    }
    let all: Vec<Range<u64>> = match subset {
        Some(s) => zarrbuf::subset::parse_subset(s, &shape)?,
        None => shape.iter().map(|&n| 0..n).collect(),
    };
    let mut limit = match (&array, codec_limit) {
        (_, false) => None,
        (Source::Local(a), true) => Some(CodecLimit::gather(a)?),
        (Source::Remote(..), true) => {
            return Err(Error::InvalidArgument(
                "--codec-limit measures a local store (a directory or a zip file)".into(),
            ));
        }
    };
    let warm = array.read(&all, &proto, opts)?;
    let bytes = warm.nbytes();
    drop(warm);
    let mut rates = Vec::with_capacity(reps);
    let mut read_cpu = Vec::with_capacity(reps);
    for _ in 0..reps {
        let cpu = process_cpu_seconds();
        let start = Instant::now();
        let data = array.read(&all, &proto, opts)?;
        let s = start.elapsed().as_secs_f64();
        drop(data);
        if let (Some(a), Some(b)) = (cpu, process_cpu_seconds()) {
            read_cpu.push(b - a);
        }
        rates.push(bytes as f64 / s.max(1e-9) / 1e9);
        // One pass of the codec limit after each read: both under the same load.
        if let Some(l) = limit.as_mut() {
            l.pass()?;
        }
    }
    rates.sort_by(f64::total_cmp);
    let median = rates[rates.len() / 2];
    outln!(
        "{}: {bytes} bytes into {}: median {median:.3} GB/s over {reps} reads (min {:.3}, max {:.3}){}",
        label(store, path),
        proto.memory(),
        rates[0],
        rates[rates.len() - 1],
        io_note(store, opts)
    )?;
    if let Some(l) = limit {
        outln!("{}", l.lines(median, &read_cpu))?;
    }
    Ok(())
}
