//! `bench --codec-limit`: what the array's own codec allows. Every stored chunk's compressed
//! bytes (each inner chunk's, for a sharded array) are read into memory first, untimed; a
//! pass then decodes them one after another on one thread into one reused buffer with one
//! reused zstd context. The bytes a pass decodes per second, times the cores, is the rate a
//! read with no overhead beyond decompression would reach on this machine; `bench` times one
//! pass after each timed read, so that both see the same load, and prints the limit and the
//! read's share of it. On a shared machine the wall-clock rates follow the CPU each got, so
//! it also prints the CPU seconds per decoded GB of the read (every thread) and of a pass:
//! their ratio is the read's share of the limit on an otherwise idle machine, when the read
//! keeps every core busy.
//!
//! Measured for zarr v3 arrays whose chunks (or inner chunks) are `bytes` (little-endian)
//! then `zstd`, the codec of the GPU layout (`copy --layout gpu`); `benches/limit.rs` measures
//! blosc too, reading chunk files itself.

use std::time::Instant;
use zarrbuf::{DynArray, Error, Result};
use zarrs::array::{ArrayShardedExt, ArrayShardedReadableExt, ArrayShardedReadableExtCache};

/// The compressed chunks of one array, ready to be decoded pass after pass.
pub(crate) struct CodecLimit {
    chunks: Vec<Vec<u8>>,
    /// The decoded size of every chunk.
    chunk_bytes: usize,
    /// Whether the chunks are the inner chunks of shards.
    inner: bool,
    buf: Vec<u8>,
    decoder: zstd::bulk::Decompressor<'static>,
    /// Seconds of each timed pass.
    passes: Vec<f64>,
    /// CPU seconds of each timed pass (this thread's).
    pass_cpu: Vec<f64>,
}

/// CPU seconds this process has used, every thread, user and system (`/proc/self/stat`, in
/// the kernel's 10 ms ticks); `None` without `/proc`.
pub(crate) fn process_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command's closing parenthesis start at the third (state); utime and
    // stime are the 14th and 15th.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(ticks as f64 / 100.0)
}

/// CPU seconds this thread has run (`/proc/thread-self/schedstat`, in ns); `None` without it.
fn thread_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    Some(stat.split_whitespace().next()?.parse::<u64>().ok()? as f64 / 1e9)
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied()
}

fn not_measured(why: String) -> Error {
    Error::InvalidArgument(format!(
        "--codec-limit: {why}; the codec limit is measured for zarr v3 arrays whose chunks \
         (or inner chunks) are bytes (little-endian) + zstd"
    ))
}

/// The codecs of the chunks the codec decodes: the inner chain of a sharded array.
fn chunk_codecs(meta: &serde_json::Value) -> Result<(Vec<serde_json::Value>, bool)> {
    let Some(codecs) = meta.get("codecs").and_then(|c| c.as_array()) else {
        return Err(not_measured("the array is not a zarr v3 array".into()));
    };
    if let [only] = codecs.as_slice()
        && only["name"] == "sharding_indexed"
    {
        let inner = only["configuration"]["codecs"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        return Ok((inner, true));
    }
    Ok((codecs.clone(), false))
}

impl CodecLimit {
    /// Reads the compressed bytes of every stored chunk (inner chunk) of `array` into memory.
    pub(crate) fn gather(array: &DynArray) -> Result<Self> {
        let meta = serde_json::to_value(array.metadata())
            .map_err(|e| not_measured(format!("its metadata: {e}")))?;
        let (codecs, inner) = chunk_codecs(&meta)?;
        let names: Vec<&str> = codecs.iter().filter_map(|c| c["name"].as_str()).collect();
        let little = codecs
            .first()
            .is_some_and(|c| c["configuration"]["endian"].as_str() != Some("big"));
        if names != ["bytes", "zstd"] || !little {
            return Err(not_measured(format!("the chunks' codecs are {names:?}")));
        }
        let elem = array
            .data_type()
            .fixed_size()
            .ok_or_else(|| not_measured("its elements are of variable size".into()))?;
        let zarr = |e: zarrs::array::ArrayError| Error::InvalidArgument(e.to_string());
        let (grid, shape) = if inner {
            let shape = array
                .subchunk_shape()
                .ok_or_else(|| not_measured("its shards have no inner chunk shape".into()))?;
            (array.subchunk_grid_shape(), shape)
        } else {
            let zeros = vec![0; array.dimensionality()];
            (
                array.chunk_grid_shape().to_vec(),
                array.chunk_shape(&zeros).map_err(zarr)?,
            )
        };
        let chunk_bytes = shape.iter().map(|n| n.get() as usize).product::<usize>() * elem;
        let cache = ArrayShardedReadableExtCache::new(array);
        let mut chunks = Vec::new();
        let total: u64 = grid.iter().product();
        let mut idx = vec![0u64; grid.len()];
        for _ in 0..total {
            let stored = if inner {
                array
                    .retrieve_encoded_subchunk(&cache, &idx)
                    .map_err(zarr)?
            } else {
                array
                    .retrieve_encoded_chunk(&idx)
                    .map_err(|e| Error::InvalidArgument(e.to_string()))?
            };
            if let Some(bytes) = stored {
                chunks.push(bytes);
            }
            // The next index in C order.
            for k in (0..idx.len()).rev() {
                idx[k] += 1;
                if idx[k] < grid[k] {
                    break;
                }
                idx[k] = 0;
            }
        }
        if chunks.is_empty() {
            return Err(not_measured("the array has no stored chunk".into()));
        }
        let decoder = zstd::bulk::Decompressor::new()
            .map_err(|e| Error::InvalidArgument(format!("cannot create a zstd decoder: {e}")))?;
        let mut limit = CodecLimit {
            chunks,
            chunk_bytes,
            inner,
            buf: vec![0; chunk_bytes],
            decoder,
            passes: Vec::new(),
            pass_cpu: Vec::new(),
        };
        // A warm-up pass: the buffer's pages and the context's tables in place.
        limit.pass()?;
        limit.passes.clear();
        limit.pass_cpu.clear();
        Ok(limit)
    }

    /// Decodes every chunk once, one after another on this thread, and keeps the time.
    pub(crate) fn pass(&mut self) -> Result<()> {
        let cpu = thread_cpu_seconds();
        let start = Instant::now();
        for (i, chunk) in self.chunks.iter().enumerate() {
            let n = self
                .decoder
                .decompress_to_buffer(chunk, &mut self.buf)
                .map_err(|e| Error::InvalidArgument(format!("--codec-limit: chunk {i}: {e}")))?;
            if n != self.chunk_bytes {
                return Err(Error::InvalidArgument(format!(
                    "--codec-limit: chunk {i} decoded to {n} bytes, not {}",
                    self.chunk_bytes
                )));
            }
        }
        self.passes.push(start.elapsed().as_secs_f64());
        if let (Some(a), Some(b)) = (cpu, thread_cpu_seconds()) {
            self.pass_cpu.push(b - a);
        }
        std::hint::black_box(&self.buf);
        Ok(())
    }

    /// The lines `bench` prints: one thread's median rate, times the cores, and
    /// `read_gbps`'s share of that; then, where `read_cpu` (the CPU seconds of each timed
    /// read, every thread) is known, the CPU each spent per GB, which the machine's other
    /// work moves less than wall-clock rates.
    pub(crate) fn lines(&self, read_gbps: f64, read_cpu: &[f64]) -> String {
        let bytes = (self.chunks.len() * self.chunk_bytes) as f64;
        let mut rates: Vec<f64> = self
            .passes
            .iter()
            .map(|s| bytes / s.max(1e-9) / 1e9)
            .collect();
        rates.sort_by(f64::total_cmp);
        let one = rates.get(rates.len() / 2).copied().unwrap_or(0.0);
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let limit = one * cores as f64;
        let mut out = format!(
            "codec limit: {} {}chunks of {} bytes (zstd) decoded one after another on one \
             thread: median {one:.3} GB/s over {} passes (min {:.3}, max {:.3}); × {cores} \
             cores = {limit:.3} GB/s; this read ÷ the limit = {:.2}",
            self.chunks.len(),
            if self.inner { "inner " } else { "" },
            self.chunk_bytes,
            rates.len(),
            rates.first().copied().unwrap_or(0.0),
            rates.last().copied().unwrap_or(0.0),
            read_gbps / limit.max(1e-9)
        );
        let gb = bytes / 1e9;
        if let (Some(read), Some(codec)) =
            (median(read_cpu.to_vec()), median(self.pass_cpu.clone()))
        {
            out.push_str(&format!(
                "\ncpu per GB decoded: this read {:.3} s (every thread, user + system; median \
                 of {} reads), the codec {:.3} s (median of {} passes); codec ÷ read = {:.2}",
                read / gb,
                read_cpu.len(),
                codec / gb,
                self.pass_cpu.len(),
                codec / read.max(1e-9)
            ));
        }
        out
    }
}
