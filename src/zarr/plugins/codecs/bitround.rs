//! numcodecs' `BitRound` filter under its zarr v2 id `bitround`. zarrs implements the codec
//! (v3 names `bitround` and `numcodecs.bitround`) but registers no v2 id; this plugin reads
//! `{"id": "bitround", "keepbits": N}` into zarrs' codec, with the whole-chunk partial decoder
//! (see [`super::lossy_overrides`]). Lossy: reading returns exactly what zarr-python returns.

use super::{Config, bad_config, int_field};
use std::sync::Arc;
use zarrs::array::codec::BitroundCodec;
use zarrs_codec::{Codec, CodecPluginV2, CodecTraitsV2};
use zarrs_metadata::v2::MetadataV2;
use zarrs_plugin::PluginCreateError;

/// The plugin that reads v2 `bitround` metadata into zarrs' bitround codec.
pub(crate) struct BitroundV2;

zarrs_plugin::impl_extension_aliases!(BitroundV2, v2: "bitround");
inventory::submit! { CodecPluginV2::new::<BitroundV2>() }

impl CodecTraitsV2 for BitroundV2 {
    fn create(metadata: &MetadataV2) -> Result<Codec, PluginCreateError> {
        let config: Config = metadata.configuration().clone().into();
        let keepbits = int_field("bitround", &config, "keepbits", -1)?;
        let keepbits = u32::try_from(keepbits).map_err(|_| {
            bad_config(
                "bitround",
                "keepbits must be given as a non-negative integer",
            )
        })?;
        Ok(super::lossy_overrides::whole_chunk(Arc::new(
            BitroundCodec::new(keepbits),
        )))
    }
}
