//! numcodecs' `CRC32` checksum: v2 id `crc32`, v3 name `numcodecs.crc32`.
//!
//! zlib's CRC-32 of the payload, 4 bytes little-endian, at the start by default
//! (`{"location": "start" | "end"}`).

use super::checksum32::{Location, checksum_codec};
use super::{Config, codec_traits, register_codec};
use zarrs_plugin::{PluginCreateError, ZarrVersion};

/// The numcodecs CRC32 codec.
#[derive(Clone, Debug)]
pub(crate) struct Crc32Codec {
    config: Config,
    location: Location,
}

zarrs_plugin::impl_extension_aliases!(Crc32Codec, v3: "numcodecs.crc32", [], v2: "crc32", []);
register_codec!(Crc32Codec, BytesToBytes, v2 + v3);
codec_traits!(Crc32Codec);
checksum_codec!(Crc32Codec, "numcodecs.crc32");

impl Crc32Codec {
    fn new(config: Config, _version: ZarrVersion) -> Result<Self, PluginCreateError> {
        let location = Location::from_config("crc32", &config, Location::Start)?;
        Ok(Crc32Codec { config, location })
    }

    fn checksum(&self, payload: &[u8]) -> u32 {
        crc32fast::hash(payload)
    }
}
