//! `numcodecs.gzip`: numcodecs' `GZip` in a zarr v3 chain (zarr-python's
//! `zarr.codecs.numcodecs.GZip`). The streams are plain gzip, so zarrs' own gzip codec runs
//! them; the configuration is `{"level": 1}` (optional, numcodecs' default).

use super::{Config, bad_config, int_field};
use std::sync::Arc;
use zarrs::array::codec::GzipCodec;
use zarrs_codec::{Codec, CodecPluginV3, CodecTraitsV3};
use zarrs_metadata::v3::MetadataV3;
use zarrs_plugin::PluginCreateError;

/// The plugin that reads `numcodecs.gzip` metadata into zarrs' gzip codec.
pub(crate) struct NumcodecsGzip;

zarrs_plugin::impl_extension_aliases!(NumcodecsGzip, v3: "numcodecs.gzip");
inventory::submit! { CodecPluginV3::new::<NumcodecsGzip>() }

impl CodecTraitsV3 for NumcodecsGzip {
    fn create(metadata: &MetadataV3) -> Result<Codec, PluginCreateError> {
        let config: Config = metadata
            .configuration()
            .map(|c| c.clone().into())
            .unwrap_or_default();
        let level = int_field("numcodecs.gzip", &config, "level", 1)?;
        let codec = u32::try_from(level)
            .ok()
            .and_then(|l| GzipCodec::new(l).ok())
            .ok_or_else(|| {
                bad_config("numcodecs.gzip", format!("level {level} is not in 0..=9"))
            })?;
        Ok(Codec::BytesToBytes(Arc::new(codec)))
    }
}
