//! numcodecs' `CRC32C` checksum as zarr v2 filters/compressors and `numcodecs.crc32c` v3
//! chains spell it: v2 id `crc32c`, v3 name `numcodecs.crc32c`. (zarr v3's own `crc32c`
//! codec is zarrs'.)
//!
//! The Castagnoli CRC of the payload, 4 bytes little-endian, at the end by default
//! (`{"location": "start" | "end"}`; zarr-python writes no location).

use super::checksum32::{Location, checksum_codec};
use super::{Config, codec_traits, register_codec};
use zarrs_plugin::{PluginCreateError, ZarrVersion};

/// The numcodecs CRC32C codec.
#[derive(Clone, Debug)]
pub(crate) struct NumcodecsCrc32cCodec {
    config: Config,
    location: Location,
}

zarrs_plugin::impl_extension_aliases!(NumcodecsCrc32cCodec,
    v3: "numcodecs.crc32c", [],
    v2: "crc32c", []
);
register_codec!(NumcodecsCrc32cCodec, BytesToBytes, v2 + v3);
codec_traits!(NumcodecsCrc32cCodec);
checksum_codec!(NumcodecsCrc32cCodec, "numcodecs.crc32c");

impl NumcodecsCrc32cCodec {
    fn new(config: Config, _version: ZarrVersion) -> Result<Self, PluginCreateError> {
        let location = Location::from_config("crc32c", &config, Location::End)?;
        Ok(NumcodecsCrc32cCodec { config, location })
    }

    fn checksum(&self, payload: &[u8]) -> u32 {
        crc32c::crc32c(payload)
    }
}
