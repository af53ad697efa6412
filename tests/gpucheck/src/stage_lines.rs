//! The lines that say where the GPU decode route spends its time, printed after each
//! `gpu-decode:` line of the read benchmark:
//!
//! `gpu-stages: variant=zstd1 layout=chunks64 fetch=2.10(35%) walk=9.80(8%) stage=11.20(7%) h2d=20.40(4%) nvcomp=0.45(72%) scatter=3.10(12%) gpu_busy=88% overlap=41% e2e=0.31`
//!
//! from the stage timings of `--reps` `Decode::Gpu` reads made for it
//! (`zarrbuf::options::StageTimings`):
//! per stage `<GB/s>(<share>)`, its bytes over its own time (fetch, walk, stage, h2d: the
//! compressed bytes; nvcomp and scatter: the decoded bytes) and its time as a share of the
//! reads' end-to-end time (fetch, walk and stage run on every worker thread at once, so
//! their time is summed over threads and their share may pass 100%); `gpu_busy`: the share
//! of that time in which the device ran any of h2d, nvcomp, scatter; `overlap`: the share
//! of all stage time that ran alongside other stage time (`1 − wall / Σ stage`); `e2e`: the
//! decoded GB/s of the reads' pipeline from start to end (the `gpu=` figure adds the
//! output's allocation).
//!
//! `gpu-limits: variant=zstd1 layout=chunks64 nvcomp_resident=14.20 host_codec=0.62x16=9.92 batch=528`
//!
//! the same chunks' device-resident batched decompression rate (`zarrbuf::cuda::decode_limits`,
//! in batches of the read's batch plan, `batch` chunks at most) and the CPU codec's rate on
//! one thread times the cores, all decoded GB/s.
//!
//! The limiting stage is the one with the largest share: a device route near its
//! `nvcomp_resident` rate with `gpu_busy` near 100% is held by nvCOMP; a low `gpu_busy`
//! with a large host-stage share names that host stage.

use crate::arrays::{self, Layout};
use zarrbuf::cuda::DecodeLimits;
use zarrbuf::options::{Stage, StageReport};
use zarrbuf_test_cases::variants::Variant;

/// The `gpu-stages:` line of one (variant, layout): `report` of reads that decoded
/// `decoded` bytes in all.
pub(crate) fn stages_line(
    variant: Variant,
    layout: Layout,
    report: &StageReport,
    decoded: u64,
) -> String {
    let mut line = format!(
        "gpu-stages: variant={} layout={}",
        arrays::variant_name(variant),
        layout.name()
    );
    for stage in Stage::ALL {
        line += &format!(
            " {}={:.2}({:.0}%)",
            stage.name(),
            report.rate_gbps(stage),
            100.0 * report.share(stage)
        );
    }
    let wall = report.wall.as_secs_f64().max(1e-9);
    line += &format!(
        " gpu_busy={:.0}% overlap={:.0}% e2e={:.2}",
        100.0 * report.gpu_busy(),
        100.0 * report.overlap(),
        decoded as f64 / wall / 1e9
    );
    line
}

/// The `gpu-limits:` line of one (variant, layout).
pub(crate) fn limits_line(variant: Variant, layout: Layout, limits: &DecodeLimits) -> String {
    format!(
        "gpu-limits: variant={} layout={} nvcomp_resident={:.2} host_codec={:.2}x{}={:.2} batch={}",
        arrays::variant_name(variant),
        layout.name(),
        limits.resident_gbps,
        limits.host_codec_gbps,
        limits.cores,
        limits.host_codec_gbps * limits.cores as f64,
        limits.chunks_per_batch
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use zarrbuf::options::StageTotal;

    /// The `key=value` fields of a line after its tag.
    fn fields(line: &str) -> Vec<(&str, &str)> {
        line.split(' ')
            .skip(1)
            .map(|f| f.split_once('=').expect("key=value"))
            .collect()
    }

    #[test]
    fn the_stages_line_gives_every_stage_its_rate_and_share() {
        let ms = Duration::from_millis;
        let total = |t: u64, bytes: u64| StageTotal { time: ms(t), bytes };
        let report = StageReport {
            stages: [
                total(40, 100_000_000),
                total(5, 100_000_000),
                total(10, 50_000_000),
                total(2, 50_000_000),
                total(80, 160_000_000),
                total(10, 160_000_000),
            ],
            wall: ms(100),
            device_busy: ms(90),
            timing_overhead: ms(1),
            reads: 2,
        };
        let line = stages_line(Variant::Zstd1, Layout::Chunks(64), &report, 160_000_000);
        assert_eq!(
            line,
            "gpu-stages: variant=zstd1 layout=chunks64 fetch=2.50(40%) walk=20.00(5%) \
             stage=5.00(10%) h2d=25.00(2%) nvcomp=2.00(80%) scatter=16.00(10%) gpu_busy=90% \
             overlap=32% e2e=1.60"
        );
        let keys: Vec<&str> = fields(&line).iter().map(|(k, _)| *k).collect();
        assert_eq!(
            keys,
            [
                "variant", "layout", "fetch", "walk", "stage", "h2d", "nvcomp", "scatter",
                "gpu_busy", "overlap", "e2e"
            ]
        );
        // Each stage's value parses back: a rate, then its share in parentheses.
        for (key, value) in &fields(&line)[2..8] {
            let (rate, share) = value.split_once('(').expect("rate(share)");
            assert!(rate.parse::<f64>().is_ok(), "{key}={value}");
            assert!(
                share.trim_end_matches("%)").parse::<u32>().is_ok(),
                "{key}={value}"
            );
        }
        // Nothing timed: zero rates, never a division by zero.
        let empty = stages_line(Variant::Gzip1, Layout::Gpu, &StageReport::default(), 0);
        assert!(
            empty.contains("fetch=0.00(0%)") && empty.ends_with("gpu_busy=0% overlap=0% e2e=0.00")
        );
    }

    #[test]
    fn the_limits_line_multiplies_the_host_codec_by_the_cores() {
        let limits = DecodeLimits {
            chunks: 64,
            stored_bytes: 40 << 20,
            decoded_bytes: 64 << 20,
            chunks_per_batch: 8,
            resident_gbps: 14.204,
            host_codec_gbps: 0.6251,
            cores: 16,
        };
        assert_eq!(
            limits_line(Variant::Zstd1, Layout::Gpu, &limits),
            "gpu-limits: variant=zstd1 layout=gpu nvcomp_resident=14.20 host_codec=0.63x16=10.00 batch=8"
        );
    }
}
