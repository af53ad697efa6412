//! numcodecs' `Categorize` filter for fixed-length strings: v2 id `categorize`, v3 name
//! `numcodecs.categorize`.
//!
//! Each string is stored as the 1-based index of the first equal entry of `labels`, 0 when
//! none is equal, as `astype` (default `|u1`); decoding maps indices back to labels and
//! anything else to the empty string (numcodecs does the same). Only `dtype` `<U{n}` (numpy
//! fixed-length unicode, zarr's `fixed_length_utf32`) is fixed-size; object (`|O`) arrays
//! hold variable-length strings, which zarrbuf does not read.

use super::chunk_filter::{ChunkFilter, chunk_filter_codec};
use super::numpy_dtype::{NumpyDtype, Scalar, Value};
use super::{
    Config, array_codec_traits, bad_config, codec_traits, field, register_codec, str_field,
    wrong_type,
};
use serde_json::Value as Json;
use std::borrow::Cow;
use zarrs::array::DataType;
use zarrs::array::data_type::FixedLengthUTF32DataType;
use zarrs_codec::CodecError;
use zarrs_plugin::{PluginCreateError, ZarrVersion};

/// The numcodecs Categorize codec.
#[derive(Clone, Debug)]
pub(crate) struct CategorizeCodec {
    config: Config,
    /// Characters per element (`n` of `<U{n}`).
    chars: usize,
    /// Each label as `chars` native-order UTF-32 code units (truncated or zero-padded), and
    /// whether it fits (a longer label never equals an element).
    labels: Vec<(Vec<u8>, bool)>,
    astype: Scalar,
}

zarrs_plugin::impl_extension_aliases!(CategorizeCodec,
    v3: "numcodecs.categorize", [],
    v2: "categorize", []
);
register_codec!(CategorizeCodec, ArrayToArray, v2 + v3);
codec_traits!(CategorizeCodec);
array_codec_traits!(CategorizeCodec);

impl CategorizeCodec {
    fn new(config: Config, _version: ZarrVersion) -> Result<Self, PluginCreateError> {
        let dtype = str_field("categorize", &config, "dtype")?;
        let chars = match dtype
            .strip_prefix(['<', '>', '='])
            .and_then(|r| r.strip_prefix('U'))
        {
            Some(n) => n.parse::<usize>().ok().filter(|&n| n > 0).ok_or_else(|| {
                bad_config("categorize", format!("dtype {dtype:?} has no length"))
            })?,
            None if dtype.ends_with('O') => {
                return Err(bad_config(
                    "categorize",
                    "dtype |O categorizes variable-length (object) strings, which zarrbuf does not read; \
                     read the array with zarr-python or zarrs' String elements",
                ));
            }
            None => {
                return Err(bad_config(
                    "categorize",
                    format!("dtype {dtype:?} is not a fixed-length unicode type like \"<U8\""),
                ));
            }
        };
        let astype = match field(&config, "astype") {
            None => Scalar::U8,
            Some(_) => {
                let t = str_field("categorize", &config, "astype")?;
                let t = NumpyDtype::parse(t).map_err(|e| bad_config("categorize", e))?;
                if t.scalar.is_float() || t.scalar == Scalar::Bool {
                    return Err(bad_config("categorize", "astype must be an integer type"));
                }
                t.scalar
            }
        };
        let labels = match field(&config, "labels") {
            Some(Json::Array(list)) => list
                .iter()
                .map(|l| {
                    let s = l.as_str().ok_or_else(|| {
                        bad_config("categorize", format!("label {l} is not a string"))
                    })?;
                    let units: Vec<u32> = s.chars().map(u32::from).collect();
                    let fits = units.len() <= chars;
                    let mut bytes = vec![0u8; 4 * chars];
                    for (i, u) in units.iter().take(chars).enumerate() {
                        bytes[4 * i..4 * i + 4].copy_from_slice(&u.to_ne_bytes());
                    }
                    Ok((bytes, fits))
                })
                .collect::<Result<Vec<_>, PluginCreateError>>()?,
            _ => return Err(bad_config("categorize", "labels must be a list of strings")),
        };
        Ok(CategorizeCodec {
            config,
            chars,
            labels,
            astype,
        })
    }
}

impl ChunkFilter for CategorizeCodec {
    fn check(&self, data_type: &DataType) -> Result<(), CodecError> {
        let ok = data_type
            .downcast_ref::<FixedLengthUTF32DataType>()
            .is_some_and(|t| t.length_bytes().get() == 4 * self.chars as u64);
        if !ok {
            let want = format!("fixed_length_utf32 of {} characters", self.chars);
            return Err(wrong_type("numcodecs.categorize", &want, data_type));
        }
        Ok(())
    }

    fn encoded_type(&self) -> DataType {
        self.astype.zarrs()
    }

    fn encode_chunk(&self, strings: Cow<'_, [u8]>) -> Result<Vec<u8>, CodecError> {
        let size = self.astype.size();
        let mut out = vec![0u8; strings.len() / (4 * self.chars) * size];
        for (s, o) in strings
            .chunks_exact(4 * self.chars)
            .zip(out.chunks_exact_mut(size))
        {
            let code = self
                .labels
                .iter()
                .position(|(l, fits)| *fits && l[..] == *s)
                .map_or(0, |i| i + 1);
            self.astype.write(Value::Int(code as i128), o);
        }
        Ok(out)
    }

    fn decode_chunk(&self, codes: Cow<'_, [u8]>) -> Result<Vec<u8>, CodecError> {
        let size = self.astype.size();
        let mut out = vec![0u8; codes.len() / size * 4 * self.chars];
        for (c, o) in codes
            .chunks_exact(size)
            .zip(out.chunks_exact_mut(4 * self.chars))
        {
            let label = match self.astype.read(c) {
                Value::Int(k) if k >= 1 => {
                    usize::try_from(k - 1).ok().and_then(|i| self.labels.get(i))
                }
                _ => None,
            };
            if let Some((label, _)) = label {
                o.copy_from_slice(label);
            }
        }
        Ok(out)
    }
}
chunk_filter_codec!(CategorizeCodec);
