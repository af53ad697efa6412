//! The cached-epoch line of the read benchmark, measured on the headline array (zstd 1,
//! 64³ chunks) with a decoded-chunk cache in device memory big enough for the whole array:
//!
//! `gpu-cache: variant=zstd1 layout=chunks64 epoch1=4.10 epoch2=61.20 patches=0.35`
//!
//! `epoch1`: one whole-array read into the device with an empty cache (every chunk missed,
//! decoded through the staged pipeline into a device buffer of its own and kept); `epoch2`:
//! the median of `--reps` whole-array reads from the full cache (every chunk assembled on
//! the device by the scatter kernel, nothing fetched, decoded or copied from the host);
//! `patches`: random 1×64×64 patches at any offset (most cut through 4 chunks) read one at a
//! time from the full cache. All in GB/s of decoded data delivered; every whole-array result
//! and every tenth patch checked against the data first.

use crate::arrays::{self, Layout};
use crate::bench::{Bench, median_gbps};
use crate::fixtures::same;
use std::ops::Range;
use std::time::Instant;
use zarrbuf::cache::ChunkCache;
use zarrbuf::{ArrayReadExt, NDBuffer};
use zarrbuf_test_cases::variants::{self, Variant};
use zarrs::array::Array;
use zarrs::filesystem::FilesystemStore;

/// The (variant, layout) the cached line measures: the headline one.
pub(crate) const CACHED: (Variant, Layout) = (Variant::Zstd1, Layout::Chunks(64));

/// Random patches read per repetition.
const PATCHES_PER_REP: usize = 100;

/// The cached line.
pub(crate) fn cache_line(rates: &[f64; 3]) -> String {
    format!(
        "gpu-cache: variant={} layout={} epoch1={:.2} epoch2={:.2} patches={:.2}",
        arrays::variant_name(CACHED.0),
        CACHED.1.name(),
        rates[0],
        rates[1],
        rates[2]
    )
}

/// `n` patches of 1 × 64 × 64 (or the array's extent, if smaller) at pseudo-random offsets.
fn patches(shape: &[u64], n: usize) -> Vec<Vec<Range<u64>>> {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move |below: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % below.max(1)
    };
    (0..n)
        .map(|_| {
            let extent = [1, 64.min(shape[1]), 64.min(shape[2])];
            (0..3)
                .map(|d| {
                    let start = next(shape[d] - extent[d] + 1);
                    start..start + extent[d]
                })
                .collect()
        })
        .collect()
}

impl Bench {
    /// Epoch 1, epoch 2 and patch rates of `array` (holding `data`) through a cache in the
    /// device's memory, and the table row that goes with them.
    pub(crate) fn cached_rates(
        &self,
        array: &Array<FilesystemStore>,
        data: &NDBuffer,
    ) -> Result<([f64; 3], String), String> {
        let e = |x: zarrbuf::Error| x.to_string();
        let all = variants::full(array.shape());
        let proto = self.target.device();
        let total = data.nbytes();
        // Room for every chunk, with some to spare.
        let cache = ChunkCache::new(total as u64 + (total as u64 >> 3));
        let opts = self
            .target
            .read_options()
            .with_staging_bytes(self.staging_bytes)
            .with_cache(cache.clone());
        let dev = self.target.device_name();
        let t = Instant::now();
        let first = array.read_opt(&all, &proto, &opts).map_err(e)?;
        let epoch1 = total as f64 / t.elapsed().as_secs_f64().max(1e-9) / 1e9;
        same(&format!("cached epoch 1 on {dev}"), &first, data)?;
        drop(first);
        let filled = cache.stats();
        let second = array.read_opt(&all, &proto, &opts).map_err(e)?;
        same(&format!("cached epoch 2 on {dev}"), &second, data)?;
        drop(second);
        let after = cache.stats();
        if after.misses != filled.misses {
            return Err(format!(
                "cached epoch 2 on {dev} missed {} chunks (the cache holds {} of {} bytes)",
                after.misses - filled.misses,
                after.resident_bytes,
                cache.capacity()
            ));
        }
        let epoch2 = median_gbps(total, self.reps, || {
            array.read_opt(&all, &proto, &opts).map(drop).map_err(e)
        })?;
        let list = patches(array.shape(), PATCHES_PER_REP * self.reps.max(1));
        for (k, p) in list.iter().enumerate().step_by(10) {
            let got = array.read_opt(p, &proto, &opts).map_err(e)?;
            let ranges: Vec<Range<usize>> =
                p.iter().map(|r| r.start as usize..r.end as usize).collect();
            same(
                &format!("cached patch {k} {p:?} on {dev}"),
                &got,
                &data.get(&ranges).map_err(e)?,
            )?;
        }
        let patch_bytes: u64 = list
            .iter()
            .map(|p| p.iter().map(|r| r.end - r.start).product::<u64>() * 4)
            .sum();
        let t = Instant::now();
        for p in &list {
            array.read_opt(p, &proto, &opts).map(drop).map_err(e)?;
        }
        let secs = t.elapsed().as_secs_f64().max(1e-9);
        let patch_rate = patch_bytes as f64 / secs / 1e9;
        let missed = cache.stats().misses - filled.misses;
        if missed != 0 {
            return Err(format!("cached patches on {dev} missed {missed} chunks"));
        }
        let row = format!(
            "epoch 1 {epoch1:.2} / epoch 2 {epoch2:.2} ({:.1}x) GB/s whole; {} random 1x64x64 \
             patches {patch_rate:.2} GB/s ({:.0} reads/s); {} chunks kept, {} MiB",
            epoch2 / epoch1.max(1e-9),
            list.len(),
            list.len() as f64 / secs,
            after.entries,
            after.resident_bytes >> 20
        );
        Ok(([epoch1, epoch2, patch_rate], row))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cached_line_names_its_array_and_every_rate() {
        assert_eq!(
            cache_line(&[4.1, 61.234, 0.349]),
            "gpu-cache: variant=zstd1 layout=chunks64 epoch1=4.10 epoch2=61.23 patches=0.35"
        );
    }

    #[test]
    fn patches_lie_inside_the_array() {
        for shape in [vec![256u64, 256, 256], vec![64, 64, 64], vec![3, 100, 64]] {
            for p in patches(&shape, 200) {
                assert_eq!(p[0].end - p[0].start, 1);
                assert_eq!(p[1].end - p[1].start, 64.min(shape[1]));
                assert!(p.iter().zip(&shape).all(|(r, &n)| r.end <= n), "{p:?}");
            }
        }
    }
}
