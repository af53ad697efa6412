//! `numcodecs.blosc`: numcodecs' `Blosc` in a zarr v3 chain (zarr-python's
//! `zarr.codecs.numcodecs.Blosc`). Blosc frames describe themselves, so zarrs' own blosc codec
//! decodes them; for encoding, the configuration is numcodecs' (`{"cname": "lz4", "clevel":
//! 5, "shuffle": 1, "blocksize": 0}`, each optional with those defaults) and, as in
//! zarr-python, the compressor sees bytes, so its type size is 1.

use super::{Config, bad_config, field, int_field};
use serde_json::Value as Json;
use std::sync::Arc;
use zarrs::array::codec::{BloscCodec, BloscCompressionLevel, BloscCompressor, BloscShuffleMode};
use zarrs_codec::{Codec, CodecPluginV3, CodecTraitsV3};
use zarrs_metadata::v3::MetadataV3;
use zarrs_plugin::PluginCreateError;

/// The plugin that reads `numcodecs.blosc` metadata into zarrs' blosc codec.
pub(crate) struct NumcodecsBlosc;

zarrs_plugin::impl_extension_aliases!(NumcodecsBlosc, v3: "numcodecs.blosc");
inventory::submit! { CodecPluginV3::new::<NumcodecsBlosc>() }

const NAME: &str = "numcodecs.blosc";

impl CodecTraitsV3 for NumcodecsBlosc {
    fn create(metadata: &MetadataV3) -> Result<Codec, PluginCreateError> {
        let config: Config = metadata
            .configuration()
            .map(|c| c.clone().into())
            .unwrap_or_default();
        let cname = field(&config, "cname")
            .cloned()
            .unwrap_or(Json::from("lz4"));
        let cname: BloscCompressor = serde_json::from_value(cname.clone()).map_err(|_| {
            bad_config(
                NAME,
                format!("cname {cname} is not one of blosclz, lz4, lz4hc, snappy, zlib, zstd"),
            )
        })?;
        let clevel = int_field(NAME, &config, "clevel", 5)?;
        let clevel = u8::try_from(clevel)
            .ok()
            .and_then(|l| BloscCompressionLevel::try_from(l).ok())
            .ok_or_else(|| bad_config(NAME, format!("clevel {clevel} is not in 0..=9")))?;
        // numcodecs: -1 AUTOSHUFFLE (bit shuffle for 1-byte items, which bytes are), 0 none,
        // 1 byte shuffle, 2 bit shuffle.
        let shuffle = match int_field(NAME, &config, "shuffle", 1)? {
            0 => BloscShuffleMode::NoShuffle,
            1 => BloscShuffleMode::Shuffle,
            2 | -1 => BloscShuffleMode::BitShuffle,
            other => {
                return Err(bad_config(
                    NAME,
                    format!("shuffle {other} is not one of -1, 0, 1, 2"),
                ));
            }
        };
        let blocksize = int_field(NAME, &config, "blocksize", 0)?;
        let blocksize = usize::try_from(blocksize)
            .map_err(|_| bad_config(NAME, format!("blocksize {blocksize} is negative")))?;
        let codec = BloscCodec::new(cname, clevel, Some(blocksize), shuffle, Some(1))?;
        Ok(Codec::BytesToBytes(Arc::new(codec)))
    }
}
