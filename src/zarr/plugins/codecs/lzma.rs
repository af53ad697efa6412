//! numcodecs' `LZMA` compressor: v2 id `lzma`, v3 name `numcodecs.lzma`.
//!
//! Python's `lzma.compress(buf, format, check, preset, filters)` / `lzma.decompress(buf,
//! format, filters)` with liblzma: `format` 1 is an `.xz` stream (the default), 2 the legacy
//! `.lzma` ("alone") format, 3 a raw stream described by `filters`, 0 (decoding only)
//! detects `.xz` or `.lzma`. `check` -1 is the format's default (CRC64 for `.xz`), `preset`
//! null is level 6. `filters` is Python's list of filter dictionaries (`{"id": 33,
//! "preset": 6}` for LZMA2, `{"id": 3, "dist": 4}` for delta, ...).

use super::{Config, bad_config, codec_traits, field, int_field, register_codec};
use crate::zarr::decode::bounded::{Bound, read_bounded};
use liblzma::stream::{Check, Filters, LzmaOptions, MatchFinder, Mode, Stream};
use serde_json::Value as Json;
use std::borrow::Cow;
use std::io::Read;
use std::sync::Arc;
use zarrs::array::{ArrayBytesRaw, BytesRepresentation};
use zarrs_codec::{BytesToBytesCodecTraits, CodecError, CodecOptions, RecommendedConcurrency};
use zarrs_plugin::{PluginCreateError, ZarrVersion};

const FORMAT_AUTO: i64 = 0;
const FORMAT_XZ: i64 = 1;
const FORMAT_ALONE: i64 = 2;
const FORMAT_RAW: i64 = 3;
const FILTER_LZMA1: u64 = 0x4000_0000_0000_0001;
const FILTER_LZMA2: u64 = 0x21;
const FILTER_DELTA: u64 = 0x03;
const PRESET_DEFAULT: u32 = 6;
/// The memory a decoder may take for chunks of up to half this size (see
/// [`LzmaCodec::decoder`]).
const DECODER_MEMORY: u64 = 256 << 20;

/// The numcodecs LZMA codec.
#[derive(Clone, Debug)]
pub(crate) struct LzmaCodec {
    config: Config,
    format: i64,
    check: i64,
    preset: u32,
    filters: Option<Vec<Config>>,
}

zarrs_plugin::impl_extension_aliases!(LzmaCodec, v3: "numcodecs.lzma", [], v2: "lzma", []);
register_codec!(LzmaCodec, BytesToBytes, v2 + v3);
codec_traits!(LzmaCodec);

fn bad(what: impl std::fmt::Display) -> PluginCreateError {
    bad_config("lzma", what)
}

impl LzmaCodec {
    fn new(config: Config, _version: ZarrVersion) -> Result<Self, PluginCreateError> {
        let format = int_field("lzma", &config, "format", FORMAT_XZ)?;
        if !(FORMAT_AUTO..=FORMAT_RAW).contains(&format) {
            return Err(bad(format!(
                "format {format} is not one of 0 (auto), 1 (xz), 2 (alone), 3 (raw)"
            )));
        }
        let check = int_field("lzma", &config, "check", -1)?;
        if ![-1, 0, 1, 4, 10].contains(&check) {
            return Err(bad(format!(
                "check {check} is not one of -1 (default), 0 (none), 1 (crc32), 4 (crc64), 10 (sha256)"
            )));
        }
        let preset = int_field("lzma", &config, "preset", i64::from(PRESET_DEFAULT))?;
        let preset =
            u32::try_from(preset).map_err(|_| bad(format!("preset {preset} is invalid")))?;
        let filters = match field(&config, "filters") {
            None => None,
            Some(Json::Array(list)) => Some(
                list.iter()
                    .map(|f| match f {
                        Json::Object(m) => Ok(m.clone()),
                        other => Err(bad(format!("filter {other} is not an object"))),
                    })
                    .collect::<Result<Vec<_>, _>>()?,
            ),
            Some(other) => Err(bad(format!("filters must be a list, found {other}")))?,
        };
        if format == FORMAT_RAW && filters.is_none() {
            return Err(bad("format 3 (raw) needs filters"));
        }
        let codec = LzmaCodec {
            config,
            format,
            check,
            preset,
            filters,
        };
        // Build the filter chain once so a bad chain is reported when the array opens.
        if let Some(f) = &codec.filters {
            filter_chain(f)?;
        }
        Ok(codec)
    }

    fn check(&self) -> Check {
        match self.check {
            0 => Check::None,
            1 => Check::Crc32,
            10 => Check::Sha256,
            4 => Check::Crc64,
            _ if self.format == FORMAT_XZ => Check::Crc64,
            _ => Check::None,
        }
    }

    fn encoder(&self) -> Result<Stream, CodecError> {
        let lz = |e: liblzma::stream::Error| CodecError::Other(format!("numcodecs.lzma: {e}"));
        let chain = || -> Result<Filters, CodecError> {
            filter_chain(self.filters.as_deref().unwrap_or_default())
                .map_err(|e| CodecError::Other(e.to_string()))
        };
        match (self.format, &self.filters) {
            (FORMAT_XZ, None) => Stream::new_easy_encoder(self.preset, self.check()).map_err(lz),
            (FORMAT_XZ, Some(_)) => Stream::new_stream_encoder(&chain()?, self.check()).map_err(lz),
            (FORMAT_ALONE, filters) => {
                let opts = match filters.as_deref() {
                    None => LzmaOptions::new_preset(self.preset).map_err(lz)?,
                    Some([f]) if filter_id(f) == Some(FILTER_LZMA1) => {
                        lzma_options(f).map_err(|e| CodecError::Other(e.to_string()))?
                    }
                    Some(_) => {
                        return Err(CodecError::Other(
                            "numcodecs.lzma: format 2 (alone) takes exactly one LZMA1 filter"
                                .into(),
                        ));
                    }
                };
                Stream::new_lzma_encoder(&opts).map_err(lz)
            }
            (FORMAT_RAW, _) => Stream::new_raw_encoder(&chain()?).map_err(lz),
            _ => Err(CodecError::Other(
                "numcodecs.lzma: format 0 (auto) can only decode; choose 1 (xz), 2 (alone) or 3 (raw) to write"
                    .into(),
            )),
        }
    }

    /// A decoder for chunks of `bound` decoded bytes. Its memory (the dictionary a stream
    /// asks for) is limited to [`DECODER_MEMORY`] or twice the bound, whichever is more:
    /// room for any preset (preset 9 takes 65 MiB), none for a header asking for gigabytes.
    fn decoder(&self, bound: Bound) -> Result<Stream, CodecError> {
        let lz = |e: liblzma::stream::Error| CodecError::Other(format!("numcodecs.lzma: {e}"));
        let memlimit = DECODER_MEMORY.max((bound.limit() as u64).saturating_mul(2));
        match self.format {
            FORMAT_XZ => Stream::new_stream_decoder(memlimit, liblzma::stream::CONCATENATED),
            FORMAT_ALONE => Stream::new_lzma_decoder(memlimit),
            FORMAT_RAW => {
                let chain = filter_chain(self.filters.as_deref().unwrap_or_default())
                    .map_err(|e| CodecError::Other(e.to_string()))?;
                Stream::new_raw_decoder(&chain)
            }
            _ => Stream::new_auto_decoder(memlimit, liblzma::stream::CONCATENATED),
        }
        .map_err(lz)
    }
}

fn filter_id(f: &Config) -> Option<u64> {
    f.get("id").and_then(Json::as_u64)
}

/// `LzmaOptions` from an LZMA1/LZMA2 filter dictionary (Python's option names).
fn lzma_options(f: &Config) -> Result<LzmaOptions, PluginCreateError> {
    let num = |key: &str| -> Result<Option<u32>, PluginCreateError> {
        match f.get(key) {
            None | Some(Json::Null) => Ok(None),
            Some(v) => v
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .map(Some)
                .ok_or_else(|| bad(format!("filter option {key} must be an integer, found {v}"))),
        }
    };
    let preset = num("preset")?.unwrap_or(PRESET_DEFAULT);
    let mut opts =
        LzmaOptions::new_preset(preset).map_err(|e| bad(format!("preset {preset}: {e}")))?;
    if let Some(v) = num("dict_size")? {
        opts.dict_size(v);
    }
    if let Some(v) = num("lc")? {
        opts.literal_context_bits(v);
    }
    if let Some(v) = num("lp")? {
        opts.literal_position_bits(v);
    }
    if let Some(v) = num("pb")? {
        opts.position_bits(v);
    }
    if let Some(v) = num("mode")? {
        opts.mode(match v {
            1 => Mode::Fast,
            2 => Mode::Normal,
            _ => return Err(bad(format!("mode {v} is not 1 (fast) or 2 (normal)"))),
        });
    }
    if let Some(v) = num("nice_len")? {
        opts.nice_len(v);
    }
    if let Some(v) = num("mf")? {
        opts.match_finder(match v {
            3 => MatchFinder::HashChain3,
            4 => MatchFinder::HashChain4,
            18 => MatchFinder::BinaryTree2,
            19 => MatchFinder::BinaryTree3,
            20 => MatchFinder::BinaryTree4,
            _ => return Err(bad(format!("match finder {v} is unknown"))),
        });
    }
    if let Some(v) = num("depth")? {
        opts.depth(v);
    }
    Ok(opts)
}

/// liblzma's filter chain for Python's filter list.
fn filter_chain(list: &[Config]) -> Result<Filters, PluginCreateError> {
    let mut chain = Filters::new();
    for f in list {
        let id = filter_id(f).ok_or_else(|| bad(format!("filter {f:?} has no integer id")))?;
        match id {
            FILTER_LZMA1 => {
                chain.lzma1(&lzma_options(f)?);
            }
            FILTER_LZMA2 => {
                chain.lzma2(&lzma_options(f)?);
            }
            FILTER_DELTA => {
                let dist = f.get("dist").and_then(Json::as_u64).unwrap_or(1);
                if !(1..=256).contains(&dist) {
                    return Err(bad(format!("delta filter dist {dist} is not in 1..=256")));
                }
                // The .xz properties byte of the delta filter is dist - 1.
                chain
                    .delta_properties(&[(dist - 1) as u8])
                    .map_err(|e| bad(format!("delta filter: {e}")))?;
            }
            4..=9 => {
                if f.keys().any(|k| k != "id") {
                    return Err(bad(format!(
                        "branch/call/jump filter {id}: options (start_offset) are not supported"
                    )));
                }
                match id {
                    4 => chain.x86(),
                    5 => chain.powerpc(),
                    6 => chain.ia64(),
                    7 => chain.arm(),
                    8 => chain.arm_thumb(),
                    _ => chain.sparc(),
                };
            }
            other => return Err(bad(format!("filter id {other} is not supported"))),
        }
    }
    Ok(chain)
}

/// Decodes `input` with `stream` into at most `bound` bytes (exactly, for an exact bound):
/// the decoder stops one byte past the bound.
fn run(stream: Stream, input: &[u8], bound: Bound) -> Result<Vec<u8>, CodecError> {
    read_bounded(liblzma::read::XzDecoder::new_stream(input, stream), bound)
        .map_err(|e| CodecError::Other(format!("numcodecs.lzma: {e}")))
}

impl BytesToBytesCodecTraits for LzmaCodec {
    fn into_dyn(self: Arc<Self>) -> Arc<dyn BytesToBytesCodecTraits> {
        self
    }

    fn recommended_concurrency(
        &self,
        _decoded_representation: &BytesRepresentation,
    ) -> Result<RecommendedConcurrency, CodecError> {
        Ok(RecommendedConcurrency::new_maximum(1))
    }

    fn encoded_representation(
        &self,
        _decoded_representation: &BytesRepresentation,
    ) -> BytesRepresentation {
        BytesRepresentation::UnboundedSize
    }

    fn encode<'a>(
        &self,
        decoded_value: ArrayBytesRaw<'a>,
        _options: &CodecOptions,
    ) -> Result<ArrayBytesRaw<'a>, CodecError> {
        let mut out = Vec::new();
        liblzma::read::XzEncoder::new_stream(&decoded_value[..], self.encoder()?)
            .read_to_end(&mut out)
            .map_err(|e| CodecError::Other(format!("numcodecs.lzma: compressing: {e}")))?;
        Ok(Cow::Owned(out))
    }

    fn decode<'a>(
        &self,
        encoded_value: ArrayBytesRaw<'a>,
        decoded_representation: &BytesRepresentation,
        _options: &CodecOptions,
    ) -> Result<ArrayBytesRaw<'a>, CodecError> {
        let bound = Bound::of(decoded_representation).map_err(CodecError::Other)?;
        Ok(Cow::Owned(run(
            self.decoder(bound)?,
            &encoded_value,
            bound,
        )?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codec(json: &str) -> Result<LzmaCodec, PluginCreateError> {
        LzmaCodec::new(serde_json::from_str(json).unwrap(), ZarrVersion::V2)
    }

    #[test]
    fn every_format_round_trips() {
        let data: Vec<u8> = (0..5000u32).flat_map(|i| (i % 251).to_le_bytes()).collect();
        let rep = BytesRepresentation::FixedSize(data.len() as u64);
        let opts = CodecOptions::default();
        for json in [
            r#"{"format": 1, "check": -1, "preset": null, "filters": null}"#,
            r#"{"format": 1, "check": 0, "preset": 1}"#,
            r#"{"format": 2, "preset": 3}"#,
            r#"{"format": 3, "filters": [{"id": 3, "dist": 4}, {"id": 33, "preset": 1}]}"#,
            r#"{"format": 1, "filters": [{"id": 33, "preset": 9, "mode": 2, "mf": 20}]}"#,
        ] {
            let c = codec(json).unwrap();
            let enc = c.encode(Cow::Borrowed(&data), &opts).unwrap();
            assert!(enc.len() < data.len(), "{json}");
            let dec = c.decode(enc.clone(), &rep, &opts).unwrap();
            assert_eq!(dec, data, "{json}");
            let mut bad = enc.into_owned();
            let mid = bad.len() / 2;
            bad[mid] ^= 0x55;
            bad.truncate(bad.len() - 3);
            assert!(c.decode(Cow::Owned(bad), &rep, &opts).is_err(), "{json}");
        }
    }

    #[test]
    fn a_stream_decoding_past_the_chunk_stops_there() {
        let c = codec(r#"{"format": 1}"#).unwrap();
        let opts = CodecOptions::default();
        let enc = c.encode(Cow::Owned(vec![0u8; 1 << 20]), &opts).unwrap();
        let rep = BytesRepresentation::FixedSize(100);
        let err = c.decode(enc.clone(), &rep, &opts).unwrap_err().to_string();
        assert!(err.contains("more than the chunk's 100 bytes"), "{err}");
        let rep = BytesRepresentation::FixedSize(2 << 20);
        let err = c.decode(enc, &rep, &opts).unwrap_err().to_string();
        assert!(err.contains("decodes to 1048576 bytes"), "{err}");
    }

    #[test]
    fn bad_configurations_are_refused() {
        assert!(codec(r#"{"format": 7}"#).is_err());
        assert!(codec(r#"{"format": 3}"#).is_err());
        assert!(codec(r#"{"check": 2}"#).is_err());
        assert!(codec(r#"{"filters": [{"id": 99}]}"#).is_err());
    }
}
