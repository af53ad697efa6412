//! numcodecs' `Base64` codec: v2 id `base64`, v3 name `numcodecs.base64`.
//!
//! The standard base64 alphabet with `=` padding (Python's `base64.standard_b64encode`);
//! decoding skips ASCII whitespace, as Python's decoder does.

use super::{Config, codec_traits, register_codec};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use std::borrow::Cow;
use std::sync::Arc;
use zarrs::array::{ArrayBytesRaw, BytesRepresentation};
use zarrs_codec::{BytesToBytesCodecTraits, CodecError, CodecOptions, RecommendedConcurrency};
use zarrs_plugin::{PluginCreateError, ZarrVersion};

/// The numcodecs Base64 codec.
#[derive(Clone, Debug)]
pub(crate) struct Base64Codec {
    config: Config,
}

zarrs_plugin::impl_extension_aliases!(Base64Codec, v3: "numcodecs.base64", [], v2: "base64", []);
register_codec!(Base64Codec, BytesToBytes, v2 + v3);
codec_traits!(Base64Codec);

impl Base64Codec {
    fn new(config: Config, _version: ZarrVersion) -> Result<Self, PluginCreateError> {
        Ok(Base64Codec { config })
    }
}

impl BytesToBytesCodecTraits for Base64Codec {
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
        let enc = |n: u64| n.div_ceil(3) * 4;
        match decoded_representation {
            BytesRepresentation::FixedSize(n) => BytesRepresentation::FixedSize(enc(*n)),
            BytesRepresentation::BoundedSize(n) => BytesRepresentation::BoundedSize(enc(*n)),
            BytesRepresentation::UnboundedSize => BytesRepresentation::UnboundedSize,
        }
    }

    fn encode<'a>(
        &self,
        decoded_value: ArrayBytesRaw<'a>,
        _options: &CodecOptions,
    ) -> Result<ArrayBytesRaw<'a>, CodecError> {
        Ok(Cow::Owned(STANDARD.encode(&decoded_value).into_bytes()))
    }

    fn decode<'a>(
        &self,
        encoded_value: ArrayBytesRaw<'a>,
        _decoded_representation: &BytesRepresentation,
        _options: &CodecOptions,
    ) -> Result<ArrayBytesRaw<'a>, CodecError> {
        let text: Vec<u8> = encoded_value
            .iter()
            .copied()
            .filter(|b| !b.is_ascii_whitespace())
            .collect();
        let out = STANDARD
            .decode(&text)
            .map_err(|e| CodecError::Other(format!("numcodecs.base64: not base64: {e}")))?;
        Ok(Cow::Owned(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_like_python_and_rejects_garbage() {
        let c = Base64Codec::new(Config::new(), ZarrVersion::V2).unwrap();
        let opts = CodecOptions::default();
        let enc = c.encode(Cow::Borrowed(b"\x00\x01\x02\xff"), &opts).unwrap();
        assert_eq!(&enc[..], b"AAEC/w==");
        let rep = BytesRepresentation::FixedSize(4);
        assert_eq!(
            &c.decode(Cow::Borrowed(b"AAEC\n/w=="), &rep, &opts).unwrap()[..],
            b"\x00\x01\x02\xff"
        );
        assert!(c.decode(Cow::Borrowed(b"AA*C"), &rep, &opts).is_err());
    }
}
