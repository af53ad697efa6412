//! The read benchmark: for each (variant, layout) of [`FULL`] (or [`QUICK`] with `--quick`)
//! whole-array reads into device memory with each decode choice, each result checked first,
//! then one summary line, printed and flushed as soon as it is known so that a run cut
//! short still reports what it measured:
//!
//! `gpu-decode: variant=zstd1 layout=chunks64 cpu=9.31 gpu=12.02 both=13.10 auto=9.30`
//!
//! (medians of `--reps` reads, decoded GB/s), each followed by the `gpu-stages:` line of
//! `--reps` more `Decode::Gpu` reads, timed stage by stage, and the `gpu-limits:` line of
//! its chunks
//! ([`crate::stage_lines`]). With `--sweep-layout` the pass measures the layout sweep
//! instead ([`crate::sweep`]). The full pass adds, per line, zarrs' decode
//! into a reused host buffer and zarrbuf's host read (the README table's columns), the
//! pinned host-device bandwidth at the start, and after the headline line its reads through
//! a decoded-chunk cache in device memory, the `gpu-cache:` line ([`crate::cache_bench`]).

use crate::Check;
use crate::args::Target;
use crate::arrays::{self, Layout};
use crate::cache_bench;
use crate::fixtures::same;
use crate::stage_lines;
use std::io::Write;
use std::sync::Arc;
use std::time::Instant;
use zarrbuf::options::{Decode, StageReport, StageTimings};
use zarrbuf::{ArrayReadExt, Buffer, BufferPrototype, NDBuffer};
use zarrbuf_test_cases::variants::{self, Variant};
use zarrs::array::Array;
use zarrs::filesystem::FilesystemStore;

/// The summary lines of a full run, the headline ones first.
pub(crate) const FULL: [(Variant, Layout); 6] = [
    (Variant::Zstd1, Layout::Chunks(64)),
    (Variant::Zstd1, Layout::Gpu),
    (Variant::Zstd1, Layout::Chunks(128)),
    (Variant::Zstd1Sharded, Layout::Chunks(64)),
    (Variant::BloscLz4Shuffle, Layout::Chunks(64)),
    (Variant::Gzip1, Layout::Chunks(64)),
];

/// The summary lines of `--quick`.
pub(crate) const QUICK: [(Variant, Layout); 2] = [
    (Variant::Zstd1, Layout::Chunks(64)),
    (Variant::Zstd1, Layout::Gpu),
];

/// The decode choices of a line, in its order.
const DECODES: [Decode; 4] = [Decode::Cpu, Decode::Gpu, Decode::Both, Decode::Auto];

/// What the benchmark is asked to do.
pub(crate) struct Bench {
    /// Decoded bytes of each array (float32, about this many).
    pub(crate) bytes: u64,
    pub(crate) reps: usize,
    pub(crate) quick: bool,
    pub(crate) target: Target,
    /// Every read's staging budget (`ZARRBUF_BENCH_STAGING_BYTES`).
    pub(crate) staging_bytes: usize,
    /// Measure the layout sweep instead of the summary lines.
    pub(crate) sweep: bool,
}

/// Prints `line` and flushes it, so that a run cut short still shows it.
pub(crate) fn print_now(line: &str) {
    println!("{line}");
    let _ = std::io::stdout().flush();
}

/// Median decoded GB/s of `reps` calls of `f`.
pub(crate) fn median_gbps(
    bytes: usize,
    reps: usize,
    mut f: impl FnMut() -> Check,
) -> Result<f64, String> {
    let mut rates = Vec::with_capacity(reps);
    for _ in 0..reps.max(1) {
        let t = Instant::now();
        f()?;
        rates.push(bytes as f64 / t.elapsed().as_secs_f64().max(1e-9) / 1e9);
    }
    rates.sort_by(f64::total_cmp);
    Ok(rates[rates.len() / 2])
}

/// The summary line of one (variant, layout).
pub(crate) fn summary_line(variant: Variant, layout: Layout, rates: &[f64; 4]) -> String {
    format!(
        "gpu-decode: variant={} layout={} cpu={:.2} gpu={:.2} both={:.2} auto={:.2}",
        arrays::variant_name(variant),
        layout.name(),
        rates[0],
        rates[1],
        rates[2],
        rates[3]
    )
}

impl Bench {
    /// GB/s of whole-array reads of `array` into the device with each of [`DECODES`], each
    /// read's result checked against `data` first (that read also warms up).
    fn device_rates(
        &self,
        array: &Array<FilesystemStore>,
        what: &str,
        data: &NDBuffer,
    ) -> Result<[f64; 4], String> {
        let all = variants::full(array.shape());
        let proto = self.target.device();
        let total = data.nbytes();
        let mut rates = [0.0; 4];
        for (rate, decode) in rates.iter_mut().zip(DECODES) {
            let o = self
                .target
                .read_options()
                .with_decode(decode)
                .with_staging_bytes(self.staging_bytes);
            let read = || array.read_opt(&all, &proto, &o).map_err(|e| e.to_string());
            let got = read()?;
            same(
                &format!(
                    "bench {what} on {}, decode {decode:?}",
                    self.target.device_name()
                ),
                &got,
                data,
            )?;
            drop(got);
            *rate = median_gbps(total, self.reps, || read().map(drop))?;
        }
        Ok(rates)
    }

    /// The stage timings of `--reps` more whole-array `Decode::Gpu` reads of `array` (apart
    /// from the reads behind the `gpu=` figure, which timing would slow a little).
    fn stage_report(&self, array: &Array<FilesystemStore>) -> Result<StageReport, String> {
        let timings = Arc::new(StageTimings::default());
        let o = self
            .target
            .read_options()
            .with_decode(Decode::Gpu)
            .with_staging_bytes(self.staging_bytes)
            .with_stage_timings(timings.clone());
        let (all, proto) = (variants::full(array.shape()), self.target.device());
        for _ in 0..self.reps {
            array
                .read_opt(&all, &proto, &o)
                .map_err(|e| format!("a timed read: {e}"))?;
        }
        Ok(timings.report())
    }

    /// The `gpu-stages:` line of `array` (of `total` bytes) and the `gpu-limits:` line of its
    /// chunks, each printed as soon as it is known.
    fn stage_lines(
        &self,
        array: &Array<FilesystemStore>,
        (variant, layout): (Variant, Layout),
        total: usize,
    ) -> Check {
        let report = self.stage_report(array)?;
        let decoded = total as u64 * report.reads;
        print_now(&stage_lines::stages_line(variant, layout, &report, decoded));
        let opts = self
            .target
            .read_options()
            .with_staging_bytes(self.staging_bytes);
        let limits = zarrbuf::cuda::decode_limits(array, &self.target.device(), &opts, self.reps)
            .map_err(|e| format!("the decode limits of {}: {e}", layout.name()))?;
        print_now(&stage_lines::limits_line(variant, layout, &limits));
        Ok(())
    }

    /// Host reads of `array` for comparison: zarrs into a reused buffer, zarrbuf into host
    /// memory.
    fn host_rates(
        &self,
        array: &Array<FilesystemStore>,
        reused: &mut [u8],
        total: usize,
    ) -> Result<(f64, f64), String> {
        let zarrs = median_gbps(total, self.reps, || {
            variants::zarrs_into(array, reused);
            Ok(())
        })?;
        let all = variants::full(array.shape());
        let zarrbuf = median_gbps(total, self.reps, || {
            array
                .read(&all, &BufferPrototype::cpu())
                .map(drop)
                .map_err(|e| e.to_string())
        })?;
        Ok((zarrs, zarrbuf))
    }

    /// The pinned host-device bandwidth (CUDA only), then every line of the pass: each
    /// array written, read with every decode choice, its `gpu-decode:` line printed, its
    /// store removed. Adds the figures to `table`.
    pub(crate) fn run(&self, table: &mut Vec<(String, String)>) -> Check {
        if self.sweep {
            return crate::sweep::run(self, table);
        }
        if self.target == Target::Cuda && !self.quick {
            table.push((
                "pinned H2D / D2H (256 MiB)".into(),
                pinned_bandwidth(self.reps)?,
            ));
        }
        let shape = arrays::shape_for(self.bytes);
        let t = Instant::now();
        let data = arrays::data(&shape)?;
        let total = data.nbytes();
        table.push((
            "bench array".into(),
            format!(
                "float32 {shape:?} = {total} bytes (generated in {:.1} s)",
                t.elapsed().as_secs_f64()
            ),
        ));
        let dir =
            std::env::temp_dir().join(format!("zarrbuf-gpucheck-bench-{}", std::process::id()));
        let mut reused = if self.quick {
            Vec::new()
        } else {
            vec![0u8; total]
        };
        let lines: &[(Variant, Layout)] = if self.quick { &QUICK } else { &FULL };
        for &(variant, layout) in lines {
            let what = format!("{} {}", arrays::variant_name(variant), layout.name());
            let t = Instant::now();
            let array = arrays::create(&dir, variant, layout, &data)?;
            let written = t.elapsed().as_secs_f64();
            let t = Instant::now();
            let rates = self.device_rates(&array, &what, &data)?;
            print_now(&summary_line(variant, layout, &rates));
            self.stage_lines(&array, (variant, layout), total)?;
            let best = rates[0].max(rates[1]);
            let mut row = format!(
                "decode cpu {:.2} / gpu {:.2} / both {:.2} ({:.2}x best) / auto {:.2} ({:.2}x best)",
                rates[0],
                rates[1],
                rates[2],
                rates[2] / best,
                rates[3],
                rates[3] / best
            );
            if !self.quick {
                let (zarrs, host) = self.host_rates(&array, &mut reused, total)?;
                row += &format!(" | host: zarrs into reused {zarrs:.2}, zarrbuf {host:.2}");
            }
            row += &format!(
                " (written in {written:.1} s, measured in {:.1} s)",
                t.elapsed().as_secs_f64()
            );
            table.push((
                format!(
                    "read {what} into {} (GB/s, median of {})",
                    self.target.device_name(),
                    self.reps
                ),
                row,
            ));
            if !self.quick && (variant, layout) == cache_bench::CACHED {
                let (cached, row) = self.cached_rates(&array, &data)?;
                println!("{}", cache_bench::cache_line(&cached));
                let _ = std::io::stdout().flush();
                table.push((
                    format!(
                        "cached reads of {what} into {} (cache in its memory)",
                        self.target.device_name()
                    ),
                    row,
                ));
            }
            drop(array);
            let _ = std::fs::remove_dir_all(&dir);
        }
        Ok(())
    }
}

/// Pinned → device and device → pinned copies of 256 MiB, median GB/s of `reps`.
fn pinned_bandwidth(reps: usize) -> Result<String, String> {
    let e = |x: zarrbuf::Error| x.to_string();
    let n = 256 << 20;
    let pinned = Buffer::empty(n, &BufferPrototype::pinned(0)).map_err(e)?;
    let mut device = Buffer::empty(n, &BufferPrototype::cuda(0)).map_err(e)?;
    let h2d = median_gbps(n, reps, || device.copy_from(&pinned).map_err(e))?;
    let mut back = pinned.clone();
    let d2h = median_gbps(n, reps, || back.copy_from(&device).map_err(e))?;
    Ok(format!("{h2d:.1} / {d2h:.1} GB/s"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_lines_name_the_variant_and_layout_and_every_rate() {
        assert_eq!(
            summary_line(
                Variant::Zstd1,
                Layout::Chunks(64),
                &[9.3, 12.0, 13.104, 9.299]
            ),
            "gpu-decode: variant=zstd1 layout=chunks64 cpu=9.30 gpu=12.00 both=13.10 auto=9.30"
        );
        let names: Vec<String> = FULL
            .iter()
            .map(|&(v, l)| format!("{} {}", arrays::variant_name(v), l.name()))
            .collect();
        assert_eq!(
            names,
            [
                "zstd1 chunks64",
                "zstd1 gpu",
                "zstd1 chunks128",
                "zstd1_sharded chunks64",
                "blosc_lz4 chunks64",
                "gzip1 chunks64"
            ]
        );
        // --quick measures the headline lines, which a full run measures first.
        assert_eq!(QUICK[..], FULL[..2]);
    }

    #[test]
    fn small_arrays_for_dry_runs_large_ones_as_the_cpu_benchmark() {
        assert_eq!(arrays::shape_for(1 << 30), variants::shape_for(1 << 30));
        assert_eq!(arrays::shape_for(64 << 20), vec![256, 256, 256]);
        assert_eq!(arrays::shape_for(16 << 20), vec![128, 128, 256]);
        assert_eq!(arrays::shape_for(1), vec![64, 64, 64]);
    }
}
