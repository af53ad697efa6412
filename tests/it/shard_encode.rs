//! Whole shards written through the staged pipeline are assembled by zarrbuf's shard encoder
//! (inner chunks compressed in parallel, the index encoded with the array's index codecs).
//! Each layout of index and inner chain is written by zarrbuf and read back by zarrs, and
//! compared with what zarrs writes; shards and inner chunks holding only the fill value are
//! not stored. zarr-python reads the shards written in tests/it/write.rs (CI).

use std::sync::Arc;
use zarrbuf::{
    ArrayReadExt, ArrayWriteExt, BufferPrototype, NDBuffer, Order,
    options::{PipelineMode, WriteOptions},
};
use zarrs::array::codec::{
    BytesCodec, Crc32cCodec, ShardingCodecBuilder, ShardingIndexLocation, ZstdCodec,
};
use zarrs::array::{Array, ArrayBuilder, ArraySubset, Endianness, data_type};
use zarrs::storage::store::MemoryStore;

const SHAPE: [u64; 3] = [13, 10, 7];
const SHARD: [u64; 3] = [8, 4, 6];
const FILL: i32 = -7;

fn sharded(
    location: ShardingIndexLocation,
    index_crc: bool,
    endian: Endianness,
    zstd: bool,
) -> Array<MemoryStore> {
    let nz = |n: u64| std::num::NonZeroU64::new(n).unwrap();
    let mut sharding = ShardingCodecBuilder::new(vec![nz(4), nz(2), nz(3)], &data_type::int32());
    sharding
        .index_location(location)
        .array_to_bytes_codec(Arc::new(BytesCodec::new(Some(endian))));
    if zstd {
        sharding.bytes_to_bytes_codecs(vec![Arc::new(ZstdCodec::new(3, true))]);
    }
    if !index_crc {
        sharding.index_bytes_to_bytes_codecs(vec![]);
    } else {
        sharding.index_bytes_to_bytes_codecs(vec![Arc::new(Crc32cCodec::new())]);
    }
    let array = ArrayBuilder::new(SHAPE.to_vec(), SHARD.to_vec(), data_type::int32(), FILL)
        .array_to_bytes_codec(sharding.build_arc())
        .build(Arc::new(MemoryStore::new()), "/s")
        .unwrap();
    array.store_metadata().unwrap();
    array
}

/// Values, with the fill value over the shards at z < 8, 4 ≤ y < 8 (so those shards are
/// empty) and over the inner chunks at 8 ≤ z < 12, y < 2 of the edge shards.
fn data() -> Vec<i32> {
    let (ny, nx) = (SHAPE[1] as usize, SHAPE[2] as usize);
    (0..SHAPE.iter().product::<u64>() as usize)
        .map(|i| {
            let (z, y) = (i / (ny * nx), (i / nx) % ny);
            let empty_shard = z < 8 && (4..8).contains(&y);
            let empty_inner = (8..12).contains(&z) && y < 2;
            if empty_shard || empty_inner {
                FILL
            } else {
                (i as i32) * 3 - 100
            }
        })
        .collect()
}

#[test]
fn shards_assembled_by_zarrbuf_read_back_through_zarrs() {
    let all = [0..SHAPE[0], 0..SHAPE[1], 0..SHAPE[2]];
    let values = data();
    let buffer = NDBuffer::from_vec(values.clone(), &[13, 10, 7]).unwrap();
    for location in [ShardingIndexLocation::End, ShardingIndexLocation::Start] {
        for index_crc in [true, false] {
            for endian in [Endianness::Little, Endianness::Big] {
                for zstd in [true, false] {
                    let what = format!("{location:?} crc={index_crc} {endian:?} zstd={zstd}");
                    let ours = sharded(location, index_crc, endian, zstd);
                    ours.write_opt(
                        &all,
                        &buffer,
                        &WriteOptions::default().with_mode(PipelineMode::Staged),
                    )
                    .unwrap();
                    let back: Vec<i32> = ours
                        .retrieve_array_subset(&ArraySubset::new_with_ranges(&all))
                        .unwrap();
                    assert_eq!(back, values, "{what}: zarrs reads zarrbuf's shards");
                    let read = ours.read_all(&BufferPrototype::cpu()).unwrap();
                    assert_eq!(read.to_vec::<i32>().unwrap(), values, "{what}: zarrbuf");

                    // The shard of only fill values is not stored; the others are.
                    assert_eq!(ours.retrieve_encoded_chunk(&[0, 1, 0]).unwrap(), None);
                    assert!(ours.retrieve_encoded_chunk(&[0, 0, 0]).unwrap().is_some());

                    // zarrs' own shards hold the same inner chunks (byte for byte once
                    // decoded: compare each shard's decoded contents).
                    let theirs = sharded(location, index_crc, endian, zstd);
                    theirs
                        .store_array_subset(&ArraySubset::new_with_ranges(&all), values.clone())
                        .unwrap();
                    for z in 0..2 {
                        for y in 0..3 {
                            for x in 0..2 {
                                let at = [z, y, x];
                                let a: Vec<i32> = ours.retrieve_chunk(&at).unwrap();
                                let b: Vec<i32> = theirs.retrieve_chunk(&at).unwrap();
                                assert_eq!(a, b, "{what}: shard {at:?}");
                            }
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn partly_written_shards_merge_with_what_is_stored() {
    let array = sharded(ShardingIndexLocation::End, true, Endianness::Little, true);
    let values = data();
    let all = [0..SHAPE[0], 0..SHAPE[1], 0..SHAPE[2]];
    let staged = WriteOptions::default().with_mode(PipelineMode::Staged);
    array
        .write_opt(
            &all,
            &NDBuffer::from_vec(values.clone(), &[13, 10, 7]).unwrap(),
            &staged,
        )
        .unwrap();
    // A write covering one whole shard and part of its neighbours.
    let patch = [0..8u64, 2..9, 0..6];
    let n = 8 * 7 * 6;
    let ones = NDBuffer::from_vec(vec![1i32; n], &[8, 7, 6]).unwrap();
    array.write_opt(&patch, &ones, &staged).unwrap();
    let mut want = values;
    for z in 0..8 {
        for y in 2..9 {
            for x in 0..6 {
                want[(z * 10 + y) * 7 + x] = 1;
            }
        }
    }
    let back: Vec<i32> = array
        .retrieve_array_subset(&ArraySubset::new_with_ranges(&all))
        .unwrap();
    assert_eq!(back, want);
}

/// Host data is not gathered before its shards are encoded: the encoder cuts the inner
/// chunks straight out of the caller's array, whatever its layout. Each source layout gives
/// the same shards, byte for byte, as a C-order native source (and zarrs reads them back).
#[test]
fn shards_are_cut_from_sources_of_every_layout() {
    let all = [0..SHAPE[0], 0..SHAPE[1], 0..SHAPE[2]];
    let values = data();
    let c_order = NDBuffer::from_vec(values.clone(), &[13, 10, 7]).unwrap();
    let cpu = BufferPrototype::cpu();
    // The array inside a larger one, one element in from every side.
    let mut larger = vec![0i32; 15 * 12 * 9];
    for (i, v) in values.iter().enumerate() {
        let (z, y, x) = (i / 70, (i / 7) % 10, i % 7);
        larger[((z + 1) * 12 + y + 1) * 9 + x + 1] = *v;
    }
    let larger = NDBuffer::from_vec(larger, &[15, 12, 9]).unwrap();
    // The array's axes reversed in memory, viewed back in order.
    let reversed = c_order
        .transpose(&[2, 1, 0])
        .unwrap()
        .copy_to(&cpu, Order::C)
        .unwrap();
    let sources = [
        ("Fortran order", c_order.copy_to(&cpu, Order::F).unwrap()),
        (
            "big-endian",
            c_order
                .to_byte_order(zarrbuf::dtype::ByteOrder::Big)
                .unwrap(),
        ),
        (
            "a view into a larger array",
            larger.get(&[1..14, 1..11, 1..8]).unwrap(),
        ),
        ("a transposed view", reversed.transpose(&[2, 1, 0]).unwrap()),
    ];
    let staged = WriteOptions::default().with_mode(PipelineMode::Staged);
    for zstd in [true, false] {
        for endian in [Endianness::Little, Endianness::Big] {
            let reference = sharded(ShardingIndexLocation::End, true, endian, zstd);
            reference.write_opt(&all, &c_order, &staged).unwrap();
            for (layout, source) in &sources {
                let what = format!("{layout}, {endian:?}, zstd={zstd}");
                let array = sharded(ShardingIndexLocation::End, true, endian, zstd);
                array.write_opt(&all, source, &staged).unwrap();
                let back: Vec<i32> = array
                    .retrieve_array_subset(&ArraySubset::new_with_ranges(&all))
                    .unwrap();
                assert_eq!(back, values, "{what}: zarrs reads the shards back");
                for z in 0..2 {
                    for y in 0..3 {
                        for x in 0..2 {
                            let at = [z, y, x];
                            assert_eq!(
                                array.retrieve_encoded_chunk(&at).unwrap(),
                                reference.retrieve_encoded_chunk(&at).unwrap(),
                                "{what}: shard {at:?}"
                            );
                        }
                    }
                }
            }
        }
    }
}
