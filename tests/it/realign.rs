//! CPU reads into outputs that do not start on a cache line: on zarrs' route
//! (`PipelineMode::Direct`) they decode into aligned scratch slabs and copy them out
//! (`pipeline/read/direct_read.rs`, `read_realigned`); `Auto` reads of many chunks go
//! through the staged pipeline into the misaligned output itself. Either way the results are exactly an
//! aligned read's, for whole outputs and for windows of larger parents, in one slab or
//! several.

use std::ops::Range;
use std::sync::Arc;
use zarrbuf::dtype::ByteOrder;
use zarrbuf::{
    ArrayReadExt, ArrayWriteExt, Buffer, BufferPrototype, DataType, NDBuffer,
    options::{PipelineMode, ReadOptions},
};
use zarrs::array::codec::ZstdCodec;
use zarrs::array::{Array, ArrayBuilder, data_type};
use zarrs::storage::store::MemoryStore;

fn array(sharded: bool) -> (Array<MemoryStore>, Vec<f32>) {
    let shape = vec![96u64, 80, 48];
    let store = Arc::new(MemoryStore::new());
    let outer = if sharded {
        vec![32, 40, 48]
    } else {
        vec![16, 20, 16]
    };
    let mut b = ArrayBuilder::new(shape.clone(), outer, data_type::float32(), 0.0f32);
    if sharded {
        b.subchunk_shape(vec![16u64, 20, 16]);
    }
    b.bytes_to_bytes_codecs(vec![Arc::new(ZstdCodec::new(1, false))]);
    let a = b.build(store, "/a").unwrap();
    let values: Vec<f32> = (0..96 * 80 * 48).map(|v| v as f32 * 0.5).collect();
    a.write_all(&NDBuffer::from_vec(values.clone(), &[96, 80, 48]).unwrap())
        .unwrap();
    (a, values)
}

/// A zeroed C-order float32 array of `shape` whose first byte is 16 bytes past a cache line.
fn misaligned(shape: &[usize]) -> NDBuffer {
    let n: usize = shape.iter().product::<usize>() * 4;
    let buf = Buffer::from_vec(vec![0u8; n + 128]);
    let addr = buf.host_ptr().unwrap() as usize;
    let offset = (64 - addr % 64) % 64 + 16;
    let mut strides = vec![4isize; shape.len()];
    for k in (0..shape.len() - 1).rev() {
        strides[k] = strides[k + 1] * shape[k + 1] as isize;
    }
    let nd = NDBuffer::from_parts(
        buf,
        DataType::Float32,
        shape,
        &strides,
        offset,
        ByteOrder::native(),
    )
    .unwrap();
    assert_eq!(
        (nd.buffer().host_ptr().unwrap() as usize + nd.offset()) % 64,
        16
    );
    nd
}

fn expected(values: &[f32], subset: &[Range<u64>]) -> Vec<f32> {
    let mut out = Vec::new();
    for z in subset[0].clone() {
        for y in subset[1].clone() {
            for x in subset[2].clone() {
                out.push(values[(z * 80 * 48 + y * 48 + x) as usize]);
            }
        }
    }
    out
}

#[test]
fn misaligned_outputs_read_exactly() {
    for sharded in [false, true] {
        let (a, values) = array(sharded);
        // 64 MiB scratch (one slab), and a budget below one row of chunks (slabs of one row
        // of chunks or shards each).
        for (staging, mode) in [
            (256 << 20, PipelineMode::Direct),
            (4096, PipelineMode::Direct),
            (256 << 20, PipelineMode::Auto),
            (4096, PipelineMode::Auto),
        ] {
            let opts = ReadOptions::default()
                .with_staging_bytes(staging)
                .with_mode(mode);
            let all = [0..96u64, 0..80, 0..48];
            let mut out = misaligned(&[96, 80, 48]);
            a.read_into_opt(&all, &mut out, &opts).unwrap();
            assert_eq!(
                out.to_vec::<f32>().unwrap(),
                values,
                "sharded {sharded}, staging {staging}, {mode:?}"
            );

            // A window of a larger misaligned parent; the rest of the parent stays zero.
            let subset = [5..91u64, 3..77, 1..45];
            let parent = misaligned(&[100, 90, 60]);
            let mut window = parent.get(&[2..88, 7..81, 10..54]).unwrap();
            a.read_into_opt(&subset, &mut window, &opts).unwrap();
            assert_eq!(window.to_vec::<f32>().unwrap(), expected(&values, &subset));
            let nonzero = parent
                .to_vec::<f32>()
                .unwrap()
                .iter()
                .filter(|v| **v != 0.0)
                .count();
            let written = expected(&values, &subset)
                .iter()
                .filter(|v| **v != 0.0)
                .count();
            assert_eq!(nonzero, written, "writes outside the window");

            // The same read into fresh (aligned) memory agrees.
            let fresh = a.read(&subset, &BufferPrototype::cpu()).unwrap();
            assert_eq!(fresh.to_vec::<f32>().unwrap(), expected(&values, &subset));
        }
    }
}
