//! Host allocation + first write (a plain `Vec` vs zarrbuf's huge-page-advised, cached
//! allocation), host copies, and pinned/pageable H2D and D2H bandwidth when a GPU is present.
//! `cargo bench --bench memory`; under `cargo test` the sizes shrink to keep CI fast.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::hint::black_box;
use zarrbuf::{Buffer, BufferPrototype, Device};

fn bench_mode() -> bool {
    std::env::args().any(|a| a == "--bench")
}

fn size() -> usize {
    if bench_mode() { 256 << 20 } else { 8 << 20 }
}

/// Writes every byte, as a decoder filling an output does.
fn touch(bytes: &mut [u8]) {
    for (i, chunk) in bytes.chunks_mut(4096).enumerate() {
        chunk.fill(i as u8);
    }
}

fn allocation_and_first_write(c: &mut Criterion) {
    let n = size();
    let mut g = c.benchmark_group("alloc+first-write");
    g.throughput(Throughput::Bytes(n as u64)).sample_size(10);
    g.bench_function(BenchmarkId::new("vec", n), |b| {
        b.iter(|| {
            let mut v = vec![0u8; n];
            touch(&mut v);
            black_box(v);
        })
    });
    zarrbuf::release_cached_memory();
    g.bench_function(BenchmarkId::new("zarrbuf-cpu", n), |b| {
        b.iter(|| {
            let mut buf = Buffer::empty(n, &BufferPrototype::cpu()).expect("host allocation");
            buf.with_host_bytes_mut(|bytes| {
                touch(bytes);
                Ok(())
            })
            .expect("host write");
            black_box(buf);
        })
    });
    g.finish();
}

fn host_copies(c: &mut Criterion) {
    let n = size();
    let src = Buffer::from_vec(vec![7u8; n]);
    let mut dst = Buffer::empty(n, &BufferPrototype::cpu()).expect("host allocation");
    let mut g = c.benchmark_group("copy");
    g.throughput(Throughput::Bytes(n as u64)).sample_size(10);
    g.bench_function(BenchmarkId::new("host-to-host", n), |b| b.iter(|| dst.copy_from(&src).expect("copy")));
    g.finish();
}

fn device_transfers(c: &mut Criterion) {
    if !Device::Cuda(0).is_available() {
        println!("skipping H2D/D2H benchmarks: no CUDA device on this machine");
        return;
    }
    let n = size();
    let mut device = Buffer::empty(n, &BufferPrototype::cuda(0)).expect("device allocation");
    let mut g = c.benchmark_group("transfer");
    g.throughput(Throughput::Bytes(n as u64)).sample_size(10);
    for (name, proto) in [("pinned", BufferPrototype::pinned(0)), ("pageable", BufferPrototype::cpu())] {
        let mut host = Buffer::zeros(n, &proto).expect("host buffer");
        g.bench_function(BenchmarkId::new(format!("h2d-{name}"), n), |b| b.iter(|| device.copy_from(&host).expect("h2d")));
        g.bench_function(BenchmarkId::new(format!("d2h-{name}"), n), |b| b.iter(|| host.copy_from(&device).expect("d2h")));
    }
    g.finish();
}

criterion_group!(benches, allocation_and_first_write, host_copies, device_transfers);
criterion_main!(benches);
