//! `numcodecs.zstd`: numcodecs' `Zstd` in a zarr v3 chain (zarr-python's
//! `zarr.codecs.numcodecs.Zstd`). The frames are plain zstd, so zarrs' own zstd codec runs
//! them; only the configuration differs from v3 `zstd`: `{"level": 0, "checksum": false}`,
//! both optional (numcodecs' defaults), which the codec writes back as it found them.

use super::{Config, bad_config, field, int_field};
use std::sync::Arc;
use zarrs::array::codec::ZstdCodec;
use zarrs_codec::{Codec, CodecPluginV3, CodecTraitsV3};
use zarrs_metadata::v3::MetadataV3;
use zarrs_plugin::PluginCreateError;

/// The plugin that reads `numcodecs.zstd` metadata into zarrs' zstd codec.
pub(crate) struct NumcodecsZstd;

zarrs_plugin::impl_extension_aliases!(NumcodecsZstd, v3: "numcodecs.zstd");
inventory::submit! { CodecPluginV3::new::<NumcodecsZstd>() }

impl CodecTraitsV3 for NumcodecsZstd {
    fn create(metadata: &MetadataV3) -> Result<Codec, PluginCreateError> {
        let config: Config = metadata
            .configuration()
            .map(|c| c.clone().into())
            .unwrap_or_default();
        let level = int_field("numcodecs.zstd", &config, "level", 0)?;
        let level = i32::try_from(level)
            .map_err(|_| bad_config("numcodecs.zstd", format!("level {level} is out of range")))?;
        let checksum = match field(&config, "checksum") {
            None => false,
            Some(v) => v.as_bool().ok_or_else(|| {
                bad_config(
                    "numcodecs.zstd",
                    format!("checksum must be true or false, found {v}"),
                )
            })?,
        };
        Ok(Codec::BytesToBytes(Arc::new(ZstdCodec::new(
            level, checksum,
        ))))
    }
}
