//! Whole staged reads against a simulated device ([`SimulatedOps`]): batches follow the
//! batch plan, and `Decode::Both` is never much slower than the faster of the CPU and the
//! device alone — the hybrid scheduler proved without a GPU; and, with a chunk cache, that
//! the device's decoded chunks are kept only once their batch has finished.
//!
//! Both sides are simulated with sleeps, not work, so the timings do not depend on how
//! many cores are free: a CPU thread sleeps `CPU_UNIT` per unit it decodes (it also writes
//! the unit's bytes), the device `latency + bytes / rate` per batch (its host twin decodes
//! the real zstd frames at once; only the completion waits).

use super::device_parts::{Compressed, DeviceDecode, DeviceParts};
use crate::buffer::{BufferPrototype, NDBuffer};
use crate::compression_formats::Compression;
use crate::data_types::{DataType, Order};
use crate::device::{DeviceOps, SimulatedOps};
use crate::errors::{Error, Result};
use crate::pipeline::read::host_scatter::Claim;
use crate::pipeline::read::read_route::{RouteOptions, run_read};
use crate::pipeline::read::staged_read::{Decoder, Produced, StagedRead};
use crate::zarr::{EncodedLayout, Unit};
use std::num::NonZeroU64;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Bytes per unit (a size no other test's slots have, so the slot pool keeps them apart).
const UNIT_BYTES: usize = 4000;
/// CPU decoding threads.
const THREADS: usize = 2;

/// A read of `n` one-dimensional units of `UNIT_BYTES` `u8` elements, their zstd frames and
/// the bytes the read must produce.
struct Case {
    units: Vec<Unit>,
    frames: Vec<Vec<u8>>,
    want: Vec<u8>,
    /// The decoded units' layout (native: each decodes straight into the output).
    layout: EncodedLayout,
}

impl Case {
    /// `noise`: bits of pseudo-random noise per byte (0 compresses well, 8 not at all).
    fn new(n: usize, noise: u32) -> Self {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let want: Vec<u8> = (0..n * UNIT_BYTES)
            .map(|i| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                ((i / 512) as u32 ^ (state as u32 & ((1u32 << noise) - 1))) as u8
            })
            .collect();
        let frames = want
            .chunks(UNIT_BYTES)
            .map(|c| zstd::bulk::compress(c, 1).expect("zstd"))
            .collect();
        let units = (0..n as u64)
            .map(|k| {
                let start = k * UNIT_BYTES as u64;
                let region = std::iter::once(start..start + UNIT_BYTES as u64).collect();
                Unit {
                    indices: vec![k],
                    origin: vec![start],
                    shape: vec![NonZeroU64::new(UNIT_BYTES as u64).expect("nonzero")],
                    region,
                }
            })
            .collect();
        Case {
            units,
            frames,
            want,
            layout: EncodedLayout::native(),
        }
    }
}

/// A zeroed host output of `len` bytes.
fn output(len: usize) -> NDBuffer {
    NDBuffer::zeros(&[len], DataType::UInt8, Order::C, &BufferPrototype::cpu()).expect("output")
}

/// The error for a unit the device decoder rejected.
fn unit_error(unit: &Unit, why: String) -> Error {
    Error::InvalidArgument(format!("unit {:?}: {why}", unit.indices))
}

/// Who decodes in a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Who {
    Cpu,
    Gpu,
    Both,
}

/// Reads `case` through `ops`, CPU threads sleeping `cpu_unit` per unit; returns the time.
fn read(
    case: &Case,
    ops: Arc<dyn DeviceOps>,
    who: Who,
    cpu_unit: Duration,
    staging: usize,
) -> Duration {
    let out = output(case.want.len());
    let staged = StagedRead {
        ops,
        units: &case.units,
        layout: case.layout.clone(),
        request_start: vec![0],
        fill_value: vec![0],
        staging_bytes: staging,
        threads: THREADS,
        progress: None,
        unit_error: &unit_error,
        stage_timings: None,
    };
    let routes = RouteOptions {
        device_decode: (who != Who::Cpu).then_some(DeviceDecode {
            compression: Compression::Zstd,
            hybrid: who == Who::Both,
            blosc: false,
        }),
        cache: None,
        claim: Claim::Runs,
    };
    let produce = |unit: &Unit, slot: &mut [u8], decoder: Decoder| -> Result<Produced> {
        let k = unit.indices[0] as usize;
        if decoder == Decoder::Device {
            let frame = &case.frames[k];
            slot[..frame.len()].copy_from_slice(frame);
            return Ok(Produced::Compressed(Compressed {
                len: frame.len(),
                parts: DeviceParts::Whole,
            }));
        }
        std::thread::sleep(cpu_unit);
        slot[..UNIT_BYTES].copy_from_slice(&case.want[k * UNIT_BYTES..(k + 1) * UNIT_BYTES]);
        Ok(Produced::Decoded(UNIT_BYTES))
    };
    let started = Instant::now();
    run_read(&staged, &routes, &out, &produce).expect("read");
    let took = started.elapsed();
    let got = out.buffer().to_vec().expect("host bytes");
    assert!(got == case.want, "{who:?}: wrong bytes");
    took
}

/// A simulated device with `sms` SMs whose full batches (`4 × sms` units) decode at
/// `ratio` × the CPU threads' rate, a fifth of a batch's time being latency.
fn device(sms: usize, ratio: f64, cpu_unit: Duration) -> Arc<SimulatedOps> {
    let batch = 4 * sms;
    let cpu_rate = THREADS as f64 / cpu_unit.as_secs_f64();
    let batch_secs = batch as f64 / (ratio * cpu_rate);
    let latency = Duration::from_secs_f64(0.2 * batch_secs);
    let bytes_per_sec = (batch * UNIT_BYTES) as f64 / (0.8 * batch_secs);
    Arc::new(SimulatedOps::new(sms, latency, bytes_per_sec))
}

#[test]
fn device_batches_follow_the_plan() {
    // 100 units on a device of 4 SMs: batches of 16, the last of 4 — not sized by slots.
    let case = Case::new(100, 0);
    for sms in [1, 4, 32] {
        let sim = Arc::new(SimulatedOps::new(sms, Duration::ZERO, 1e12));
        read(&case, sim.clone(), Who::Gpu, Duration::ZERO, 256 << 20);
        let b = (4 * sms).min(100);
        let mut want = vec![b; 100 / b];
        if 100 % b != 0 {
            want.push(100 % b);
        }
        // Two batches gather at once, so the short last one may go first.
        let mut got = sim.batches();
        got.sort_by(|a, b| b.cmp(a));
        assert_eq!(got, want, "{sms} SMs");
    }
}

#[test]
fn a_batch_scatters_its_units_with_one_batched_copy() {
    // A (one-axis) transpose in the chain: no unit decodes straight into the output, each is
    // scattered from scratch — every batch's scatters in one batched copy, none alone.
    let mut case = Case::new(100, 0);
    case.layout.order = Some(vec![0]);
    let sim = Arc::new(SimulatedOps::new(4, Duration::ZERO, 1e12));
    read(&case, sim.clone(), Who::Gpu, Duration::ZERO, 256 << 20);
    let (alone, mut batched) = sim.copies();
    let mut batches = sim.batches();
    batched.sort_unstable();
    batches.sort_unstable();
    assert_eq!(alone, 0, "scatters enqueued one by one");
    assert_eq!(
        batched, batches,
        "one batched copy per batch, of all its units"
    );
}

#[test]
fn batches_close_on_compressed_bytes_when_the_budget_is_small() {
    // Chunks that compress to about half: a 10 KiB budget gives each batch a 5 KiB input
    // buffer (raised to one decoded chunk), one chunk each; every byte still arrives.
    let case = Case::new(40, 4);
    let frame = case.frames[0].len();
    assert!(
        frame > UNIT_BYTES / 3 && frame < UNIT_BYTES,
        "frame of {frame} bytes"
    );
    let sim = Arc::new(SimulatedOps::new(4, Duration::ZERO, 1e12));
    read(&case, sim.clone(), Who::Gpu, Duration::ZERO, 10 << 10);
    let batches = sim.batches();
    assert_eq!(batches.iter().sum::<usize>(), 40);
    assert!(batches.iter().all(|&b| b <= 2), "{batches:?}");
    // And in the hybrid, the device's batches shrink to what fits too.
    let sim = Arc::new(SimulatedOps::new(4, Duration::ZERO, 1e12));
    read(
        &case,
        sim.clone(),
        Who::Both,
        Duration::from_micros(200),
        10 << 10,
    );
    assert!(sim.batches().iter().all(|&b| b <= 2), "{:?}", sim.batches());
}

#[test]
fn both_is_never_much_slower_than_the_faster_side() {
    // 300 units; two CPU threads at 3 ms per unit (450 ms alone); devices of 8 SMs (batches
    // of 32) at 3x, 1x and 1/3x the CPU threads' rate. A timing on a loaded machine may be
    // late, so a ratio is measured up to three times and passes when one measurement does
    // (a policy that misjudges the split, such as a fixed half each, fails all three).
    let cpu_unit = Duration::from_millis(3);
    let case = Case::new(300, 0);
    let staging = 256 << 20;
    let cpu = read(&case, device(8, 1.0, cpu_unit), Who::Cpu, cpu_unit, staging);
    let mut report = Vec::new();
    let mut failed = Vec::new();
    for (name, ratio) in [("3x", 3.0), ("1x", 1.0), ("1/3x", 1.0 / 3.0)] {
        let mut passed = false;
        for attempt in 1..=3 {
            let gpu = read(
                &case,
                device(8, ratio, cpu_unit),
                Who::Gpu,
                cpu_unit,
                staging,
            );
            let sim = device(8, ratio, cpu_unit);
            let both = read(&case, sim.clone(), Who::Both, cpu_unit, staging);
            let device_units: usize = sim.batches().iter().sum();
            let ideal =
                Duration::from_secs_f64(1.0 / (1.0 / cpu.as_secs_f64() + 1.0 / gpu.as_secs_f64()));
            let faster = cpu.min(gpu);
            let ok = both.as_secs_f64() <= faster.as_secs_f64() / 0.95;
            report.push(format!(
                "gpu {name:>4} (try {attempt}): cpu {:>4} ms, gpu {:>4} ms, both {:>4} ms \
                 ({device_units} of 300 units on the device), ideal {:>4} ms; \
                 both/faster throughput {:.2}, both/ideal {:.2}{}",
                cpu.as_millis(),
                gpu.as_millis(),
                both.as_millis(),
                ideal.as_millis(),
                faster.as_secs_f64() / both.as_secs_f64(),
                ideal.as_secs_f64() / both.as_secs_f64(),
                if ok { "" } else { "  <- below 0.95" },
            ));
            if ok {
                passed = true;
                break;
            }
        }
        if !passed {
            failed.push(name);
        }
    }
    eprintln!("{}", report.join("\n"));
    assert!(
        failed.is_empty(),
        "Both below 0.95x the faster side's throughput at {failed:?}:\n{}",
        report.join("\n")
    );
}

#[test]
fn a_read_of_less_than_one_batch_is_split_too() {
    // 24 units, batches of 32: a device at a third of the CPU threads' rate must not get
    // them all (as it did when reads of one batch or less went to the device whole).
    let cpu_unit = Duration::from_millis(3);
    let case = Case::new(24, 0);
    let staging = 256 << 20;
    let mut report = Vec::new();
    for attempt in 1..=3 {
        let cpu = read(&case, device(8, 1.0, cpu_unit), Who::Cpu, cpu_unit, staging);
        let sim = device(8, 1.0 / 3.0, cpu_unit);
        let both = read(&case, sim.clone(), Who::Both, cpu_unit, staging);
        let device_units: usize = sim.batches().iter().sum();
        report.push(format!(
            "try {attempt}: cpu {} ms, both {} ms, {device_units} of 24 units on the device",
            cpu.as_millis(),
            both.as_millis()
        ));
        // 0.85: with 12 rounds of 3 ms on two threads, one round's rounding and the probe's
        // handover are a tenth of the read (the old rule measured 0.33x).
        if both.as_secs_f64() <= cpu.as_secs_f64() / 0.85 && device_units < 24 {
            return;
        }
    }
    panic!(
        "Both below 0.95x the CPU on a read of less than one batch:\n{}",
        report.join("\n")
    );
}

/// With a cache, each chunk the simulated device decodes reaches the cache only once its
/// batch has finished there (the device's completion, not its submission), and every chunk
/// does by the end of the read.
#[test]
fn decoded_chunks_are_kept_only_once_their_batch_finished() {
    use crate::cache::ChunkCache;
    use crate::pipeline::cache::device_cache::ReadCache;
    use std::sync::Mutex;
    let n = 12;
    let case = Case::new(n, 0);
    let store = Arc::new(zarrs::storage::store::MemoryStore::new());
    let array = zarrs::array::ArrayBuilder::new(
        vec![(n * UNIT_BYTES) as u64],
        vec![UNIT_BYTES as u64],
        zarrs::array::data_type::uint8(),
        0u8,
    )
    .build(store, "/kept")
    .expect("array");
    let cache = ChunkCache::new(1 << 20);
    let read_cache = ReadCache::new(cache.clone(), &array, crate::place::Memory::Host);
    // One SM: batches of 4 units, each taking the decoder 300 ms.
    let sim = Arc::new(SimulatedOps::new(1, Duration::from_millis(300), 1e12));
    let out = output(n * UNIT_BYTES);
    // (units reported done, units the cache held) at each report: made when a batch is
    // submitted, before the device has finished it.
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (log, watched) = (seen.clone(), cache.clone());
    let staged = StagedRead {
        ops: sim.clone(),
        units: &case.units,
        layout: case.layout.clone(),
        request_start: vec![0],
        fill_value: vec![0],
        staging_bytes: 64 << 20,
        threads: THREADS,
        progress: Some(Arc::new(move |p: crate::options::Progress| {
            log.lock()
                .expect("log")
                .push((p.chunks_done, watched.stats().entries as usize));
        })),
        unit_error: &unit_error,
        stage_timings: None,
    };
    let routes = RouteOptions {
        device_decode: Some(DeviceDecode {
            compression: Compression::Zstd,
            hybrid: false,
            blosc: false,
        }),
        cache: Some(&read_cache),
        claim: Claim::Runs,
    };
    let produce = |unit: &Unit, slot: &mut [u8], _: Decoder| -> Result<Produced> {
        let frame = &case.frames[unit.indices[0] as usize];
        slot[..frame.len()].copy_from_slice(frame);
        Ok(Produced::Compressed(Compressed {
            len: frame.len(),
            parts: DeviceParts::Whole,
        }))
    };
    run_read(&staged, &routes, &out, &produce).expect("read");
    assert!(out.buffer().to_vec().expect("bytes") == case.want);
    assert_eq!(sim.batches(), vec![4, 4, 4]);
    let seen = seen.lock().expect("log");
    assert_eq!(seen.len(), n);
    // Each report comes right after its batch's submission, which the device takes 300 ms
    // to finish: at batch k's reports (k = 1, 2, 3) the cache holds whole earlier batches
    // only, never batch k. Two batches are in flight, so the third is submitted only once
    // the first has finished and was kept (its ring entry). Whether the second has finished
    // by then depends on the machine's load, so that is not asserted.
    for &(done, held) in seen.iter() {
        let batch = done.div_ceil(4);
        let earlier = 4 * (batch - 1);
        assert!(
            held % 4 == 0 && held <= earlier && (batch < 3 || held >= 4),
            "{done} reported, {held} kept: {seen:?}"
        );
    }
    assert_eq!(cache.stats().entries as usize, n);
    for (k, unit) in case.units.iter().enumerate() {
        let key = crate::cache::ChunkKey::new(
            crate::cache::ArrayId::of(&array),
            unit.indices.clone(),
            crate::place::Device::Cpu,
        );
        let kept = cache.get(&key).expect("kept").to_vec().expect("bytes");
        assert!(
            kept == case.want[k * UNIT_BYTES..(k + 1) * UNIT_BYTES],
            "unit {k}"
        );
    }
}
