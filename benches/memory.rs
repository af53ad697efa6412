//! Host allocation + first write (a plain `Vec` vs zarrbuf's 2 MiB-aligned, huge-page-advised
//! host allocation, with and without its block cache), host-to-host copies, and pinned and
//! pageable H2D/D2H bandwidth when a GPU is present (`copy_from` waits for the copy).
//!
//! ```text
//! cargo bench --bench memory
//! ```
//!
//! 256 MiB per operation as a benchmark; under `cargo test --all-targets` (no `--bench`
//! argument) criterion runs each function once on 8 MiB.

use criterion::{
    BenchmarkId, Criterion, SamplingMode, Throughput, criterion_group, criterion_main,
};
use std::hint::black_box;
use std::time::{Duration, Instant};
use zarrbuf::{Buffer, BufferPrototype, Device};

fn bench_mode() -> bool {
    std::env::args().any(|a| a == "--bench")
}

fn size() -> usize {
    if bench_mode() { 256 << 20 } else { 8 << 20 }
}

fn configure(g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>, n: usize) {
    g.throughput(Throughput::Bytes(n as u64))
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
}

/// Writes every byte, as a decoder filling its output does.
fn touch(bytes: &mut [u8]) {
    for (i, chunk) in bytes.chunks_mut(4096).enumerate() {
        chunk.fill(i as u8 | 1);
    }
}

fn allocation_and_first_write(c: &mut Criterion) {
    let n = size();
    let cpu = BufferPrototype::cpu();
    let mut g = c.benchmark_group("alloc+first-write");
    configure(&mut g, n);
    // A fresh Vec every time: 4 KiB pages, one fault per page (the allocator gives a large
    // block back to the OS on free, so the next one is fresh again).
    g.bench_function(BenchmarkId::new("vec", n), |b| {
        b.iter(|| {
            let mut v = vec![0u8; n];
            touch(&mut v);
            black_box(v);
        })
    });
    // zarrbuf with its block cache emptied before every iteration (outside the timing):
    // fresh, 2 MiB-aligned memory advised for huge pages.
    g.bench_function(BenchmarkId::new("zarrbuf-cpu-uncached", n), |b| {
        b.iter_custom(|iters| {
            let mut elapsed = Duration::ZERO;
            for _ in 0..iters {
                zarrbuf::alloc::release_cached_memory();
                let t = Instant::now();
                let mut buf = Buffer::empty(n, &cpu).expect("host allocation");
                buf.with_host_bytes_mut(|bytes| {
                    touch(bytes);
                    Ok(())
                })
                .expect("host write");
                elapsed += t.elapsed();
                drop(black_box(buf));
            }
            elapsed
        })
    });
    // zarrbuf as a reader uses it: the freed block comes back from the cache.
    zarrbuf::alloc::release_cached_memory();
    g.bench_function(BenchmarkId::new("zarrbuf-cpu-cached", n), |b| {
        b.iter(|| {
            let mut buf = Buffer::empty(n, &cpu).expect("host allocation");
            buf.with_host_bytes_mut(|bytes| {
                touch(bytes);
                Ok(())
            })
            .expect("host write");
            black_box(buf);
        })
    });
    zarrbuf::alloc::release_cached_memory();
    // The floor: writing memory that is already faulted in.
    let mut reused = vec![0u8; n];
    touch(&mut reused);
    g.bench_function(BenchmarkId::new("reused", n), |b| {
        b.iter(|| touch(black_box(&mut reused)))
    });
    g.finish();
}

fn host_copies(c: &mut Criterion) {
    let n = size();
    let cpu = BufferPrototype::cpu();
    let src = Buffer::from_vec(vec![7u8; n]);
    let mut dst = Buffer::zeros(n, &cpu).expect("host allocation");
    let mut g = c.benchmark_group("copy");
    configure(&mut g, n);
    g.bench_function(BenchmarkId::new("host-to-host", n), |b| {
        b.iter(|| dst.copy_from(&src).expect("copy"))
    });
    g.bench_function(BenchmarkId::new("host-to-new-host", n), |b| {
        b.iter(|| black_box(src.copy_to_new(&cpu).expect("copy")))
    });
    g.finish();
    zarrbuf::alloc::release_cached_memory();
}

fn device_transfers(c: &mut Criterion) {
    if !Device::Cuda(0).is_available() {
        println!("skipping H2D/D2H benchmarks: no CUDA device on this machine");
        return;
    }
    let n = size();
    let mut device = Buffer::empty(n, &BufferPrototype::cuda(0)).expect("device allocation");
    let mut g = c.benchmark_group("transfer");
    configure(&mut g, n);
    for (name, proto) in [
        ("pinned", BufferPrototype::pinned(0)),
        ("pageable", BufferPrototype::cpu()),
    ] {
        let mut host = Buffer::zeros(n, &proto).expect("host buffer");
        g.bench_function(BenchmarkId::new(format!("h2d-{name}"), n), |b| {
            b.iter(|| device.copy_from(&host).expect("h2d"))
        });
        g.bench_function(BenchmarkId::new(format!("d2h-{name}"), n), |b| {
            b.iter(|| host.copy_from(&device).expect("d2h"))
        });
    }
    g.finish();
}

criterion_group!(
    benches,
    allocation_and_first_write,
    host_copies,
    device_transfers
);
criterion_main!(benches);
