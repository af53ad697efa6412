//! zarr v2 metadata that zarr-python writes and zarrs cannot open as written, rewritten into
//! the equivalent metadata zarrs reads (the store is not modified):
//!
//! - structured dtypes (`"dtype": [["a", "<i4"], ["b", ">f8", [2]]]`): the chunks hold whole
//!   records exactly as numpy lays them out, each field in its own declared byte order, so
//!   they are read as raw records, the v2 raw type `|V{record size}` (the base64 fill value
//!   carries over);
//! - `"fill_value": null`, which the v2 spec allows for every type ("no fill value"): chunks
//!   that were never written read as zarr-python reads them, the type's default (zero, `""`,
//!   all-zero bytes, `NaT` for datetime64 and timedelta64).
//!
//! Used only after zarrs refused the metadata, so arrays zarrs opens are untouched.

use serde_json::Value as Json;
use zarrs::array::ArrayMetadata;
use zarrs::metadata::v2::ArrayMetadataV2;

/// Bytes of one element of a numpy type string or nested field list, `None` if unknown.
fn item_size(dtype: &Json) -> Option<u64> {
    match dtype {
        Json::Array(fields) => fields.iter().map(field_size).sum(),
        Json::String(t) => {
            let code = t.trim_start_matches(['<', '>', '|', '=']);
            let (kind, rest) = code.split_at_checked(1)?;
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            let n: u64 = if digits.is_empty() {
                0
            } else {
                digits.parse().ok()?
            };
            match kind {
                "b" | "i" | "u" | "f" | "c" | "V" | "S" if n > 0 => Some(n),
                "U" if n > 0 => n.checked_mul(4),
                "M" | "m" if n == 8 => Some(8),
                "?" => Some(1),
                _ => None,
            }
        }
        _ => None,
    }
}

/// Bytes of one `[name, dtype]` or `[name, dtype, shape]` field.
fn field_size(field: &Json) -> Option<u64> {
    let parts = field.as_array()?;
    let base = item_size(parts.get(1)?)?;
    match parts.get(2) {
        None => Some(base),
        Some(Json::Array(shape)) => shape
            .iter()
            .try_fold(base, |n, d| d.as_u64().and_then(|d| n.checked_mul(d))),
        Some(_) => None,
    }
}

/// The fill value zarr-python uses for `"fill_value": null` of a (simple) v2 dtype, spelled
/// as zarrs reads it; `None` to leave the null as it is; `Err` for a raw type whose element
/// (which the fill value spells out byte by byte) is larger than zarrbuf reads.
fn default_fill(dtype: &str) -> Option<Result<Json, String>> {
    let code = dtype.trim_start_matches(['<', '>', '|', '=']);
    let n: u64 = code
        .get(1..)
        .and_then(|r| r.parse().ok())
        .unwrap_or_default();
    Some(Ok(match code.chars().next()? {
        'M' | 'm' => Json::from("NaT"),
        'c' => Json::from(vec![0.0, 0.0]),
        'U' | 'S' => Json::from(""),
        'V' => match super::size_guard::element_too_large(dtype, n) {
            Some(why) => return Some(Err(why)),
            None => Json::from(vec![0u8; n as usize]),
        },
        _ => return None,
    }))
}

/// The rewritten metadata of a `.zarray` zarrs refused, or `None` when neither rewrite
/// applies (the original error then stands); `Err` says why a structured dtype cannot be read.
pub(crate) fn v2_metadata_fallback(zarray: &[u8]) -> Option<Result<ArrayMetadata, String>> {
    let mut meta: Json = serde_json::from_slice(zarray).ok()?;
    let dtype = meta.get("dtype")?.clone();
    let mut changed = false;
    if dtype.is_array() {
        let Some(size) = item_size(&dtype).filter(|&n| n > 0) else {
            return Some(Err(format!(
                "the structured dtype {dtype} has a field type zarrbuf cannot size"
            )));
        };
        if let Some(why) = super::size_guard::element_too_large(&dtype.to_string(), size) {
            return Some(Err(why));
        }
        meta["dtype"] = Json::from(format!("|V{size}"));
        if meta.get("fill_value").is_none_or(Json::is_null) {
            meta["fill_value"] = Json::from(vec![0u8; size as usize]);
        }
        changed = true;
    } else if meta.get("fill_value").is_some_and(Json::is_null)
        && let Some(fill) = dtype.as_str().and_then(default_fill)
    {
        let fill = match fill {
            Ok(fill) => fill,
            Err(why) => return Some(Err(why)),
        };
        meta["fill_value"] = fill;
        changed = true;
    }
    changed.then(|| {
        serde_json::from_value::<ArrayMetadataV2>(meta)
            .map(ArrayMetadata::V2)
            .map_err(|e| format!("the .zarray does not parse as zarr v2 metadata: {e}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huge_raw_elements_are_refused_before_a_fill_value_is_built() {
        for dtype in [r#""|V1099511627776""#, r#"[["a", "|V1099511627776"]]"#] {
            let err = v2_metadata_fallback(&zarray(dtype, "null"))
                .unwrap()
                .unwrap_err();
            assert!(err.contains("1099511627776 bytes"), "{err}");
        }
        assert!(
            v2_metadata_fallback(&zarray(r#""|V16""#, "null"))
                .unwrap()
                .is_ok()
        );
    }

    #[test]
    fn record_sizes_follow_numpy() {
        let j: Json = serde_json::json!([
            ["a", "<i4"],
            ["b", ">f8", [2]],
            ["c", [["d", "|S3"], ["e", "<U2"]]],
            ["t", "<M8[ns]"]
        ]);
        assert_eq!(item_size(&j), Some(4 + 16 + 3 + 8 + 8));
        assert_eq!(item_size(&serde_json::json!([["a", "|O"]])), None);
    }

    fn zarray(dtype: &str, fill: &str) -> Vec<u8> {
        format!(r#"{{"zarr_format": 2, "shape": [4], "chunks": [2], "dtype": {dtype}, "compressor": null, "fill_value": {fill}, "order": "C", "filters": null}}"#).into_bytes()
    }

    #[test]
    fn only_what_zarrs_refuses_is_rewritten() {
        assert!(v2_metadata_fallback(&zarray("\"<i4\"", "0")).is_none());
        assert!(v2_metadata_fallback(&zarray("\"<i4\"", "null")).is_none());
        let rec = v2_metadata_fallback(&zarray(
            r#"[["a", "<i4"], ["b", "<f8"]]"#,
            "\"AAAAAAAAAAAAAAAA\"",
        ));
        let Some(Ok(ArrayMetadata::V2(m))) = rec else {
            panic!("{rec:?}")
        };
        assert_eq!(m.dtype.to_string(), "|V12");
        let Some(Ok(ArrayMetadata::V2(m))) = v2_metadata_fallback(&zarray("\"<M8[s]\"", "null"))
        else {
            panic!("datetime with a null fill")
        };
        assert_eq!(
            serde_json::to_value(&m.fill_value).unwrap(),
            serde_json::json!("NaT")
        );
        assert!(matches!(
            v2_metadata_fallback(&zarray(r#"[["a", "|O"]]"#, "null")),
            Some(Err(_))
        ));
    }
}
