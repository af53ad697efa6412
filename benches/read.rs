//! The side-by-side read benchmark: whole-array reads of a float32 array with 64³ chunks in
//! four variants (uncompressed, zstd 1, blosc lz4 + shuffle, zstd 1 sharded 256³/64³), by
//! zarrs (into a reused buffer, and allocating) and by zarrbuf (into a fresh NDBuffer on the
//! CPU, and into pinned and CUDA memory when a GPU is present).
//!
//! ```text
//! cargo bench --bench read                              # 1 GiB arrays
//! ZARRBUF_BENCH_BYTES=268435456 cargo bench --bench read  # another size
//! ```
//!
//! Functions per variant (throughput is decoded bytes):
//! - `zarrs_into_reused`: zarrs' `retrieve_array_subset_into` into one buffer reused by every
//!   iteration (its pages are faulted in once) — the reference;
//! - `zarrs_into_reused_hugepages`: the same into a reused zarrbuf host buffer (2 MiB
//!   aligned, advised for transparent huge pages), to separate page size from the reader;
//! - `zarrs_retrieve`: zarrs' allocating `retrieve_array_subset`;
//! - `zarrbuf_cpu_fresh`: `read_all(&BufferPrototype::cpu())`, a new NDBuffer per iteration,
//!   freed inside the timed loop (it goes back to zarrbuf's block cache, as in a data loader
//!   reading array after array);
//! - `zarrbuf_cpu_uncached`: the same with the block cache emptied before every iteration
//!   (outside the timing), so each read pays for fresh (huge-page advised) memory;
//! - `zarrbuf_pinned`, `zarrbuf_cuda`: only when a CUDA device is present.
//!
//! Under `cargo test --all-targets` (no `--bench` argument) criterion runs every function
//! once on a 16 MiB array so that CI stays fast. Stores are created once under
//! `target/bench-data` and reused.

use criterion::{Criterion, SamplingMode, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use zarrbuf::{BufferPrototype, Device};
use zarrbuf_test_cases::variants::{self, Variant};

fn bench_mode() -> bool {
    std::env::args().any(|a| a == "--bench")
}

/// The array shape: 1 GiB (or `ZARRBUF_BENCH_BYTES`) as a benchmark, 16 MiB as a test.
fn shape() -> Vec<u64> {
    if let Some(n) = std::env::var("ZARRBUF_BENCH_BYTES")
        .ok()
        .and_then(|v| v.trim().parse().ok())
    {
        return variants::shape_for(n);
    }
    if bench_mode() {
        variants::shape_for(1 << 30)
    } else {
        // 16 MiB: shape_for's smallest shape is 256³ (64 MiB); a quarter-depth array still
        // has partial shards in the sharded variant and whole 64³ chunks everywhere.
        vec![64, 256, 256]
    }
}

fn reads(c: &mut Criterion) {
    let shape = shape();
    let total = shape.iter().product::<u64>() as usize * 4;
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/bench-data");
    let gpu = Device::Cuda(0).is_available();
    if !gpu {
        println!("skipping zarrbuf_pinned/zarrbuf_cuda reads: no CUDA device on this machine");
    }
    // Create missing stores first (the data is generated only when one is missing).
    let mut data = None;
    let mut arrays = Vec::new();
    for v in Variant::ALL {
        let array = variants::open_existing(&dir, v, &shape).unwrap_or_else(|| {
            println!(
                "creating the {} store of shape {shape:?} under {}",
                v.name(),
                dir.display()
            );
            variants::create(
                &dir,
                v,
                &shape,
                data.get_or_insert_with(|| variants::data(&shape)),
            )
        });
        arrays.push((v, array));
    }
    drop(data);
    let mut reused = vec![0u8; total];
    // The same reference into huge-page-backed memory (zarrbuf's host allocation, kept for
    // the whole run): zarrs' scatter of 256-byte chunk rows is TLB-bound on 4 KiB pages.
    let mut reused_huge = zarrbuf::Buffer::zeros(total, &BufferPrototype::cpu()).expect("host");
    let cpu = BufferPrototype::cpu();
    for (v, array) in &arrays {
        let mut g = c.benchmark_group(format!("read/{}", v.name()));
        g.throughput(Throughput::Bytes(total as u64))
            .sample_size(10)
            .sampling_mode(SamplingMode::Flat)
            .warm_up_time(Duration::from_millis(500))
            .measurement_time(Duration::from_secs(4));
        g.bench_function("zarrs_into_reused", |b| {
            b.iter(|| variants::zarrs_into(array, &mut reused))
        });
        g.bench_function("zarrs_into_reused_hugepages", |b| {
            b.iter(|| {
                reused_huge
                    .with_host_bytes_mut(|bytes| {
                        variants::zarrs_into(array, bytes);
                        Ok(())
                    })
                    .expect("host buffer")
            })
        });
        g.bench_function("zarrs_retrieve", |b| {
            b.iter(|| black_box(variants::zarrs_alloc(array)))
        });
        g.bench_function("zarrbuf_cpu_fresh", |b| {
            b.iter(|| black_box(variants::zarrbuf_read(array, &cpu)))
        });
        g.bench_function("zarrbuf_cpu_uncached", |b| {
            b.iter_custom(|iters| {
                let mut elapsed = Duration::ZERO;
                for _ in 0..iters {
                    zarrbuf::alloc::release_cached_memory();
                    let t = Instant::now();
                    let out = black_box(variants::zarrbuf_read(array, &cpu));
                    elapsed += t.elapsed();
                    drop(out);
                }
                elapsed
            })
        });
        zarrbuf::alloc::release_cached_memory();
        if gpu {
            let pinned = BufferPrototype::pinned(0);
            let cuda = BufferPrototype::cuda(0);
            g.bench_function("zarrbuf_pinned", |b| {
                b.iter(|| black_box(variants::zarrbuf_read(array, &pinned)))
            });
            g.bench_function("zarrbuf_cuda", |b| {
                b.iter(|| {
                    let out = variants::zarrbuf_read(array, &cuda);
                    out.buffer().sync().expect("device read completes");
                    black_box(out)
                })
            });
        }
        g.finish();
    }
}

criterion_group!(benches, reads);
criterion_main!(benches);
