//! numcodecs' `LZ4` compressor: v2 id `lz4`, v3 name `numcodecs.lz4`.
//!
//! Format (numcodecs `lz4.pyx`): the decoded length as a 4-byte little-endian integer, then
//! one LZ4 block (not the LZ4 frame format). Configuration: `{"acceleration": 1}`; it only
//! changes how hard the encoder looks for matches.

use super::{Config, codec_traits, int_field, register_codec};
use crate::zarr::decode::bounded::Bound;
use std::borrow::Cow;
use std::sync::Arc;
use zarrs::array::{ArrayBytesRaw, BytesRepresentation};
use zarrs_codec::{BytesToBytesCodecTraits, CodecError, CodecOptions, RecommendedConcurrency};
use zarrs_plugin::{PluginCreateError, ZarrVersion};

/// The numcodecs LZ4 codec.
#[derive(Clone, Debug)]
pub(crate) struct Lz4Codec {
    config: Config,
}

zarrs_plugin::impl_extension_aliases!(Lz4Codec, v3: "numcodecs.lz4", [], v2: "lz4", []);
register_codec!(Lz4Codec, BytesToBytes, v2 + v3);
codec_traits!(Lz4Codec);

impl Lz4Codec {
    fn new(config: Config, _version: ZarrVersion) -> Result<Self, PluginCreateError> {
        // Only the encoder's effort; checked so a bad value is reported, not ignored.
        int_field("lz4", &config, "acceleration", 1)?;
        Ok(Lz4Codec { config })
    }
}

impl BytesToBytesCodecTraits for Lz4Codec {
    fn into_dyn(self: Arc<Self>) -> Arc<dyn BytesToBytesCodecTraits> {
        self
    }

    fn recommended_concurrency(
        &self,
        _decoded_representation: &BytesRepresentation,
    ) -> Result<RecommendedConcurrency, CodecError> {
        Ok(RecommendedConcurrency::new_maximum(1))
    }

    fn encoded_representation(
        &self,
        decoded_representation: &BytesRepresentation,
    ) -> BytesRepresentation {
        decoded_representation
            .size()
            .map_or(BytesRepresentation::UnboundedSize, |n| {
                let bound = lz4_flex::block::get_maximum_output_size(n as usize) as u64;
                BytesRepresentation::BoundedSize(4 + bound)
            })
    }

    fn encode<'a>(
        &self,
        decoded_value: ArrayBytesRaw<'a>,
        _options: &CodecOptions,
    ) -> Result<ArrayBytesRaw<'a>, CodecError> {
        let len = u32::try_from(decoded_value.len()).map_err(|_| {
            CodecError::Other(format!(
                "numcodecs.lz4 stores the decoded length in 32 bits; {} bytes is too large",
                decoded_value.len()
            ))
        })?;
        let mut out = len.to_le_bytes().to_vec();
        out.extend_from_slice(&lz4_flex::block::compress(&decoded_value));
        Ok(Cow::Owned(out))
    }

    fn decode<'a>(
        &self,
        encoded_value: ArrayBytesRaw<'a>,
        decoded_representation: &BytesRepresentation,
        _options: &CodecOptions,
    ) -> Result<ArrayBytesRaw<'a>, CodecError> {
        let Some((header, block)) = encoded_value.split_first_chunk::<4>() else {
            return Err(CodecError::Other(format!(
                "numcodecs.lz4: {} bytes is too short for the 4-byte length header",
                encoded_value.len()
            )));
        };
        let len = u32::from_le_bytes(*header) as usize;
        Bound::of(decoded_representation)
            .and_then(|bound| bound.check_declared("the header", len as u64))
            .map_err(|e| CodecError::Other(format!("numcodecs.lz4: {e}")))?;
        let out = lz4_flex::block::decompress(block, len)
            .map_err(|e| CodecError::Other(format!("numcodecs.lz4: corrupt LZ4 block: {e}")))?;
        if out.len() != len {
            return Err(CodecError::Other(format!(
                "numcodecs.lz4: the block decodes to {} bytes, the header says {len}",
                out.len()
            )));
        }
        Ok(Cow::Owned(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_numcodecs_writes_and_round_trips() {
        // numcodecs.LZ4().encode(b"hello hello hello hello")
        let numcodecs = [
            0x17, 0, 0, 0, 0x68, 0x68, 0x65, 0x6c, 0x6c, 0x6f, 0x20, 0x06, 0x00, 0x50, 0x68, 0x65,
            0x6c, 0x6c, 0x6f,
        ];
        let codec = Lz4Codec::new(Config::new(), ZarrVersion::V2).unwrap();
        let rep = BytesRepresentation::FixedSize(23);
        let opts = CodecOptions::default();
        let dec = codec
            .decode(Cow::Borrowed(&numcodecs), &rep, &opts)
            .unwrap();
        assert_eq!(&dec[..], b"hello hello hello hello");
        let enc = codec.encode(dec.clone(), &opts).unwrap();
        assert_eq!(&codec.decode(enc, &rep, &opts).unwrap()[..], &dec[..]);
        let bad = codec.decode(Cow::Borrowed(&numcodecs[..9]), &rep, &opts);
        assert!(bad.unwrap_err().to_string().contains("corrupt LZ4 block"));
    }
}
