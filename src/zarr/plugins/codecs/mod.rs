//! numcodecs' and zarr-python's codecs that zarrs 0.23 lacks, registered with zarrs as codec
//! plugins (one file per codec).
//!
//! zarrs finds codecs through `inventory` plugins keyed by name: a zarr v2 `.zarray` names
//! them by numcodecs `id` (`"lz4"`), a v3 codec chain by `name` (`"numcodecs.lz4"`,
//! `"scale_offset"`). Each file here submits the plugins for one codec, so every array zarrs
//! opens in a process that links zarrbuf understands it — arrays opened with
//! [`crate::open`] as well as a caller's own zarrs `Array` — and every zarrbuf path (CPU
//! decode-into, the staged pipeline, async reads, device reads) runs them through the one
//! zarrs codec chain. Filters (array-to-array codecs) have no device kernel: such chunks are
//! decoded on the CPU and only the scatter into the output runs on the device.
//!
//! Byte formats follow numcodecs 0.17 and zarr-python 3.4; the fixtures under
//! `fixtures/data` hold arrays written by both for every codec here.

mod arith;
mod astype;
mod base64;
mod bitround;
mod bounded;
mod bounded_pcodec;
mod cast_value;
mod categorize;
mod checksum32;
mod chunk_filter;
mod crc32;
mod crc32c;
mod delta;
mod jenkins_lookup3;
mod json_scalar;
mod lossy_overrides;
mod lz4;
mod lzma;
mod numcodecs_blosc;
mod numcodecs_gzip;
mod numcodecs_zstd;
mod numpy_dtype;
mod packbits;
mod quantize;
mod scale_offset;
mod whole_chunk;

pub(crate) use bounded::{has_unbounded_codec, precheck, precheck_chunk};
pub(crate) use lossy_overrides::register as register_zarrs_overrides;
pub(crate) use numpy_dtype::Scalar;

use serde_json::{Map, Value as Json};
use zarrs_plugin::PluginCreateError;

/// A codec's configuration as JSON (what zarrs hands the plugin, and what it writes back).
pub(crate) type Config = Map<String, Json>;

/// A plugin-creation error for codec `codec` saying `what` is wrong with its configuration.
pub(crate) fn bad_config(codec: &str, what: impl std::fmt::Display) -> PluginCreateError {
    PluginCreateError::Other(format!("codec {codec}: {what}"))
}

/// The configuration field `key`, or `default` when it is absent or null.
pub(crate) fn field<'a>(config: &'a Config, key: &str) -> Option<&'a Json> {
    config.get(key).filter(|v| !v.is_null())
}

/// Integer field `key` (absent or null: `default`).
pub(crate) fn int_field(
    codec: &str,
    config: &Config,
    key: &str,
    default: i64,
) -> Result<i64, PluginCreateError> {
    match field(config, key) {
        None => Ok(default),
        Some(v) => v
            .as_i64()
            .ok_or_else(|| bad_config(codec, format!("{key} must be an integer, found {v}"))),
    }
}

/// String field `key`, required.
pub(crate) fn str_field<'a>(
    codec: &str,
    config: &'a Config,
    key: &str,
) -> Result<&'a str, PluginCreateError> {
    match field(config, key) {
        Some(Json::String(s)) => Ok(s),
        Some(v) => Err(bad_config(
            codec,
            format!("{key} must be a string, found {v}"),
        )),
        None => Err(bad_config(codec, format!("the configuration has no {key}"))),
    }
}

/// Implements zarrs' `CodecTraits` for a codec struct with a `config: Config` field (the
/// configuration it was created from, written back unchanged). Partial decoding is off: the
/// whole chunk is decoded, which every codec here needs anyway.
macro_rules! codec_traits {
    ($t:ident) => {
        impl zarrs_codec::CodecTraits for $t {
            fn as_any(&self) -> &dyn std::any::Any {
                self
            }

            fn configuration(
                &self,
                _version: zarrs_plugin::ZarrVersion,
                _options: &zarrs_codec::CodecMetadataOptions,
            ) -> Option<zarrs_metadata::Configuration> {
                Some(self.config.clone().into())
            }

            fn partial_decoder_capability(&self) -> zarrs_codec::PartialDecoderCapability {
                zarrs_codec::PartialDecoderCapability {
                    partial_read: false,
                    partial_decode: false,
                }
            }

            fn partial_encoder_capability(&self) -> zarrs_codec::PartialEncoderCapability {
                zarrs_codec::PartialEncoderCapability {
                    partial_encode: false,
                }
            }
        }
    };
}
pub(crate) use codec_traits;

/// Implements zarrs' `ExtensionName` and `CodecTraits` for a wrapper of a zarrs codec held in
/// an `inner` field: name, configuration and partial encoding are the inner codec's, and
/// partial decoding is off, so a subset of a chunk is decoded (and checked) whole. `as_any`
/// answers with the wrapper itself (`self`) or with the codec it wraps (`inner`).
macro_rules! wrapper_codec_traits {
    ($t:ident, as_any: self) => {
        $crate::zarr::plugins::codecs::wrapper_codec_traits!($t, |w: &$t| w as &dyn std::any::Any);
    };
    ($t:ident, as_any: inner) => {
        $crate::zarr::plugins::codecs::wrapper_codec_traits!($t, |w: &$t| w.inner.as_any());
    };
    ($t:ident, $any:expr) => {
        impl zarrs_plugin::ExtensionName for $t {
            fn name(
                &self,
                version: zarrs_plugin::ZarrVersion,
            ) -> Option<std::borrow::Cow<'static, str>> {
                self.inner.name(version)
            }
        }

        impl zarrs_codec::CodecTraits for $t {
            fn as_any(&self) -> &dyn std::any::Any {
                let any: fn(&$t) -> &dyn std::any::Any = $any;
                any(self)
            }

            fn configuration(
                &self,
                version: zarrs_plugin::ZarrVersion,
                options: &zarrs_codec::CodecMetadataOptions,
            ) -> Option<zarrs_metadata::Configuration> {
                self.inner.configuration(version, options)
            }

            fn partial_decoder_capability(&self) -> zarrs_codec::PartialDecoderCapability {
                zarrs_codec::PartialDecoderCapability {
                    partial_read: false,
                    partial_decode: false,
                }
            }

            fn partial_encoder_capability(&self) -> zarrs_codec::PartialEncoderCapability {
                self.inner.partial_encoder_capability()
            }
        }
    };
}
pub(crate) use wrapper_codec_traits;

/// Registers codec `$t` (built by `$t::new(config, ZarrVersion)`) as a zarrs plugin of kind
/// `$kind` (`ArrayToArray`, `ArrayToBytes`, `BytesToBytes`): for v3 only, or for v2 and v3.
macro_rules! register_codec {
    ($t:ident, $kind:ident, v3) => {
        impl zarrs_codec::CodecTraitsV3 for $t {
            fn create(
                metadata: &zarrs_metadata::v3::MetadataV3,
            ) -> Result<zarrs_codec::Codec, zarrs_plugin::PluginCreateError> {
                let config: $crate::zarr::plugins::codecs::Config = metadata
                    .configuration()
                    .map(|c| c.clone().into())
                    .unwrap_or_default();
                Ok(zarrs_codec::Codec::$kind(std::sync::Arc::new($t::new(
                    config,
                    zarrs_plugin::ZarrVersion::V3,
                )?)))
            }
        }
        inventory::submit! { zarrs_codec::CodecPluginV3::new::<$t>() }
    };
    ($t:ident, $kind:ident, v2 + v3) => {
        $crate::zarr::plugins::codecs::register_codec!($t, $kind, v3);
        impl zarrs_codec::CodecTraitsV2 for $t {
            fn create(
                metadata: &zarrs_metadata::v2::MetadataV2,
            ) -> Result<zarrs_codec::Codec, zarrs_plugin::PluginCreateError> {
                let config: $crate::zarr::plugins::codecs::Config =
                    metadata.configuration().clone().into();
                Ok(zarrs_codec::Codec::$kind(std::sync::Arc::new($t::new(
                    config,
                    zarrs_plugin::ZarrVersion::V2,
                )?)))
            }
        }
        inventory::submit! { zarrs_codec::CodecPluginV2::new::<$t>() }
    };
}
pub(crate) use register_codec;

/// Implements zarrs' `ArrayCodecTraits` (one thread per chunk) for an array codec.
macro_rules! array_codec_traits {
    ($t:ident) => {
        impl zarrs_codec::ArrayCodecTraits for $t {
            fn recommended_concurrency(
                &self,
                _shape: &[std::num::NonZeroU64],
                _data_type: &zarrs::array::DataType,
            ) -> Result<zarrs_codec::RecommendedConcurrency, zarrs_codec::CodecError> {
                Ok(zarrs_codec::RecommendedConcurrency::new_maximum(1))
            }
        }
    };
}
pub(crate) use array_codec_traits;

/// The error for an array whose data type a filter was not configured for.
pub(crate) fn wrong_type(
    codec: &str,
    configured: &str,
    data_type: &zarrs::array::DataType,
) -> zarrs_codec::CodecError {
    zarrs_codec::CodecError::Other(format!(
        "{codec} is configured for {configured} but the array holds {data_type}"
    ))
}

/// The scalar type of a filter's `dtype`-like field `key` (required).
pub(crate) fn dtype_field(
    codec: &str,
    config: &Config,
    key: &str,
) -> Result<numpy_dtype::NumpyDtype, PluginCreateError> {
    numpy_dtype::NumpyDtype::parse(str_field(codec, config, key)?).map_err(|e| bad_config(codec, e))
}
