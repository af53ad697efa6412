//! What the workers of a staged write do with each chunk they gathered ([`ChunkWriter`]):
//! encode it by the route it took, then erase it, merge it into the stored chunk, or hand its
//! encoding to the store threads — the one `store_encoded` call of the staged write.

use crate::buffer::NDBuffer;
use crate::data_types::ByteOrder;
use crate::errors::Result;
use crate::options::WriteOptions;
use crate::pipeline::{ChunkSink, DeviceChunk, Gathered, StoreQueue};
use crate::zarr::{ChainPlan, ShardEncoder, ShardSource, Unit, WriteCodec, chunk_error};
use std::ops::Range;
use zarrs::array::{Array, ArraySubset, CodecOptions};

/// The complete encoding of one chunk under the array's codec chain, by the route that made
/// it. Only the encoders of [`ChunkWriter`] make one; [`ChunkWriter::store`] relies on that.
enum Encoded {
    /// Compressed on the device and framed ([`ChunkWriter::device_compressed`]).
    DeviceCompressed(Vec<u8>),
    /// A whole shard assembled by the shard encoder, from the caller's array in place
    /// ([`ChunkWriter::shard_in_place`]) or from the shard gathered into a slot
    /// ([`ChunkWriter::region_or_gathered_shard`]).
    Shard(Vec<u8>),
    /// A whole chunk gathered in the chain's encoded layout and passed through the chain's
    /// bytes-to-bytes encoders ([`ChunkWriter::full_chunk`]).
    Chunk(Vec<u8>),
}

/// What becomes of one chunk.
enum Outcome {
    /// It holds only the fill value (and empty chunks are not stored): erased.
    Empty,
    /// Its encoding, for the store threads.
    Encoded(Encoded),
    /// Merged into the stored chunk by zarrs already (a chunk the write covers in part).
    Merged,
}

/// The staged write's consumer (see [`super::staged_write::Consumer`]): called on the worker
/// threads with each unit, how it was gathered, its staged bytes and, for chunks compressed
/// on the device, what the device produced.
pub(crate) struct ChunkWriter<'a, S: ?Sized> {
    pub array: &'a Array<S>,
    pub sink: &'a dyn ChunkSink,
    /// The caller's data.
    pub data: &'a NDBuffer,
    pub opts: &'a WriteOptions,
    /// The chain's plan, `None` when zarrs (or the shard encoder) encodes every chunk.
    pub chain: Option<&'a ChainPlan>,
    /// The device compressor's codec, when this write compresses on the device.
    pub codec: Option<WriteCodec>,
    /// The shard encoder, for sharded arrays whose shards it assembles.
    pub shards: Option<ShardEncoder>,
    /// Array coordinates of the data's element 0.
    pub request_start: &'a [u64],
    /// The codec options of each chunk's encoding (single-threaded: chunks are encoded in
    /// parallel).
    pub codec_opts: CodecOptions,
    /// One element of fill value in the chain's encoded byte order.
    pub fill_encoded: Vec<u8>,
    /// Where encoded chunks go to be stored: this write's own queue, or one a copy shares
    /// between the writes of its blocks.
    pub stores: &'a StoreQueue,
}

impl<S: ?Sized> ChunkWriter<'_, S> {
    /// Encodes, erases or merges one chunk (the staged write's consumer).
    pub(crate) fn consume(
        &self,
        unit: &Unit,
        gathered: &Gathered,
        bytes: &[u8],
        device: Option<DeviceChunk<'_>>,
    ) -> Result<()> {
        let outcome = match (gathered, self.chain) {
            (Gathered::Compressed { len }, _) => self.device_compressed(unit, *len, device)?,
            (Gathered::InPlace, _) => self.shard_in_place(unit)?,
            (Gathered::FullChunk, Some(chain)) => self.full_chunk(unit, chain, bytes)?,
            _ => self.region_or_gathered_shard(unit, bytes)?,
        };
        self.store(unit, outcome)
    }

    /// Hands the chunk's outcome on: erased or stored by the store threads.
    fn store(&self, unit: &Unit, outcome: Outcome) -> Result<()> {
        let encoded = match outcome {
            Outcome::Empty => return self.stores.erase(&unit.indices),
            Outcome::Merged => return Ok(()),
            Outcome::Encoded(
                Encoded::DeviceCompressed(e) | Encoded::Shard(e) | Encoded::Chunk(e),
            ) => e,
        };
        // SAFETY: each kind of `Encoded` (made only by this type's encoders, for this unit) is
        // a valid encoding of this chunk under the array's chain:
        // - `Chunk`: the chunk's contents in the chain's encoded layout (the array-to-array
        //   and array-to-bytes steps done by the gather kernel, checked against zarrs by the
        //   round-trip tests) passed through the chain's own bytes-to-bytes encoders;
        // - `DeviceCompressed`: the chunk's contents gathered as for `Chunk`, compressed by
        //   the device in the chain's only compressor's format and framed as that codec frames
        //   it, with the chain's crc32c appended when it has one (WriteCodec::of accepts only
        //   such chains; round trips in tests/it/device_compress.rs and the GPU check);
        // - `Shard`: a shard in the sharding codec's format: each inner chunk cut from the
        //   shard's native C-order bytes (or, in place, from the caller's array, its strides
        //   and byte order read in place, exactly as from the gathered shard), byte-swapped to
        //   the inner `bytes` codec's endianness (the inner chain has no transposes:
        //   ShardEncoder::new refuses them) and passed through the inner chain's own
        //   bytes-to-bytes encoders; missing inner chunks marked u64::MAX twice; the index
        //   encoded by the array's index codecs and placed where its configuration says
        //   (round trips through zarrs and zarr-python in tests/it/write.rs,
        //   tests/it/shard_encode.rs and the shard_encoder tests).
        unsafe {
            self.stores
                .store_encoded(&unit.indices, bytes::Bytes::from(encoded))
        }
    }

    /// Whether `bytes` (whole elements in the chain's encoded byte order) are only the fill
    /// value, and empty chunks are not stored.
    fn is_empty(&self, bytes: &[u8]) -> bool {
        !self.opts.store_empty_chunks
            && bytes
                .chunks_exact(self.fill_encoded.len())
                .all(|e| e == self.fill_encoded)
    }

    /// The extent of the shard's stored part when the write covers all of it and the shard
    /// encoder takes it: the shard's first `extent[d]` elements along each dimension.
    pub(crate) fn whole_shard(&self, unit: &Unit) -> Option<Vec<u64>> {
        let encoder = self.shards.as_ref()?;
        let shape: Vec<u64> = unit.shape.iter().map(|n| n.get()).collect();
        let covered = unit
            .region
            .iter()
            .zip(unit.origin.iter().zip(&shape))
            .zip(self.array.shape())
            .all(|((r, (&o, &s)), &n)| r.start == o && r.end == o + s.min(n - o));
        (covered && encoder.fits(&shape))
            .then(|| unit.region.iter().map(|r| r.end - r.start).collect())
    }

    /// A chunk the device compressed: framed as the chain's codec frames it.
    fn device_compressed(
        &self,
        unit: &Unit,
        len: usize,
        device: Option<DeviceChunk<'_>>,
    ) -> Result<Outcome> {
        let array = self.array;
        let (Some(codec), Some(device)) = (&self.codec, device) else {
            return Err(chunk_error(
                array,
                &unit.indices,
                "a device-compressed chunk without its codec or bytes (internal error: please report)",
            ));
        };
        let compressed = device.compressed;
        let encoded = codec
            .frame(compressed, len, device.adler32)
            .map_err(|why| chunk_error(array, &unit.indices, why))?;
        // A chunk of only the fill value is erased. The uncompressed chunk stays on the
        // device: those that compressed well enough to be one repeated value are decoded
        // here to check.
        if !self.opts.store_empty_chunks && WriteCodec::may_be_uniform(compressed.len(), len) {
            let mut decoded = vec![0u8; len];
            codec.decode_into(&encoded, &mut decoded).map_err(|why| {
                chunk_error(
                    array,
                    &unit.indices,
                    format!("the device-compressed chunk does not decode: {why}"),
                )
            })?;
            if self.is_empty(&decoded) {
                return Ok(Outcome::Empty);
            }
        }
        Ok(Outcome::Encoded(Encoded::DeviceCompressed(encoded)))
    }

    /// A whole shard on the host route: its inner chunks cut straight from the caller's array.
    fn shard_in_place(&self, unit: &Unit) -> Result<Outcome> {
        let (Some(encoder), Some(extent)) = (&self.shards, self.whole_shard(unit)) else {
            return Err(chunk_error(
                self.array,
                &unit.indices,
                "a shard to encode in place that the shard encoder does not take \
                 (internal error: please report)",
            ));
        };
        let data = self.data;
        let source = data.buffer().as_host_bytes()?;
        let offset = unit.offset_in_request(self.request_start, data.offset(), data.strides());
        let source = ShardSource {
            bytes: &source,
            offset,
            strides: data.strides(),
            swapped: data.byte_order() != ByteOrder::native(),
        };
        let encoded = encoder
            .encode_from(
                &source,
                &extent,
                self.opts.store_empty_chunks,
                &self.codec_opts,
            )
            .map_err(|why| chunk_error(self.array, &unit.indices, why))?;
        Ok(match encoded {
            None => Outcome::Empty,
            Some(encoded) => Outcome::Encoded(Encoded::Shard(encoded)),
        })
    }

    /// A whole chunk gathered in the chain's encoded layout: through the chain's
    /// bytes-to-bytes encoders.
    fn full_chunk(&self, unit: &Unit, chain: &ChainPlan, bytes: &[u8]) -> Result<Outcome> {
        if self.is_empty(bytes) {
            return Ok(Outcome::Empty);
        }
        let encoded = chain
            .encode_bytes(bytes, &self.codec_opts)
            .map_err(|e| chunk_error(self.array, &unit.indices, e))?;
        Ok(Outcome::Encoded(Encoded::Chunk(encoded)))
    }

    /// The requested region of a chunk (native, C order): a whole shard gathered into its
    /// slot (device data) is encoded by the shard encoder; anything else is merged into the
    /// stored chunk by zarrs.
    fn region_or_gathered_shard(&self, unit: &Unit, bytes: &[u8]) -> Result<Outcome> {
        if let (Some(encoder), Some(extent)) = (&self.shards, self.whole_shard(unit)) {
            let encoded = encoder
                .encode(
                    bytes,
                    &extent,
                    self.opts.store_empty_chunks,
                    &self.codec_opts,
                )
                .map_err(|why| chunk_error(self.array, &unit.indices, why))?;
            return Ok(match encoded {
                None => Outcome::Empty,
                Some(encoded) => Outcome::Encoded(Encoded::Shard(encoded)),
            });
        }
        let local: Vec<Range<u64>> = unit
            .region
            .iter()
            .zip(&unit.origin)
            .map(|(r, o)| r.start - o..r.end - o)
            .collect();
        self.sink.store_subset(
            &unit.indices,
            &ArraySubset::new_with_ranges(&local),
            bytes,
            &self.codec_opts,
        )?;
        Ok(Outcome::Merged)
    }
}
