//! Batched decompression on a device: what one batch is, the descriptor memory it needs, and
//! the host twin of the GPU decoder.
//!
//! nvCOMP's batched API takes device arrays of input pointers and sizes, output pointers
//! and capacities, and writes back each chunk's decoded size and status. A [`BatchDesc`]
//! holds those arrays twice — in host memory the device can read (pinned, for CUDA) and in
//! device memory — plus nvCOMP's scratch. On the host device the same batch is decoded with
//! the CPU codecs into the same descriptor layout, so the pipeline's batching, result checks
//! and error paths run in CI exactly as they do on a GPU.

use crate::compression_formats::Compression;
use crate::errors::{Error, Result};
use crate::memory::Region;

/// One chunk of a batch: its compressed bytes, and where its decoded bytes go (the exact
/// decoded size the chunk must have).
pub(crate) struct BatchItem {
    pub input: Region,
    pub output: Region,
}

/// What became of one chunk: its decoded size, or why it failed.
pub(crate) type ChunkOutcome = std::result::Result<usize, String>;

/// Descriptor memory for batches of up to `capacity` chunks.
///
/// Layout (the same in `host` and `device`, `n = capacity`): `u64` input pointers, input
/// sizes, output capacities, output pointers, decoded sizes (`n` each), then `i32` statuses.
pub(crate) struct BatchDesc {
    pub(crate) capacity: usize,
    pub(crate) host: Region,
    pub(crate) device: Region,
    /// The decoder's scratch (nvCOMP's temp buffer), grown on demand.
    pub(crate) temp: Option<Region>,
}

/// Byte offsets of the arrays in a descriptor of `n` entries.
pub(crate) struct DescLayout {
    pub in_ptrs: usize,
    pub in_bytes: usize,
    pub out_capacity: usize,
    pub out_ptrs: usize,
    pub out_actual: usize,
    pub statuses: usize,
    pub len: usize,
}

impl DescLayout {
    pub(crate) fn new(n: usize) -> Self {
        let w = 8 * n;
        DescLayout {
            in_ptrs: 0,
            in_bytes: w,
            out_capacity: 2 * w,
            out_ptrs: 3 * w,
            out_actual: 4 * w,
            statuses: 5 * w,
            len: 5 * w + 4 * n,
        }
    }
}

fn word(bytes: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&bytes[at..at + 8]);
    u64::from_ne_bytes(w)
}

impl BatchDesc {
    /// Reads the outcome of the first `n` chunks of the last batch from the host copy of the
    /// results (the caller has waited for the batch's queue).
    pub(crate) fn outcomes(
        &self,
        n: usize,
        describe: &dyn Fn(i32) -> String,
    ) -> Result<Vec<ChunkOutcome>> {
        if n > self.capacity {
            return Err(Error::InvalidArgument(format!(
                "a batch of {n} chunks in a descriptor for {}",
                self.capacity
            )));
        }
        let l = DescLayout::new(self.capacity);
        let (_guard, bytes) = self.host.host_bytes()?;
        Ok((0..n)
            .map(|i| {
                let status = i32::from_ne_bytes(
                    bytes[l.statuses + 4 * i..l.statuses + 4 * i + 4]
                        .try_into()
                        .expect("4 bytes"),
                );
                if status == 0 {
                    Ok(word(bytes, l.out_actual + 8 * i) as usize)
                } else {
                    Err(describe(status))
                }
            })
            .collect())
    }

    /// Writes the request arrays of `items` into the host copy (addresses from `addr`).
    pub(crate) fn write_requests(
        &self,
        items: &[BatchItem],
        addr: &dyn Fn(&Region) -> Result<u64>,
    ) -> Result<()> {
        if items.len() > self.capacity {
            return Err(Error::InvalidArgument(format!(
                "a batch of {} chunks in a descriptor for {}",
                items.len(),
                self.capacity
            )));
        }
        let l = DescLayout::new(self.capacity);
        let mut words: Vec<(usize, u64)> = Vec::with_capacity(4 * items.len());
        for (i, it) in items.iter().enumerate() {
            words.push((l.in_ptrs + 8 * i, addr(&it.input)?));
            words.push((l.in_bytes + 8 * i, it.input.len() as u64));
            words.push((l.out_capacity + 8 * i, it.output.len() as u64));
            words.push((l.out_ptrs + 8 * i, addr(&it.output)?));
        }
        self.host.with_host_mut(|bytes| {
            for (at, w) in words {
                bytes[at..at + 8].copy_from_slice(&w.to_ne_bytes());
            }
            Ok(())
        })
    }

    /// Records one chunk's outcome in the host copy (the host twin writes results directly).
    pub(crate) fn write_outcome(&self, i: usize, actual: usize, status: i32) -> Result<()> {
        let l = DescLayout::new(self.capacity);
        self.host.with_host_mut(|bytes| {
            bytes[l.out_actual + 8 * i..l.out_actual + 8 * i + 8]
                .copy_from_slice(&(actual as u64).to_ne_bytes());
            bytes[l.statuses + 4 * i..l.statuses + 4 * i + 4]
                .copy_from_slice(&status.to_ne_bytes());
            Ok(())
        })
    }
}

/// The status the host twin reports for a chunk it could not decode (nvCOMP's
/// `nvcompErrorCannotDecompress`), so both decoders describe failures alike.
pub(crate) const CANNOT_DECOMPRESS: i32 = 12;

/// Decodes one chunk on the CPU into `out`; returns the decoded size.
pub(crate) fn decode_on_host(
    format: Compression,
    input: &[u8],
    out: &mut [u8],
) -> std::result::Result<usize, String> {
    match format {
        Compression::Zstd => zstd::zstd_safe::decompress(out, input)
            .map_err(|code| zstd::zstd_safe::get_error_name(code).to_string()),
        Compression::Deflate => {
            let mut d = flate2::Decompress::new(false);
            match d.decompress(input, out, flate2::FlushDecompress::Finish) {
                Ok(flate2::Status::StreamEnd) => Ok(d.total_out() as usize),
                Ok(_) => Err(format!(
                    "the DEFLATE stream does not end within {} decoded bytes",
                    out.len()
                )),
                Err(e) => Err(e.to_string()),
            }
        }
        Compression::Lz4 => {
            lz4_flex::block::decompress_into(input, out).map_err(|e| format!("lz4: {e}"))
        }
    }
}

/// Describes a host twin status the way nvCOMP would.
pub(crate) fn describe_host_status(status: i32) -> String {
    match status {
        CANNOT_DECOMPRESS => "cannot decompress (host decoder)".into(),
        other => format!("status {other} (host decoder)"),
    }
}
