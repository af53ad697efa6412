//! numpy `datetime64` / `timedelta64` under their zarr v2 names: `<M8[s]`, `>m8[10ms]`,
//! `<M8` (generic unit), any of numpy's units (`Y M W D h m s ms us μs ns ps fs as`) with an
//! optional scale factor. The plugin hands zarrs its own `numpy.datetime64` /
//! `numpy.timedelta64` types, so v2 and v3 arrays read the same way; the byte order comes
//! from the first character, as for every v2 type.

use std::num::NonZeroU32;
use std::sync::Arc;
use zarrs::array::DataType;
use zarrs::array::data_type::{NumpyDateTime64DataType, NumpyTimeDelta64DataType};
use zarrs::metadata_ext::data_type::NumpyTimeUnit;
use zarrs_data_type::{DataTypePluginV2, DataTypeTraitsV2};
use zarrs_metadata::v2::DataTypeMetadataV2;
use zarrs_plugin::{PluginCreateError, Regex};

/// The v2 name matcher for numpy time types.
pub(crate) struct NumpyTimeV2;

zarrs_plugin::impl_extension_aliases!(NumpyTimeV2,
    v2: "<M8[s]", [],
    [Regex::new(r"^[<>|=]?[Mm]8(\[[0-9]*[A-Za-zμ]+\])?$").expect("a valid regular expression")]
);
inventory::submit! { DataTypePluginV2::new::<NumpyTimeV2>() }

/// numpy's unit abbreviation as zarrs' unit.
fn unit(text: &str) -> Option<NumpyTimeUnit> {
    Some(match text {
        "generic" | "" => NumpyTimeUnit::Generic,
        "Y" => NumpyTimeUnit::Year,
        "M" => NumpyTimeUnit::Month,
        "W" => NumpyTimeUnit::Week,
        "D" => NumpyTimeUnit::Day,
        "h" => NumpyTimeUnit::Hour,
        "m" => NumpyTimeUnit::Minute,
        "s" => NumpyTimeUnit::Second,
        "ms" => NumpyTimeUnit::Millisecond,
        "us" | "μs" => NumpyTimeUnit::Microsecond,
        "ns" => NumpyTimeUnit::Nanosecond,
        "ps" => NumpyTimeUnit::Picosecond,
        "fs" => NumpyTimeUnit::Femtosecond,
        "as" => NumpyTimeUnit::Attosecond,
        _ => return None,
    })
}

/// `(is datetime, unit, scale factor)` of a v2 numpy time type string.
pub(crate) fn parse(name: &str) -> Option<(bool, NumpyTimeUnit, NonZeroU32)> {
    let rest = name.trim_start_matches(['<', '>', '|', '=']);
    let datetime = match rest.get(..2)? {
        "M8" => true,
        "m8" => false,
        _ => return None,
    };
    let spec = &rest[2..];
    let (scale, unit_text) = if spec.is_empty() {
        (1, "")
    } else {
        let inner = spec.strip_prefix('[')?.strip_suffix(']')?;
        let digits = inner.chars().take_while(char::is_ascii_digit).count();
        let scale = if digits == 0 {
            1
        } else {
            inner[..digits].parse().ok()?
        };
        (scale, &inner[digits..])
    };
    Some((datetime, unit(unit_text)?, NonZeroU32::new(scale)?))
}

impl DataTypeTraitsV2 for NumpyTimeV2 {
    fn create(metadata: &DataTypeMetadataV2) -> Result<DataType, PluginCreateError> {
        let DataTypeMetadataV2::Simple(name) = metadata else {
            return Err(PluginCreateError::Other("not a numpy time type".into()));
        };
        let (datetime, unit, scale) =
            parse(name).ok_or_else(|| PluginCreateError::NameInvalid { name: name.clone() })?;
        Ok(if datetime {
            Arc::new(NumpyDateTime64DataType::new(unit, scale)).into()
        } else {
            Arc::new(NumpyTimeDelta64DataType::new(unit, scale)).into()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numpy_time_strings_parse() {
        assert_eq!(
            parse("<M8[s]"),
            Some((true, NumpyTimeUnit::Second, NonZeroU32::new(1).unwrap()))
        );
        assert_eq!(
            parse(">m8[10ms]"),
            Some((
                false,
                NumpyTimeUnit::Millisecond,
                NonZeroU32::new(10).unwrap()
            ))
        );
        assert_eq!(
            parse("<M8"),
            Some((true, NumpyTimeUnit::Generic, NonZeroU32::new(1).unwrap()))
        );
        assert_eq!(
            parse("<M8[μs]").map(|p| p.1),
            Some(NumpyTimeUnit::Microsecond)
        );
        assert_eq!(parse("<M8[0s]"), None);
        assert_eq!(parse("<M8[xs]"), None);
        assert_eq!(parse("<i8"), None);
    }
}
