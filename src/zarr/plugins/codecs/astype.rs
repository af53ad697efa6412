//! numcodecs' `AsType` filter: v2 id `astype`, v3 name `numcodecs.astype`.
//!
//! Elements of `decode_dtype` (the array's type) are stored converted to `encode_dtype`
//! (numpy `astype`: integers wrap, floats round to nearest, floats to integers truncate).

use super::chunk_filter::{ChunkFilter, chunk_filter_codec};
use super::numpy_dtype::{NumpyDtype, convert, swap_in_place};
use super::{Config, array_codec_traits, codec_traits, dtype_field, register_codec, wrong_type};
use std::borrow::Cow;
use zarrs::array::DataType;
use zarrs_codec::CodecError;
use zarrs_plugin::{PluginCreateError, ZarrVersion};

/// The numcodecs AsType codec.
#[derive(Clone, Debug)]
pub(crate) struct AsTypeCodec {
    config: Config,
    encode_dtype: NumpyDtype,
    decode_dtype: NumpyDtype,
    swap: bool,
}

zarrs_plugin::impl_extension_aliases!(AsTypeCodec, v3: "numcodecs.astype", [], v2: "astype", []);
register_codec!(AsTypeCodec, ArrayToArray, v2 + v3);
codec_traits!(AsTypeCodec);
array_codec_traits!(AsTypeCodec);

impl AsTypeCodec {
    fn new(config: Config, version: ZarrVersion) -> Result<Self, PluginCreateError> {
        let encode_dtype = dtype_field("astype", &config, "encode_dtype")?;
        let decode_dtype = dtype_field("astype", &config, "decode_dtype")?;
        let swap = version == ZarrVersion::V2
            && encode_dtype.scalar.size() > 1
            && encode_dtype.big_endian != decode_dtype.big_endian;
        Ok(AsTypeCodec {
            config,
            encode_dtype,
            decode_dtype,
            swap,
        })
    }
}

impl ChunkFilter for AsTypeCodec {
    fn check(&self, data_type: &DataType) -> Result<(), CodecError> {
        if *data_type != self.decode_dtype.scalar.zarrs() {
            let want = format!("{:?}", self.decode_dtype.scalar);
            return Err(wrong_type("numcodecs.astype", &want, data_type));
        }
        Ok(())
    }

    fn encoded_type(&self) -> DataType {
        self.encode_dtype.scalar.zarrs()
    }

    fn encode_chunk(&self, chunk: Cow<'_, [u8]>) -> Result<Vec<u8>, CodecError> {
        let mut out = convert(&chunk, self.decode_dtype.scalar, self.encode_dtype.scalar);
        if self.swap {
            swap_in_place(&mut out, self.encode_dtype.scalar.size());
        }
        Ok(out)
    }

    fn decode_chunk(&self, chunk: Cow<'_, [u8]>) -> Result<Vec<u8>, CodecError> {
        let mut b = chunk.into_owned();
        if self.swap {
            swap_in_place(&mut b, self.encode_dtype.scalar.size());
        }
        Ok(convert(
            &b,
            self.encode_dtype.scalar,
            self.decode_dtype.scalar,
        ))
    }
}
chunk_filter_codec!(AsTypeCodec);
