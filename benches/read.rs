//! The side-by-side read benchmark: whole-array reads of a float32 array with 64³ chunks in
//! four variants (uncompressed, zstd 1, blosc lz4 + shuffle, zstd 1 sharded 256³/64³), by
//! zarrs (into a reused buffer, and allocating) and by zarrbuf (into a fresh NDBuffer on the
//! CPU, and into pinned and CUDA memory when a GPU is present).
//!
//! `cargo bench --bench read` uses 1 GiB (or `ZARRBUF_BENCH_BYTES`); under `cargo test` a
//! 64 MiB array keeps CI fast. Stores are created once under `target/bench-data`.

#[path = "support/variants.rs"]
mod variants;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;
use variants::Variant;
use zarrbuf::{BufferPrototype, Device};

fn bytes() -> u64 {
    if let Some(n) = std::env::var("ZARRBUF_BENCH_BYTES").ok().and_then(|v| v.parse().ok()) {
        return n;
    }
    if std::env::args().any(|a| a == "--bench") { 1 << 30 } else { 64 << 20 }
}

fn reads(c: &mut Criterion) {
    let shape = variants::shape_for(bytes());
    let total = shape.iter().product::<u64>() as usize * 4;
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/bench-data");
    let data = variants::data(&shape);
    let gpu = Device::Cuda(0).is_available();
    if !gpu {
        println!("skipping zarrbuf pinned/CUDA reads: no CUDA device on this machine");
    }
    let mut reused = vec![0u8; total];
    for v in Variant::ALL {
        let array = variants::create(&dir, v, &shape, &data);
        let mut g = c.benchmark_group(format!("read/{}", v.name()));
        g.throughput(Throughput::Bytes(total as u64)).sample_size(10);
        g.bench_function("zarrs_into_reused", |b| b.iter(|| variants::zarrs_into(&array, &mut reused)));
        g.bench_function("zarrs_retrieve", |b| b.iter(|| black_box(variants::zarrs_alloc(&array))));
        g.bench_function("zarrbuf_cpu_fresh", |b| b.iter(|| black_box(variants::zarrbuf_read(&array, &BufferPrototype::cpu()))));
        if gpu {
            g.bench_function("zarrbuf_pinned", |b| b.iter(|| black_box(variants::zarrbuf_read(&array, &BufferPrototype::pinned(0)))));
            g.bench_function("zarrbuf_cuda", |b| b.iter(|| black_box(variants::zarrbuf_read(&array, &BufferPrototype::cuda(0)))));
        }
        g.finish();
    }
}

criterion_group!(benches, reads);
criterion_main!(benches);
