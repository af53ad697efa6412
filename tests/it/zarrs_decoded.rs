//! Codec chains the device path cannot split (a transpose outside the sharding codec, a
//! compressor on whole shards) are decoded entirely by zarrs on the CPU; only the scatter
//! runs on the device. Read and written here on every prototype and both paths.

use crate::common::prototypes;
use std::sync::Arc;
use zarrbuf::{
    ArrayReadExt, ArrayWriteExt, NDBuffer,
    options::{PipelineMode, ReadOptions, WriteOptions},
};
use zarrs::array::codec::{ShardingCodecBuilder, TransposeCodec, TransposeOrder, ZstdCodec};
use zarrs::array::{ArrayBuilder, data_type};

#[test]
fn non_exclusively_sharded_arrays_round_trip() {
    let shape = [13u64, 10, 6];
    let n: usize = shape.iter().product::<u64>() as usize;
    let values: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin() * 1000.0).collect();
    let data = NDBuffer::from_vec(values, &[13, 10, 6]).unwrap();
    for (pname, proto) in prototypes() {
        for mode in [
            PipelineMode::Auto,
            PipelineMode::Staged,
            PipelineMode::Direct,
        ] {
            let inner = vec![
                // In the transposed (encoded) order: shards are [6, 4, 8] there.
                std::num::NonZeroU64::new(3).unwrap(),
                std::num::NonZeroU64::new(2).unwrap(),
                std::num::NonZeroU64::new(4).unwrap(),
            ];
            let mut sharding = ShardingCodecBuilder::new(inner, &data_type::float32());
            sharding.bytes_to_bytes_codecs(vec![Arc::new(ZstdCodec::new(1, false))]);
            let array = ArrayBuilder::new(
                shape.to_vec(),
                vec![4u64, 8, 6],
                data_type::float32(),
                f32::NAN,
            )
            .array_to_array_codecs(vec![Arc::new(TransposeCodec::new(
                TransposeOrder::new(&[2, 0, 1]).unwrap(),
            ))])
            .array_to_bytes_codec(sharding.build_arc())
            .bytes_to_bytes_codecs(vec![Arc::new(ZstdCodec::new(3, true))])
            .build(Arc::new(zarrs::storage::store::MemoryStore::new()), "/x")
            .unwrap();
            let on_proto = data.to_prototype(&proto).unwrap();
            let all = [0..13u64, 0..10, 0..6];
            array
                .write_opt(&all, &on_proto, &WriteOptions::default().with_mode(mode))
                .unwrap();
            let back = array
                .read_opt(&all, &proto, &ReadOptions::default().with_mode(mode))
                .unwrap();
            assert!(
                back.array_equal(&data, false).unwrap(),
                "{pname} {mode:?}: whole array"
            );
            let part = array
                .read_opt(
                    &[3..11, 2..9, 1..5],
                    &proto,
                    &ReadOptions::default().with_mode(mode),
                )
                .unwrap();
            assert!(
                part.array_equal(&data.get(&[3..11, 2..9, 1..5]).unwrap(), false)
                    .unwrap(),
                "{pname} {mode:?}: subset"
            );
            // zarrs itself reads what zarrbuf wrote.
            let theirs: Vec<f32> = array
                .retrieve_array_subset(&zarrs::array::ArraySubset::new_with_ranges(&all))
                .unwrap();
            assert_eq!(
                theirs,
                data.to_vec::<f32>().unwrap(),
                "{pname} {mode:?}: zarrs reads it back"
            );
        }
    }
}
