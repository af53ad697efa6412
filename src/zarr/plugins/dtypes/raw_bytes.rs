//! `raw_bytes`: numpy's void type `V{n}` as zarr-python 3 names it in v3 (`{"name":
//! "raw_bytes", "configuration": {"length_bytes": n}}`, fill value base64). It is zarrs'
//! `r{8n}` raw-bits type under another name, so the plugin hands zarrs that type (v2 `|V{n}`
//! already is).

use serde::Deserialize;
use std::sync::Arc;
use zarrs::array::DataType;
use zarrs::array::data_type::RawBitsDataType;
use zarrs_data_type::{DataTypePluginV3, DataTypeTraitsV3};
use zarrs_metadata::v3::MetadataV3;
use zarrs_plugin::PluginCreateError;

/// The v3 name matcher for `raw_bytes`.
pub(crate) struct RawBytesV3;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LengthBytes {
    length_bytes: usize,
}

zarrs_plugin::impl_extension_aliases!(RawBytesV3, v3: "raw_bytes");
inventory::submit! { DataTypePluginV3::new::<RawBytesV3>() }

impl DataTypeTraitsV3 for RawBytesV3 {
    fn create(metadata: &MetadataV3) -> Result<DataType, PluginCreateError> {
        let c: LengthBytes = metadata.to_typed_configuration()?;
        if c.length_bytes == 0 {
            return Err(PluginCreateError::Other(
                "raw_bytes needs a length of at least 1 byte".into(),
            ));
        }
        Ok(Arc::new(RawBitsDataType::new(c.length_bytes)).into())
    }
}
