//! `struct`: zarr-python 3's structured data type in v3 (`{"name": "struct", "configuration":
//! {"fields": [{"name": "a", "data_type": "int32"}, ...]}}`, and the legacy `"structured"`
//! spelling with `[name, data_type]` pairs). An element is its fields packed in order with no
//! padding, as numpy lays out a structured dtype; the `bytes` codec swaps each field on its
//! own. The fill value is an object of per-field values (missing fields: zero) or base64.

// zarrs' registration macros use `TypeId::of` in const context (Rust 1.91), which zarrs
// 0.23 itself requires; the workspace's older rust-version does not describe that.
#![allow(clippy::incompatible_msrv)]

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::Value as Json;
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;
use zarrs::array::DataType;
use zarrs_data_type::codec_traits::bytes::{BytesCodecEndiannessMissingError, BytesDataTypeTraits};
use zarrs_data_type::{
    DataTypeFillValueError, DataTypeFillValueMetadataError, DataTypePluginV3, DataTypeTraits,
    DataTypeTraitsV3, FillValue,
};
use zarrs_metadata::v3::MetadataV3;
use zarrs_metadata::{Configuration, DataTypeSize, Endianness, FillValueMetadata};
use zarrs_plugin::{PluginCreateError, ZarrVersion};

/// One field of a struct.
#[derive(Clone, Debug)]
struct Field {
    name: String,
    data_type: DataType,
    offset: usize,
    size: usize,
    /// Size of the units the `bytes` codec reverses (1: never swapped).
    swap: usize,
}

/// zarr-python's `struct` data type.
#[derive(Clone, Debug)]
pub(crate) struct StructDataType {
    config: Configuration,
    fields: Vec<Field>,
    size: usize,
}

zarrs_plugin::impl_extension_aliases!(StructDataType, v3: "struct", ["structured"]);
inventory::submit! { DataTypePluginV3::new::<StructDataType>() }

fn bad(what: impl std::fmt::Display) -> PluginCreateError {
    PluginCreateError::Other(format!("struct data type: {what}"))
}

/// The byte-swap unit of a field type: element size for numbers, the part size for complex,
/// 4 for UTF-32 strings, 1 for bytes; nested structs are not supported.
fn swap_unit(dt: &DataType, size: usize) -> Result<usize, PluginCreateError> {
    let name = dt.name_v3().map(|n| n.into_owned()).unwrap_or_default();
    Ok(match name.as_str() {
        "complex64" => 4,
        "complex128" => 8,
        "fixed_length_utf32" => 4,
        "numpy.datetime64" | "numpy.timedelta64" => 8,
        "null_terminated_bytes" | "bool" => 1,
        "struct" | "structured" => return Err(bad("nested struct fields are not supported")),
        n if n.starts_with('r') => 1,
        _ if size <= 8 => size,
        n => return Err(bad(format!("fields of type {n} are not supported"))),
    })
}

impl DataTypeTraitsV3 for StructDataType {
    fn create(metadata: &MetadataV3) -> Result<DataType, PluginCreateError> {
        let config = metadata.configuration().cloned().unwrap_or_default();
        let list = config
            .get("fields")
            .and_then(Json::as_array)
            .ok_or_else(|| bad("the configuration has no list of fields"))?;
        let mut fields = Vec::with_capacity(list.len());
        let mut offset = 0;
        for f in list {
            let (name, dt_json) = match f {
                Json::Object(m) => (m.get("name"), m.get("data_type")),
                Json::Array(pair) if pair.len() == 2 => (pair.first(), pair.get(1)),
                other => return Err(bad(format!("field {other} is not {{name, data_type}}"))),
            };
            let name = name
                .and_then(Json::as_str)
                .ok_or_else(|| bad(format!("field {f} has no name")))?
                .to_string();
            let dt_meta: MetadataV3 = serde_json::from_value(
                dt_json
                    .cloned()
                    .ok_or_else(|| bad(format!("field {name} has no data_type")))?,
            )
            .map_err(|e| bad(format!("field {name}: {e}")))?;
            let data_type =
                DataType::from_metadata(&dt_meta).map_err(|e| bad(format!("field {name}: {e}")))?;
            let size = data_type
                .fixed_size()
                .ok_or_else(|| bad(format!("field {name} has a variable-length type")))?;
            let swap = swap_unit(&data_type, size)?;
            fields.push(Field {
                name,
                data_type,
                offset,
                size,
                swap,
            });
            offset += size;
        }
        if offset == 0 {
            return Err(bad("a struct needs at least one non-empty field"));
        }
        Ok(Arc::new(StructDataType {
            config,
            fields,
            size: offset,
        })
        .into())
    }
}

impl StructDataType {
    /// True when some field has multi-byte units (the byte order matters).
    pub(crate) fn has_multi_byte_fields(&self) -> bool {
        self.fields.iter().any(|f| f.swap > 1)
    }
}

impl DataTypeTraits for StructDataType {
    fn configuration(&self, _version: ZarrVersion) -> Configuration {
        self.config.clone()
    }

    fn size(&self) -> DataTypeSize {
        DataTypeSize::Fixed(self.size)
    }

    fn fill_value(
        &self,
        fill_value_metadata: &FillValueMetadata,
        version: ZarrVersion,
    ) -> Result<FillValue, DataTypeFillValueMetadataError> {
        if let Some(text) = fill_value_metadata.as_str() {
            let bytes = STANDARD
                .decode(text)
                .map_err(|_| DataTypeFillValueMetadataError)?;
            return if bytes.len() == self.size {
                Ok(FillValue::from(bytes))
            } else {
                Err(DataTypeFillValueMetadataError)
            };
        }
        let values: HashMap<String, FillValueMetadata> = match fill_value_metadata {
            FillValueMetadata::Null => HashMap::new(),
            FillValueMetadata::Object(m) => m.clone(),
            _ => return Err(DataTypeFillValueMetadataError),
        };
        let mut out = vec![0u8; self.size];
        for f in &self.fields {
            if let Some(v) = values.get(&f.name) {
                let fv = f.data_type.fill_value(v, version)?;
                if fv.as_ne_bytes().len() != f.size {
                    return Err(DataTypeFillValueMetadataError);
                }
                out[f.offset..f.offset + f.size].copy_from_slice(fv.as_ne_bytes());
            }
        }
        Ok(FillValue::from(out))
    }

    fn metadata_fill_value(
        &self,
        fill_value: &FillValue,
    ) -> Result<FillValueMetadata, DataTypeFillValueError> {
        let bytes = fill_value.as_ne_bytes();
        if bytes.len() != self.size {
            return Err(DataTypeFillValueError);
        }
        let mut m = HashMap::new();
        for f in &self.fields {
            let fv = FillValue::from(bytes[f.offset..f.offset + f.size].to_vec());
            m.insert(f.name.clone(), f.data_type.metadata_fill_value(&fv)?);
        }
        Ok(FillValueMetadata::Object(m))
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl BytesDataTypeTraits for StructDataType {
    fn encode<'a>(
        &self,
        bytes: Cow<'a, [u8]>,
        endianness: Option<Endianness>,
    ) -> Result<Cow<'a, [u8]>, BytesCodecEndiannessMissingError> {
        if !self.has_multi_byte_fields() {
            return Ok(bytes);
        }
        let endianness = endianness.ok_or(BytesCodecEndiannessMissingError)?;
        if endianness == Endianness::native() {
            return Ok(bytes);
        }
        let mut out = bytes.into_owned();
        for element in out.chunks_exact_mut(self.size) {
            for f in self.fields.iter().filter(|f| f.swap > 1) {
                for unit in element[f.offset..f.offset + f.size].chunks_exact_mut(f.swap) {
                    unit.reverse();
                }
            }
        }
        Ok(Cow::Owned(out))
    }

    fn decode<'a>(
        &self,
        bytes: Cow<'a, [u8]>,
        endianness: Option<Endianness>,
    ) -> Result<Cow<'a, [u8]>, BytesCodecEndiannessMissingError> {
        self.encode(bytes, endianness)
    }
}

zarrs_data_type::register_data_type_extension_codec!(
    StructDataType,
    zarrs_data_type::codec_traits::bytes::BytesDataTypePlugin,
    zarrs_data_type::codec_traits::bytes::BytesDataTypeTraits
);
