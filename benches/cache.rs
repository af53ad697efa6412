//! The decoded-chunk cache's eviction policies on a training loader's reads: random 1×64×64
//! patches of a 256 MiB float32 array (zstd 1, 64³ chunks, in memory), read one at a time
//! through a `ChunkCache` of 25, 50 and 100% of the array with each policy. An epoch of
//! patches warms the cache, then `--reps` epochs of other patches are measured: the hit
//! ratio over all of them and the median reads per second, beside 200 patches of each read
//! without a cache. docs/caching.md has the table.
//!
//! ```text
//! cargo bench --bench cache [-- --reads 2000 --reps 3 --capacity 25|50|100]
//! ```
//!
//! Under `cargo test --all-targets` (no `--bench` argument) it checks itself on a small
//! array: every cached read equals the uncached one, and a cache holding the whole array
//! hits every chunk of the second epoch.

use rand::{Rng, SeedableRng, rngs::StdRng};
use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;
use zarrbuf::cache::{ChunkCache, PolicyKind};
use zarrbuf::options::ReadOptions;
use zarrbuf::{ArrayReadExt, ArrayWriteExt, BufferPrototype, NDBuffer};
use zarrs::array::codec::ZstdCodec;
use zarrs::array::{Array, ArrayBuilder, data_type};
use zarrs::storage::store::MemoryStore;

/// A float32 array of `shape` in chunks of `chunk`³, zstd 1, holding a smooth field.
fn build(shape: [u64; 3], chunk: u64) -> Array<MemoryStore> {
    let array = ArrayBuilder::new(shape.to_vec(), vec![chunk; 3], data_type::float32(), 0.0f32)
        .bytes_to_bytes_codecs(vec![Arc::new(ZstdCodec::new(1, false))])
        .build(Arc::new(MemoryStore::new()), "/x")
        .expect("array");
    let (z, y, x) = (shape[0] as usize, shape[1] as usize, shape[2] as usize);
    // One plane of `chunk` rows at a time keeps the source small.
    for z0 in (0..z).step_by(chunk as usize) {
        let rows = (chunk as usize).min(z - z0);
        let values: Vec<f32> = (0..rows * y * x)
            .map(|i| {
                let (k, j, l) = (z0 + i / (y * x), (i / x) % y, i % x);
                ((k as f32 * 0.05).sin() + (j as f32 * 0.03).cos()) * 100.0 + l as f32 * 0.001
            })
            .collect();
        let data = NDBuffer::from_vec(values, &[rows, y, x]).expect("plane");
        array
            .write(
                &[z0 as u64..(z0 + rows) as u64, 0..y as u64, 0..x as u64],
                &data,
            )
            .expect("write");
    }
    array
}

/// `n` random 1×p×p patches of `shape`.
fn patches(shape: [u64; 3], p: u64, n: usize, seed: u64) -> Vec<Vec<Range<u64>>> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            let z = rng.random_range(0..shape[0]);
            let y = rng.random_range(0..=shape[1] - p);
            let x = rng.random_range(0..=shape[2] - p);
            vec![z..z + 1, y..y + p, x..x + p]
        })
        .collect()
}

/// Reads every patch with `opts`; reads per second.
fn epoch(array: &Array<MemoryStore>, subsets: &[Vec<Range<u64>>], opts: &ReadOptions) -> f64 {
    let cpu = BufferPrototype::cpu();
    let start = Instant::now();
    for s in subsets {
        std::hint::black_box(array.read_opt(s, &cpu, opts).expect("read"));
    }
    subsets.len() as f64 / start.elapsed().as_secs_f64()
}

fn self_check() {
    let shape = [16, 64, 64];
    let array = build(shape, 16);
    let subsets = patches(shape, 16, 60, 1);
    let cpu = BufferPrototype::cpu();
    for policy in [PolicyKind::Lru, PolicyKind::Clock] {
        let cache = ChunkCache::with_policy(1 << 20, policy);
        let opts = ReadOptions::default().with_cache(cache.clone());
        for _ in 0..2 {
            for s in &subsets {
                let got = array.read_opt(s, &cpu, &opts).expect("cached read");
                let want = array.read(s, &cpu).expect("read");
                assert_eq!(got.to_vec::<f32>().unwrap(), want.to_vec::<f32>().unwrap());
            }
        }
        let stats = cache.stats();
        // The whole array (16 chunks of 16 KiB) fits: only the first epoch missed.
        assert!(
            stats.misses <= 16 && stats.hits > stats.misses,
            "{policy:?}: {stats:?}"
        );
    }
    println!("cache bench: self-check passed (run it with `cargo bench --bench cache`)");
}

/// The value after `flag` in `args`, parsed.
fn arg<T: std::str::FromStr>(args: &[String], flag: &str) -> Option<T> {
    let at = args.iter().position(|a| a == flag)?;
    args.get(at + 1)?.parse().ok()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if !args.iter().any(|a| a == "--bench") {
        self_check();
        return;
    }
    let reads: usize = arg(&args, "--reads").unwrap_or(2000);
    let reps: u64 = arg(&args, "--reps").unwrap_or(3);
    let only: Option<u64> = arg(&args, "--capacity");
    let shape = [256, 512, 512];
    let bytes = shape.iter().product::<u64>() * 4;
    eprintln!("building the 256 MiB array...");
    let array = build(shape, 64);
    let warm = patches(shape, 64, reads, 7);
    let measured: Vec<_> = (0..reps)
        .map(|r| patches(shape, 64, reads, 8 + r))
        .collect();
    let plain = median(
        measured
            .iter()
            .map(|m| epoch(&array, &m[..reads.min(200)], &ReadOptions::default()))
            .collect(),
    );
    println!("| policy | capacity | hit ratio | reads/s (median of {reps}) |");
    println!("|---|---|---|---|");
    println!("| no cache | — | — | {plain:.0} |");
    for percent in [25u64, 50, 100] {
        if only.is_some_and(|o| o != percent) {
            continue;
        }
        for policy in [PolicyKind::Lru, PolicyKind::Clock] {
            let cache = ChunkCache::with_policy(bytes * percent / 100, policy);
            let opts = ReadOptions::default().with_cache(cache.clone());
            epoch(&array, &warm, &opts);
            let before = cache.stats();
            let rate = median(measured.iter().map(|m| epoch(&array, m, &opts)).collect());
            let after = cache.stats();
            let (hits, misses) = (after.hits - before.hits, after.misses - before.misses);
            let ratio = hits as f64 / (hits + misses).max(1) as f64;
            println!("| {policy:?} | {percent}% | {ratio:.3} | {rate:.0} |");
        }
    }
}
