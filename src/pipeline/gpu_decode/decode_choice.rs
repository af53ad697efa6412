//! What [`Decode::Auto`] means for one read: where its chunks are decompressed.
//!
//! The rule (issue 21, part 5): GPU decode becomes `Auto`'s choice only for a format a GPU
//! run has shown decoded exactly and faster than the CPU, listed in [`GPU_DECODE_VERIFIED`]
//! with the log that shows it. `Auto` reads of such a format into device memory, with more
//! chunks than one device batch and nvCOMP present, decode with [`Decode::Both`] — the
//! hybrid, which gives the device batches only while it keeps up (`pipeline::hybrid`) —
//! unless rates measured in this process say the device is too slow to be worth its
//! batches. Every other read decodes on the CPU.

use super::tuning::{CHUNKS_PER_SM, tuning};
use crate::compression_formats::Compression;
use crate::device::DeviceOps;
use crate::options::Decode;
use crate::place::Memory;

/// Formats a GPU run has shown the device decoder exact and faster than the CPU for, with
/// the log that shows it (`benches/gpu-runs/…`).
///
/// - zstd: an H100, 1 GiB float32 into CUDA memory, 64³ chunks plain and sharded: GPU
///   13.75 / 13.65 GB/s against the CPU's 10.06 / 8.46, both 16.78 / 15.92; every fixture
///   and the damaged chunks exact or refused.
///
/// Not listed, as the same run measured the GPU slower than the CPU: deflate (gzip 1:
/// 1.33 against 2.99 GB/s) and lz4 (blosc lz4: 14.34 against 31.05).
pub(crate) const GPU_DECODE_VERIFIED: &[(Compression, &str)] =
    &[(Compression::Zstd, "benches/gpu-runs/gpu-run-21-all.txt")];

/// Below this share of the CPU's rate the device is not worth the batches it takes.
const MIN_DEVICE_SHARE: f64 = 0.25;

/// Decoded bytes per second each side reached in earlier reads of this process.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct MeasuredRates {
    pub cpu: f64,
    pub device: f64,
}

/// What [`auto_decode`] decides from.
pub(crate) struct AutoFacts<'a> {
    /// The output is in CUDA memory (host outputs gain nothing from a device decoder).
    pub device_output: bool,
    /// The format the device would decompress (`None`: the chain is not one it decodes).
    pub compression: Option<Compression>,
    /// Chunks (inner chunks) the read decodes.
    pub chunks: usize,
    /// Chunks in one device batch (the batch plan's `chunks_per_batch`).
    pub batch_chunks: usize,
    /// Whether the device has a batch decoder (nvCOMP found); asked only when the other
    /// facts leave the device in the running, as it loads nvCOMP.
    pub device_decoder: &'a dyn Fn() -> bool,
    /// Rates measured in this process, if any.
    pub measured: Option<MeasuredRates>,
}

/// The choice a read into `memory` of `chunks` chunks in `compression` makes: `choice`
/// itself, or for [`Decode::Auto`] [`auto_decode`]'s.
pub(crate) fn resolve_decode(
    choice: Decode,
    memory: Memory,
    ops: &dyn DeviceOps,
    compression: Option<Compression>,
    chunks: usize,
) -> Decode {
    if choice != Decode::Auto {
        return choice;
    }
    if !matches!(memory, Memory::Cuda(_)) {
        return Decode::Cpu;
    }
    auto_decode(&AutoFacts {
        device_output: true,
        compression,
        chunks,
        batch_chunks: tuning().map_or(CHUNKS_PER_SM, |t| t.chunks_per_sm)
            * ops.sm_count().unwrap_or(1),
        device_decoder: &|| ops.batch_decoder().is_ok(),
        measured: None,
    })
}

/// Where an `Auto` read decodes ([`Decode::Cpu`] or [`Decode::Both`]), in this order:
///
/// 1. a host output, a chain the device does not decode, or a format not in
///    [`GPU_DECODE_VERIFIED`]: the CPU;
/// 2. no more chunks than one device batch: the CPU. The device's first batch would be
///    all it gets before the CPU is done (and the run above measured 128 chunks of 8 MiB
///    slower on the device: 6.75 against 9.94 GB/s);
/// 3. measured rates with the device below a quarter of the CPU: the CPU;
/// 4. no batch decoder (nvCOMP not found): the CPU;
/// 5. otherwise both, the hybrid scheduler splitting the chunks by the rates it observes.
pub(crate) fn auto_decode(f: &AutoFacts<'_>) -> Decode {
    auto_decode_with(f, GPU_DECODE_VERIFIED)
}

/// [`auto_decode`] with `verified` in place of [`GPU_DECODE_VERIFIED`].
fn auto_decode_with(f: &AutoFacts<'_>, verified: &[(Compression, &str)]) -> Decode {
    let Some(compression) = f.compression else {
        return Decode::Cpu;
    };
    let verified = verified.iter().any(|(c, _)| *c == compression);
    if !f.device_output || !verified || f.chunks <= f.batch_chunks.max(1) {
        return Decode::Cpu;
    }
    if f.measured
        .is_some_and(|r| r.device < MIN_DEVICE_SHARE * r.cpu)
    {
        return Decode::Cpu;
    }
    if !(f.device_decoder)() {
        return Decode::Cpu;
    }
    Decode::Both
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts<'a>(
        compression: Option<Compression>,
        chunks: usize,
        decoder: &'a dyn Fn() -> bool,
    ) -> AutoFacts<'a> {
        AutoFacts {
            device_output: true,
            compression,
            chunks,
            batch_chunks: 528,
            device_decoder: decoder,
            measured: None,
        }
    }

    #[test]
    fn auto_uses_the_device_for_exactly_the_verified_formats() {
        let verified: Vec<Compression> = GPU_DECODE_VERIFIED.iter().map(|(c, _)| *c).collect();
        assert_eq!(
            verified,
            [Compression::Zstd],
            "update this test with the run's evidence"
        );
        for (_, log) in GPU_DECODE_VERIFIED {
            let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(log);
            assert!(path.is_file(), "{log} names no log");
        }
        let asked = std::cell::Cell::new(false);
        let decoder = || {
            asked.set(true);
            true
        };
        for c in [Compression::Deflate, Compression::Lz4] {
            assert_eq!(auto_decode(&facts(Some(c), 100_000, &decoder)), Decode::Cpu);
        }
        assert_eq!(auto_decode(&facts(None, 100_000, &decoder)), Decode::Cpu);
        // nvCOMP is not even loaded to decide that.
        assert!(!asked.get());
        let zstd = Some(Compression::Zstd);
        assert_eq!(auto_decode(&facts(zstd, 1024, &decoder)), Decode::Both);
        assert!(asked.get());
        // One batch or less: the CPU.
        assert_eq!(auto_decode(&facts(zstd, 528, &decoder)), Decode::Cpu);
    }

    fn with_verified(f: &AutoFacts<'_>, verified: &[Compression]) -> Decode {
        let list: Vec<(Compression, &str)> = verified.iter().map(|&c| (c, "a run")).collect();
        auto_decode_with(f, &list)
    }

    #[test]
    fn a_verified_format_decodes_with_both_where_the_device_can_help() {
        let yes = || true;
        let no = || false;
        let zstd = Some(Compression::Zstd);
        let v = [Compression::Zstd];
        assert_eq!(with_verified(&facts(zstd, 10_000, &yes), &v), Decode::Both);
        // A few chunks, no nvCOMP, a host output, another format: the CPU.
        assert_eq!(with_verified(&facts(zstd, 500, &yes), &v), Decode::Cpu);
        assert_eq!(with_verified(&facts(zstd, 10_000, &no), &v), Decode::Cpu);
        let host = AutoFacts {
            device_output: false,
            ..facts(zstd, 10_000, &yes)
        };
        assert_eq!(with_verified(&host, &v), Decode::Cpu);
        assert_eq!(
            with_verified(&facts(Some(Compression::Lz4), 10_000, &yes), &v),
            Decode::Cpu
        );
        // Measured rates: a device at a fifth of the CPU is left out, at half it helps.
        let slow = AutoFacts {
            measured: Some(MeasuredRates {
                cpu: 10e9,
                device: 2e9,
            }),
            ..facts(zstd, 10_000, &yes)
        };
        assert_eq!(with_verified(&slow, &v), Decode::Cpu);
        let useful = AutoFacts {
            measured: Some(MeasuredRates {
                cpu: 10e9,
                device: 5e9,
            }),
            ..facts(zstd, 10_000, &yes)
        };
        assert_eq!(with_verified(&useful, &v), Decode::Both);
    }
}
