//! Splitting a zarr codec chain into the part the CPU runs (bytes-to-bytes: compression,
//! checksums) and the part the device runs (the `bytes` codec's byte swap and the
//! `transpose` codec's permutation, fused with the scatter into the output).

use crate::data_types::ByteOrder;
use crate::errors::{Error, Result};
use std::borrow::Cow;
use std::num::NonZeroU64;
use std::sync::Arc;
use zarrs::array::codec::{
    BytesCodec, BytesCodecConfiguration, TransposeCodec, TransposeCodecConfiguration,
};
use zarrs::array::{
    BytesRepresentation, CodecChain, CodecMetadataOptions, CodecOptions, DataType, Endianness,
    FillValue,
};
use zarrs::metadata::ConfigurationSerialize;
use zarrs::plugin::ExtensionName;

/// How a decoded chunk is laid out in the bytes that leave the CPU decompressors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct EncodedLayout {
    /// `order[i]` is the decoded axis stored as encoded axis `i` (identity when `None`).
    pub order: Option<Vec<usize>>,
    /// Byte order of the elements in those bytes.
    pub endian: ByteOrder,
}

impl EncodedLayout {
    /// Native C order: what zarrs' own full decode produces.
    pub(crate) fn native() -> Self {
        EncodedLayout {
            order: None,
            endian: ByteOrder::native(),
        }
    }

    /// Byte strides of each decoded axis in the encoded bytes of a chunk of `shape`.
    pub(crate) fn decoded_strides(&self, shape: &[usize], elem: usize) -> Vec<isize> {
        match &self.order {
            None => crate::data_types::Order::C.strides(shape, elem),
            Some(order) => {
                let enc_shape: Vec<usize> = order.iter().map(|&a| shape[a]).collect();
                let enc_strides = crate::data_types::Order::C.strides(&enc_shape, elem);
                let mut strides = vec![0isize; shape.len()];
                for (i, &a) in order.iter().enumerate() {
                    strides[a] = enc_strides[i];
                }
                strides
            }
        }
    }
}

/// A codec chain the device path can run: CPU bytes-to-bytes codecs + device layout steps.
pub(crate) struct ChainPlan {
    pub chain: Arc<CodecChain>,
    pub layout: EncodedLayout,
}

fn codec_name(name: Option<Cow<'static, str>>) -> String {
    name.map(|n| n.into_owned())
        .unwrap_or_else(|| "unnamed".into())
}

impl ChainPlan {
    /// Classifies `chain` (for chunks of `dims` dimensions); `None` when it holds steps only
    /// zarrs can run (then the whole chunk is decoded on the CPU and only the scatter runs on
    /// the device). A transpose whose order is not a permutation of the `dims` axes is an
    /// error, as in zarrs: the inner chain of a shard is not checked when the array opens.
    pub(crate) fn new(
        chain: Arc<CodecChain>,
        elem_size: usize,
        dims: usize,
    ) -> Result<Option<Self>> {
        let opts = CodecMetadataOptions::default();
        let Some(order) = transpose_order(&chain, dims)? else {
            return Ok(None);
        };
        let a2b = chain.array_to_bytes_codec();
        if !a2b.as_any().is::<BytesCodec>() {
            return Ok(None);
        }
        let endian = match a2b.configuration_v3(&opts) {
            None => None,
            Some(cfg) => match BytesCodecConfiguration::try_from_configuration(cfg) {
                Ok(BytesCodecConfiguration::V1(v1)) => v1.endian,
                _ => return Ok(None),
            },
        };
        let endian = match endian {
            Some(Endianness::Big) => ByteOrder::Big,
            Some(Endianness::Little) => ByteOrder::Little,
            None if elem_size <= 1 => ByteOrder::native(),
            None => return Ok(None),
        };
        Ok(Some(ChainPlan {
            chain,
            layout: EncodedLayout { order, endian },
        }))
    }

    /// Runs only the bytes-to-bytes codecs (decompression, checksum checks) on one encoded
    /// chunk of decoded shape `shape`. The result is in [`Self::layout`].
    pub(crate) fn decode_bytes(
        &self,
        encoded: Cow<'_, [u8]>,
        shape: &[NonZeroU64],
        data_type: &DataType,
        fill_value: &FillValue,
        options: &CodecOptions,
    ) -> std::result::Result<Vec<u8>, zarrs::array::CodecError> {
        let b2b = self.chain.bytes_to_bytes_codecs();
        if b2b.is_empty() {
            return Ok(encoded.into_owned());
        }
        let reps = self.representations(shape, data_type, fill_value)?;
        let mut bytes = encoded;
        for (i, c) in b2b.iter().enumerate().rev() {
            crate::zarr::plugins::codecs::precheck(c.as_ref(), &bytes, &reps[i])
                .map_err(zarrs::array::CodecError::Other)?;
            bytes = c.decode(bytes, &reps[i], options)?;
        }
        Ok(bytes.into_owned())
    }

    /// Runs only the bytes-to-bytes codecs forward (compression, checksums) on bytes already in
    /// [`Self::layout`].
    pub(crate) fn encode_bytes(
        &self,
        decoded: &[u8],
        options: &CodecOptions,
    ) -> std::result::Result<Vec<u8>, zarrs::array::CodecError> {
        let mut bytes: Cow<'_, [u8]> = Cow::Borrowed(decoded);
        for c in self.chain.bytes_to_bytes_codecs() {
            bytes = Cow::Owned(c.encode(bytes, options)?.into_owned());
        }
        Ok(bytes.into_owned())
    }

    /// The bytes representation each bytes-to-bytes codec decodes to (index i = input of codec i).
    fn representations(
        &self,
        shape: &[NonZeroU64],
        data_type: &DataType,
        fill_value: &FillValue,
    ) -> std::result::Result<Vec<BytesRepresentation>, zarrs::array::CodecError> {
        let (mut s, mut d, mut f) = (shape.to_vec(), data_type.clone(), fill_value.clone());
        for c in self.chain.array_to_array_codecs() {
            (s, d, f) = c.encoded_representation(&s, &d, &f)?;
        }
        let mut reps = vec![
            self.chain
                .array_to_bytes_codec()
                .encoded_representation(&s, &d, &f)?,
        ];
        for c in self.chain.bytes_to_bytes_codecs() {
            let last = reps[reps.len() - 1];
            reps.push(c.encoded_representation(&last));
        }
        Ok(reps)
    }
}

/// The permutation a chain's array-to-array codecs apply when they are all `transpose`
/// codecs: `Some(None)` for none (or the identity), `Some(Some(order))` where `order[i]` is
/// the decoded axis stored as encoded axis `i`, `None` when another array-to-array codec is
/// in the chain. A transpose whose order is not a permutation of the `dims` axes is an
/// error, as in zarrs: the inner chain of a shard is not checked when the array opens.
pub(crate) fn transpose_order(
    chain: &CodecChain,
    dims: usize,
) -> Result<Option<Option<Vec<usize>>>> {
    let opts = CodecMetadataOptions::default();
    let mut order: Option<Vec<usize>> = None;
    for c in chain.array_to_array_codecs() {
        if !c.as_any().is::<TransposeCodec>() {
            return Ok(None);
        }
        let cfg = c
            .configuration_v3(&opts)
            .ok_or_else(|| Error::Unsupported("a transpose codec without configuration".into()))?;
        let TransposeCodecConfiguration::V1(v1) =
            TransposeCodecConfiguration::try_from_configuration(cfg)
                .map_err(|e| Error::Unsupported(format!("transpose codec configuration: {e}")))?
        else {
            return Ok(None);
        };
        let next = v1.order.0.clone();
        let mut seen = vec![false; dims];
        let permutes = next.len() == dims
            && next
                .iter()
                .all(|&a| a < dims && !std::mem::replace(&mut seen[a], true));
        if !permutes {
            return Err(Error::InvalidArgument(format!(
                "the transpose codec's order {next:?} is not a permutation of the {dims} \
                 axes of the array's chunks; fix the array's metadata"
            )));
        }
        // Encoding applies transposes in sequence: e2[i] = e1[next[i]] = d[prev[next[i]]].
        order = Some(match order {
            None => next,
            Some(prev) => next.iter().map(|&i| prev[i]).collect(),
        });
    }
    Ok(Some(
        order.filter(|o| o.iter().enumerate().any(|(i, &a)| i != a)),
    ))
}

/// The names of a chain's codecs, for `info` and error messages.
pub(crate) fn codec_names(chain: &CodecChain) -> Vec<String> {
    let mut names: Vec<String> = chain
        .array_to_array_codecs()
        .iter()
        .map(|c| codec_name(c.name_v3()))
        .collect();
    names.push(codec_name(chain.array_to_bytes_codec().name_v3()));
    names.extend(
        chain
            .bytes_to_bytes_codecs()
            .iter()
            .map(|c| codec_name(c.name_v3())),
    );
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decoded_strides_invert_the_transpose() {
        // decoded shape [2, 3, 4]; encoded order (2, 0, 1): encoded shape [4, 2, 3].
        let l = EncodedLayout {
            order: Some(vec![2, 0, 1]),
            endian: ByteOrder::Little,
        };
        // encoded C strides (elem 1): [6, 3, 1]; decoded axis 2 is encoded axis 0, etc.
        assert_eq!(l.decoded_strides(&[2, 3, 4], 1), vec![3, 1, 6]);
        assert_eq!(
            EncodedLayout::native().decoded_strides(&[2, 3, 4], 2),
            vec![24, 8, 2]
        );
    }
}
