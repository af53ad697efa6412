//! The framing numcodecs' 32-bit checksum codecs share (`Checksum32` in `checksum32.py`): the
//! payload with a 4-byte little-endian checksum before it (`location: "start"`) or after it
//! (`"end"`), and the bytes-to-bytes codec built on it for one checksum function.

use super::{Config, bad_config, field};
use serde_json::Value as Json;
use std::borrow::Cow;
use zarrs::array::{ArrayBytesRaw, BytesRepresentation};
use zarrs_codec::CodecError;
use zarrs_plugin::PluginCreateError;

/// Where the checksum sits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Location {
    Start,
    End,
}

impl Location {
    /// The `location` field of `config` (absent: `default`, the codec class's own default).
    pub(crate) fn from_config(
        codec: &str,
        config: &Config,
        default: Location,
    ) -> Result<Location, PluginCreateError> {
        match field(config, "location") {
            None => Ok(default),
            Some(Json::String(s)) if s == "start" => Ok(Location::Start),
            Some(Json::String(s)) if s == "end" => Ok(Location::End),
            Some(v) => Err(bad_config(
                codec,
                format!("location must be \"start\" or \"end\", found {v}"),
            )),
        }
    }
}

/// `payload` framed with its checksum.
pub(crate) fn frame(payload: &[u8], checksum: u32, location: Location) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + 4);
    if location == Location::Start {
        out.extend_from_slice(&checksum.to_le_bytes());
    }
    out.extend_from_slice(payload);
    if location == Location::End {
        out.extend_from_slice(&checksum.to_le_bytes());
    }
    out
}

/// Checks `framed` against `checksum` (computed over the payload) and returns the payload;
/// a mismatch or a frame too short for a checksum is an error naming `codec`.
pub(crate) fn unframe<'a>(
    codec: &str,
    framed: ArrayBytesRaw<'a>,
    location: Location,
    checksum: impl Fn(&[u8]) -> u32,
) -> Result<ArrayBytesRaw<'a>, CodecError> {
    let n = framed.len();
    if n < 4 {
        return Err(CodecError::Other(format!(
            "{codec}: {n} bytes cannot hold the 4-byte checksum"
        )));
    }
    let (payload, stored) = match location {
        Location::Start => (4..n, &framed[..4]),
        Location::End => (0..n - 4, &framed[n - 4..]),
    };
    let stored = u32::from_le_bytes([stored[0], stored[1], stored[2], stored[3]]);
    let computed = checksum(&framed[payload.clone()]);
    if stored != computed {
        return Err(CodecError::Other(format!(
            "{codec}: checksum mismatch (stored {stored:#010x}, computed {computed:#010x}): the chunk is damaged"
        )));
    }
    Ok(match framed {
        Cow::Borrowed(b) => Cow::Borrowed(&b[payload]),
        Cow::Owned(v) => Cow::Owned(v[payload].to_vec()),
    })
}

/// The encoded size: four bytes more than the decoded size.
pub(crate) fn encoded_representation(decoded: &BytesRepresentation) -> BytesRepresentation {
    match decoded {
        BytesRepresentation::FixedSize(n) => BytesRepresentation::FixedSize(n + 4),
        BytesRepresentation::BoundedSize(n) => BytesRepresentation::BoundedSize(n + 4),
        BytesRepresentation::UnboundedSize => BytesRepresentation::UnboundedSize,
    }
}

/// Implements zarrs' `BytesToBytesCodecTraits` for a checksum codec struct with a
/// `location: Location` field and a `fn checksum(&self, &[u8]) -> u32` method.
macro_rules! checksum_codec {
    ($t:ident, $name:expr) => {
        impl zarrs_codec::BytesToBytesCodecTraits for $t {
            fn into_dyn(
                self: std::sync::Arc<Self>,
            ) -> std::sync::Arc<dyn zarrs_codec::BytesToBytesCodecTraits> {
                self
            }

            fn recommended_concurrency(
                &self,
                _decoded_representation: &zarrs::array::BytesRepresentation,
            ) -> Result<zarrs_codec::RecommendedConcurrency, zarrs_codec::CodecError> {
                Ok(zarrs_codec::RecommendedConcurrency::new_maximum(1))
            }

            fn encoded_representation(
                &self,
                decoded_representation: &zarrs::array::BytesRepresentation,
            ) -> zarrs::array::BytesRepresentation {
                $crate::zarr::plugins::codecs::checksum32::encoded_representation(
                    decoded_representation,
                )
            }

            fn encode<'a>(
                &self,
                decoded_value: zarrs::array::ArrayBytesRaw<'a>,
                _options: &zarrs_codec::CodecOptions,
            ) -> Result<zarrs::array::ArrayBytesRaw<'a>, zarrs_codec::CodecError> {
                let sum = self.checksum(&decoded_value);
                Ok(std::borrow::Cow::Owned(
                    $crate::zarr::plugins::codecs::checksum32::frame(
                        &decoded_value,
                        sum,
                        self.location,
                    ),
                ))
            }

            fn decode<'a>(
                &self,
                encoded_value: zarrs::array::ArrayBytesRaw<'a>,
                _decoded_representation: &zarrs::array::BytesRepresentation,
                _options: &zarrs_codec::CodecOptions,
            ) -> Result<zarrs::array::ArrayBytesRaw<'a>, zarrs_codec::CodecError> {
                $crate::zarr::plugins::codecs::checksum32::unframe(
                    $name,
                    encoded_value,
                    self.location,
                    |p| self.checksum(p),
                )
            }
        }
    };
}
pub(crate) use checksum_codec;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_damage_is_reported() {
        let sum = |p: &[u8]| p.iter().map(|&b| u32::from(b)).sum::<u32>();
        for loc in [Location::Start, Location::End] {
            let framed = frame(b"abc", sum(b"abc"), loc);
            assert_eq!(framed.len(), 7);
            let back = unframe("t", Cow::Borrowed(&framed), loc, sum).unwrap();
            assert_eq!(&back[..], b"abc");
            let mut bad = framed.clone();
            bad[if loc == Location::Start { 5 } else { 1 }] ^= 1;
            let err = unframe("t", Cow::Owned(bad), loc, sum).unwrap_err();
            assert!(err.to_string().contains("checksum mismatch"), "{err}");
        }
        assert!(unframe("t", Cow::Borrowed(&[1u8, 2][..]), Location::End, sum).is_err());
    }
}
