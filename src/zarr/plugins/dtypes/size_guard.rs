//! A cap on the size of one element, checked when zarrs builds a data type from metadata —
//! before anything is allocated by it.
//!
//! zarrs and the plugins here build a data type's fill value as one element's bytes, so a
//! 150-byte `.zarray` with dtype `|S8589934592` took 8 GiB in `zarrbuf info` before anything
//! looked at it. Every data type zarrs builds from metadata goes through a run-time plugin
//! that builds it with the compile-time plugin zarrs would have used and refuses elements
//! over [`MAX_ELEMENT_BYTES`]. Names no compile-time plugin knows are left to zarrs (and its
//! own error).

use zarrs::array::DataType;
use zarrs_data_type::{
    DataTypePluginV2, DataTypePluginV3, DataTypeRuntimePluginV2, DataTypeRuntimePluginV3,
};
use zarrs_metadata::v2::DataTypeMetadataV2;
use zarrs_metadata::v3::MetadataV3;
use zarrs_plugin::PluginCreateError;

/// The largest element zarrbuf builds a data type for: far above any element zarr-python,
/// numpy or tensorstore write in practice (a 16 MiB string or record per element).
pub(crate) const MAX_ELEMENT_BYTES: usize = 16 << 20;

/// Why elements of `bytes` bytes of the data type `name` are refused, if they are larger
/// than [`MAX_ELEMENT_BYTES`].
pub(crate) fn element_too_large(name: &str, bytes: u64) -> Option<String> {
    (bytes > MAX_ELEMENT_BYTES as u64).then(|| {
        format!(
            "the data type {name} has elements of {bytes} bytes; zarrbuf reads elements of at \
             most {MAX_ELEMENT_BYTES} bytes (the metadata is damaged, or the array needs \
             another reader)"
        )
    })
}

/// `data_type` unless its elements are larger than [`MAX_ELEMENT_BYTES`].
fn capped(data_type: DataType, name: &str) -> Result<DataType, PluginCreateError> {
    match data_type
        .fixed_size()
        .and_then(|n| element_too_large(name, n as u64))
    {
        Some(why) => Err(PluginCreateError::Other(why)),
        None => Ok(data_type),
    }
}

/// The v2 name zarrs looks plugins up by (structured dtypes share one).
fn v2_name(metadata: &DataTypeMetadataV2) -> &str {
    match metadata {
        DataTypeMetadataV2::Simple(s) => s.as_str(),
        DataTypeMetadataV2::Structured(_) => "structured_v2",
    }
}

/// Puts the element-size cap into zarrs' run-time data type registries (called once per
/// process with zarrbuf's other overrides).
pub(crate) fn register() {
    let _ = zarrs_data_type::register_data_type_v3(DataTypeRuntimePluginV3::new(
        |name| inventory::iter::<DataTypePluginV3>().any(|p| p.match_name(name)),
        |metadata: &MetadataV3| {
            let name = metadata.name();
            let plugin = inventory::iter::<DataTypePluginV3>()
                .find(|p| p.match_name(name))
                .ok_or_else(|| PluginCreateError::Other(format!("unknown data type {name}")))?;
            capped(plugin.create(metadata)?, name)
        },
    ));
    let _ = zarrs_data_type::register_data_type_v2(DataTypeRuntimePluginV2::new(
        |name| inventory::iter::<DataTypePluginV2>().any(|p| p.match_name(name)),
        |metadata: &DataTypeMetadataV2| {
            let name = v2_name(metadata);
            let plugin = inventory::iter::<DataTypePluginV2>()
                .find(|p| p.match_name(name))
                .ok_or_else(|| PluginCreateError::Other(format!("unknown data type {name}")))?;
            capped(plugin.create(metadata)?, name)
        },
    ));
}
