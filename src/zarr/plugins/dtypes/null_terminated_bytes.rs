//! `null_terminated_bytes`: numpy's fixed-length bytes `S{n}` as zarr-python 3 writes it (v3
//! `{"name": "null_terminated_bytes", "configuration": {"length_bytes": n}}`, v2 `|S{n}`).
//! Elements are `n` raw bytes, shorter values padded with NUL; the fill value is base64
//! (shorter than `n` bytes: NUL-padded).

// zarrs' registration macros use `TypeId::of` in const context (Rust 1.91), which zarrs
// 0.23 itself requires; the workspace's older rust-version does not describe that.
#![allow(clippy::incompatible_msrv)]

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use zarrs::array::DataType;
use zarrs_data_type::{
    DataTypeFillValueError, DataTypeFillValueMetadataError, DataTypePluginV2, DataTypePluginV3,
    DataTypeTraits, DataTypeTraitsV2, DataTypeTraitsV3, FillValue,
};
use zarrs_metadata::v2::DataTypeMetadataV2;
use zarrs_metadata::v3::MetadataV3;
use zarrs_metadata::{Configuration, ConfigurationSerialize, DataTypeSize, FillValueMetadata};
use zarrs_plugin::{PluginCreateError, Regex, ZarrVersion};

/// numpy `S{n}`: `n` bytes per element.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct NullTerminatedBytesDataType {
    length: usize,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct LengthBytes {
    length_bytes: usize,
}
impl ConfigurationSerialize for LengthBytes {}

zarrs_plugin::impl_extension_aliases!(NullTerminatedBytesDataType,
    v3: "null_terminated_bytes", [], [],
    v2: "|S", [], [Regex::new(r"^[|<>=]?S[0-9]+$").expect("a valid regular expression")]
);
inventory::submit! { DataTypePluginV3::new::<NullTerminatedBytesDataType>() }
inventory::submit! { DataTypePluginV2::new::<NullTerminatedBytesDataType>() }

impl NullTerminatedBytesDataType {
    fn data_type(length: usize) -> Result<DataType, PluginCreateError> {
        if length == 0 {
            return Err(PluginCreateError::Other(
                "null_terminated_bytes needs a length of at least 1 byte".into(),
            ));
        }
        Ok(Arc::new(NullTerminatedBytesDataType { length }).into())
    }
}

impl DataTypeTraitsV3 for NullTerminatedBytesDataType {
    fn create(metadata: &MetadataV3) -> Result<DataType, PluginCreateError> {
        let c: LengthBytes = metadata.to_typed_configuration()?;
        Self::data_type(c.length_bytes)
    }
}

impl DataTypeTraitsV2 for NullTerminatedBytesDataType {
    fn create(metadata: &DataTypeMetadataV2) -> Result<DataType, PluginCreateError> {
        let DataTypeMetadataV2::Simple(name) = metadata else {
            return Err(PluginCreateError::Other("not a bytes type".into()));
        };
        let n = name
            .trim_start_matches(['|', '<', '>', '='])
            .strip_prefix('S')
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| PluginCreateError::NameInvalid { name: name.clone() })?;
        Self::data_type(n)
    }
}

impl DataTypeTraits for NullTerminatedBytesDataType {
    fn configuration(&self, _version: ZarrVersion) -> Configuration {
        Configuration::from(LengthBytes {
            length_bytes: self.length,
        })
    }

    fn size(&self) -> DataTypeSize {
        DataTypeSize::Fixed(self.length)
    }

    fn fill_value(
        &self,
        fill_value_metadata: &FillValueMetadata,
        _version: ZarrVersion,
    ) -> Result<FillValue, DataTypeFillValueMetadataError> {
        let mut bytes = match fill_value_metadata {
            FillValueMetadata::Null => Vec::new(),
            FillValueMetadata::Number(n) if n.as_u64() == Some(0) => Vec::new(),
            other => {
                let text = other.as_str().ok_or(DataTypeFillValueMetadataError)?;
                STANDARD
                    .decode(text)
                    .map_err(|_| DataTypeFillValueMetadataError)?
            }
        };
        if bytes.len() > self.length {
            return Err(DataTypeFillValueMetadataError);
        }
        bytes.resize(self.length, 0);
        Ok(FillValue::from(bytes))
    }

    fn metadata_fill_value(
        &self,
        fill_value: &FillValue,
    ) -> Result<FillValueMetadata, DataTypeFillValueError> {
        let bytes = fill_value.as_ne_bytes();
        let end = bytes.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
        Ok(FillValueMetadata::from(
            STANDARD.encode(&bytes[..end]).as_str(),
        ))
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

zarrs_data_type::codec_traits::impl_bytes_data_type_traits!(NullTerminatedBytesDataType, 1);
