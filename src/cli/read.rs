//! `zarrbuf read` and `bench`: read an array, of fixed-size or variable-length elements,
//! into a new buffer (reported as a summary or a `.npy` file, `read_report.rs`), and time
//! repeated reads.

use super::codec_limit::{CodecLimit, process_cpu_seconds};
use super::names::label;
use super::output::outln;
use super::parse::prototype;
use super::progress::progress_options;
use super::read_report::{ReadReport, elements_crc32};
use super::source::{Opening, Source};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Instant;
use zarrbuf::options::{Decode, ReadOptions};
use zarrbuf::{BufferPrototype, Error, NDBuffer, Result, VarLenBuffer};

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
    // One read for both kinds; the array's elements choose what it reads into.
    let result = match array.varlen_kind() {
        Some(_) => read_and_report::<VarLenBuffer>(&array, &ranges, &proto, &opts, out),
        None => read_and_report::<NDBuffer>(&array, &ranges, &proto, &opts, out),
    };
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    result
}

/// Reads `ranges` into a new `T` and reports it: a summary, or with `out` a `.npy` file.
fn read_and_report<T: ReadReport>(
    array: &Source,
    ranges: &[Range<u64>],
    proto: &BufferPrototype,
    opts: &ReadOptions,
    out: Option<PathBuf>,
) -> Result<()> {
    let start = Instant::now();
    let data: T = array.read(ranges, proto, opts)?;
    let seconds = start.elapsed().as_secs_f64();
    match out {
        Some(file) => data.save(&file, seconds),
        None => data.summary(seconds),
    }
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
        drop(array.read::<NDBuffer>(s, proto, opts)?);
    }
    let mut rates = Vec::with_capacity(reps);
    let mut times = Vec::with_capacity(reps * list.len());
    for _ in 0..reps {
        let round = Instant::now();
        for s in list {
            let start = Instant::now();
            let data: NDBuffer = array.read(s, proto, opts)?;
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

/// For object-store URLs, the limit on requests in flight the reads ran with.
fn io_note(store: &str, opts: &ReadOptions) -> String {
    let remote = zarrbuf::store::Location::parse(store).is_ok_and(|l| l.is_url());
    if !remote {
        return String::new();
    }
    let n = zarrbuf::options::io_concurrency(opts.io_concurrency);
    if !zarrbuf::options::io_concurrency_is_default(opts.io_concurrency) {
        return format!(", io concurrency {n}");
    }
    let scaled = match zarrbuf::store::time_to_first_byte(store) {
        Some(t) => format!(
            " times √(the time to first byte ({:.1} ms) over 80 ms), at least 16",
            t.as_secs_f64() * 1e3
        ),
        None => String::new(),
    };
    format!(", io concurrency {n}{scaled}, more for small chunks")
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
    let warm: NDBuffer = array.read(&all, &proto, opts)?;
    let bytes = warm.nbytes();
    // What the reads return, to compare with another reader's (the warm-up's, unhashed
    // time; every repetition reads the same).
    let crc = elements_crc32(&warm)?;
    drop(warm);
    let mut rates = Vec::with_capacity(reps);
    let mut read_cpu = Vec::with_capacity(reps);
    for _ in 0..reps {
        let cpu = process_cpu_seconds();
        let start = Instant::now();
        let data: NDBuffer = array.read(&all, &proto, opts)?;
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
    outln!("checksum: crc32 {crc:08x} (C order, little-endian)")?;
    if let Some(l) = limit {
        outln!("{}", l.lines(median, &read_cpu))?;
    }
    Ok(())
}
