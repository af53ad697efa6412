//! numcodecs' `PackBits` filter: v2 id `packbits`, v3 name `numcodecs.packbits` (zarr v3's
//! own `packbits` codec, a different format, is zarrs').
//!
//! A boolean chunk, flattened in memory order, becomes a 1-d `uint8` array: first the number
//! of padding bits in the last byte, then the bits packed most significant first (numpy
//! `packbits`).

use super::{Config, array_codec_traits, codec_traits, register_codec, wrong_type};
use std::num::NonZeroU64;
use std::sync::Arc;
use zarrs::array::{ArrayBytes, ChunkShape, DataType, FillValue, data_type};
use zarrs_codec::{ArrayToArrayCodecTraits, CodecError, CodecOptions};
use zarrs_plugin::{PluginCreateError, ZarrVersion};

/// The numcodecs PackBits codec.
#[derive(Clone, Debug)]
pub(crate) struct PackBitsCodec {
    config: Config,
}

zarrs_plugin::impl_extension_aliases!(PackBitsCodec, v3: "numcodecs.packbits", [], v2: "packbits", []);
register_codec!(PackBitsCodec, ArrayToArray, v2 + v3);
codec_traits!(PackBitsCodec);
array_codec_traits!(PackBitsCodec);

impl PackBitsCodec {
    fn new(config: Config, _version: ZarrVersion) -> Result<Self, PluginCreateError> {
        Ok(PackBitsCodec { config })
    }
}

fn check(data_type: &DataType) -> Result<(), CodecError> {
    if *data_type != data_type::bool() {
        return Err(wrong_type("numcodecs.packbits", "bool", data_type));
    }
    Ok(())
}

fn elements(shape: &[NonZeroU64]) -> u64 {
    shape.iter().map(|n| n.get()).product()
}

impl ArrayToArrayCodecTraits for PackBitsCodec {
    fn into_dyn(self: Arc<Self>) -> Arc<dyn ArrayToArrayCodecTraits> {
        self
    }

    // Not element-wise: a partial read needs the whole chunk.
    super::whole_chunk::whole_chunk_partial_decoders!();

    fn encoded_data_type(&self, decoded_data_type: &DataType) -> Result<DataType, CodecError> {
        check(decoded_data_type)?;
        Ok(data_type::uint8())
    }

    fn encoded_shape(&self, decoded_shape: &[NonZeroU64]) -> Result<ChunkShape, CodecError> {
        let n = 1 + elements(decoded_shape).div_ceil(8);
        Ok(vec![NonZeroU64::new(n).expect("at least 1")])
    }

    fn decoded_shape(
        &self,
        _encoded_shape: &[NonZeroU64],
    ) -> Result<Option<ChunkShape>, CodecError> {
        // The padding count gives the length, not the shape.
        Ok(None)
    }

    fn encoded_fill_value(
        &self,
        decoded_data_type: &DataType,
        decoded_fill_value: &FillValue,
    ) -> Result<FillValue, CodecError> {
        check(decoded_data_type)?;
        // Eight fill bits per byte (the leading padding count has no single fill value).
        let set = decoded_fill_value
            .as_ne_bytes()
            .first()
            .is_some_and(|&b| b != 0);
        Ok(FillValue::from(if set { 0xffu8 } else { 0u8 }))
    }

    fn encode<'a>(
        &self,
        bytes: ArrayBytes<'a>,
        _shape: &[NonZeroU64],
        data_type: &DataType,
        _fill_value: &FillValue,
        _options: &CodecOptions,
    ) -> Result<ArrayBytes<'a>, CodecError> {
        check(data_type)?;
        let bits = bytes.into_fixed()?;
        let mut out = vec![0u8; 1 + bits.len().div_ceil(8)];
        out[0] = ((8 - bits.len() % 8) % 8) as u8;
        for (i, &b) in bits.iter().enumerate() {
            if b != 0 {
                out[1 + i / 8] |= 0x80 >> (i % 8);
            }
        }
        Ok(ArrayBytes::from(out))
    }

    fn decode<'a>(
        &self,
        bytes: ArrayBytes<'a>,
        shape: &[NonZeroU64],
        data_type: &DataType,
        _fill_value: &FillValue,
        _options: &CodecOptions,
    ) -> Result<ArrayBytes<'a>, CodecError> {
        check(data_type)?;
        let packed = bytes.into_fixed()?;
        let n = elements(shape) as usize;
        let want_pad = ((8 - n % 8) % 8) as u8;
        if packed.len() != 1 + n.div_ceil(8) || packed[0] != want_pad {
            return Err(CodecError::Other(format!(
                "numcodecs.packbits: {} packed bytes with {} padding bits cannot hold {n} booleans",
                packed.len().saturating_sub(1),
                packed.first().copied().unwrap_or(0)
            )));
        }
        let out: Vec<u8> = (0..n)
            .map(|i| u8::from(packed[1 + i / 8] & (0x80 >> (i % 8)) != 0))
            .collect();
        Ok(ArrayBytes::from(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_numcodecs_example() {
        let c = PackBitsCodec::new(Config::new(), ZarrVersion::V2).unwrap();
        let shape = [NonZeroU64::new(4).unwrap()];
        let (dt, fill, opts) = (
            data_type::bool(),
            FillValue::from(false),
            CodecOptions::default(),
        );
        let enc = c
            .encode(
                ArrayBytes::from(vec![1u8, 0, 0, 1]),
                &shape,
                &dt,
                &fill,
                &opts,
            )
            .unwrap();
        // numcodecs.PackBits().encode([True, False, False, True]) == [4, 144]
        assert_eq!(enc.clone().into_fixed().unwrap().into_owned(), vec![4, 144]);
        let dec = c.decode(enc, &shape, &dt, &fill, &opts).unwrap();
        assert_eq!(dec.into_fixed().unwrap().into_owned(), vec![1, 0, 0, 1]);
        let bad = c.decode(ArrayBytes::from(vec![3u8, 144]), &shape, &dt, &fill, &opts);
        assert!(bad.is_err());
    }
}
