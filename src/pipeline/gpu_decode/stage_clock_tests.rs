//! Stage timings and decode limits of reads through the host twin of the device decoder:
//! every stage's bytes are exactly what the array's chunks hold.

use crate::options::{Decode, PipelineMode, ReadOptions, Stage, StageTimings};
use crate::{ArrayReadExt, ArrayWriteExt, BufferPrototype, NDBuffer};
use std::sync::Arc;
use zarrs::array::codec::ZstdCodec;
use zarrs::array::{Array, ArrayBuilder, data_type};
use zarrs::storage::store::MemoryStore;

/// A 40 × 48 float32 array in 16 × 32 zstd chunks: 3 × 2 chunks, those of the last row and
/// column partly outside the array, none one run of the output (so each is scattered).
fn array() -> Array<MemoryStore> {
    let store = Arc::new(MemoryStore::new());
    let mut b = ArrayBuilder::new(vec![40, 48], vec![16, 32], data_type::float32(), 0.0f32);
    b.bytes_to_bytes_codecs(vec![Arc::new(ZstdCodec::new(1, false))]);
    let array = b.build(store, "/a").unwrap();
    array.store_metadata().unwrap();
    let values: Vec<f32> = (0..40 * 48).map(|i| (i as f32 * 0.37).sin()).collect();
    array
        .write_all(&NDBuffer::from_vec(values, &[40, 48]).unwrap())
        .unwrap();
    array
}

/// The stored bytes of every chunk, summed.
fn stored_bytes(array: &Array<MemoryStore>) -> u64 {
    let mut total = 0;
    for i in 0..3u64 {
        for j in 0..2u64 {
            let chunk = array.retrieve_encoded_chunk(&[i, j]).unwrap().unwrap();
            total += chunk.len() as u64;
        }
    }
    total
}

fn gpu_opts() -> ReadOptions {
    ReadOptions::default()
        .with_mode(PipelineMode::Staged)
        .with_decode(Decode::Gpu)
}

#[test]
fn a_timed_read_fills_every_stage_with_the_chunks_bytes() {
    let array = array();
    let timings = Arc::new(StageTimings::default());
    let opts = gpu_opts().with_stage_timings(timings.clone());
    let all = [0..40, 0..48];
    let got = array
        .read_opt(&all, &BufferPrototype::cpu(), &opts)
        .unwrap();
    let plain = array
        .read_opt(&all, &BufferPrototype::cpu(), &gpu_opts())
        .unwrap();
    assert_eq!(
        got.to_native_bytes().unwrap(),
        plain.to_native_bytes().unwrap()
    );
    let r = timings.report();
    let stored = stored_bytes(&array);
    // Plain zstd frames: the device takes each stored chunk whole.
    for stage in [Stage::Fetch, Stage::Walk, Stage::Staging, Stage::H2d] {
        assert_eq!(r.stage(stage).bytes, stored, "{stage:?}");
    }
    // Six whole chunks decoded; the array's bytes scattered.
    assert_eq!(r.stage(Stage::Nvcomp).bytes, 6 * 16 * 32 * 4);
    assert_eq!(r.stage(Stage::Scatter).bytes, 40 * 48 * 4);
    for stage in Stage::ALL {
        assert!(!r.stage(stage).time.is_zero(), "{stage:?} took no time");
    }
    assert_eq!(r.reads, 1);
    assert!(!r.wall.is_zero() && !r.device_busy.is_zero());
    assert!(r.device_busy <= r.wall, "{r:?}");
    assert!(!r.timing_overhead.is_zero(), "{r:?}");
    // A second read adds as much again; the plain read above added nothing.
    array
        .read_opt(&all, &BufferPrototype::cpu(), &opts)
        .unwrap();
    let twice = timings.report();
    assert_eq!(twice.reads, 2);
    assert_eq!(twice.stage(Stage::Fetch).bytes, 2 * stored);
    assert_eq!(twice.stage(Stage::Scatter).bytes, 2 * 40 * 48 * 4);
}

#[test]
fn decode_limits_measure_every_stored_chunk() {
    let array = array();
    let limits =
        crate::pipeline::decode_limits(&array, &BufferPrototype::cpu(), &gpu_opts(), 2).unwrap();
    assert_eq!(limits.chunks, 6);
    assert_eq!(limits.stored_bytes, stored_bytes(&array));
    assert_eq!(limits.decoded_bytes, 6 * 16 * 32 * 4);
    assert!(limits.chunks_per_batch >= 1);
    assert!(limits.resident_gbps > 0.0 && limits.host_codec_gbps > 0.0);
    assert!(limits.cores >= 1);
}
