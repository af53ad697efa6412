//! The text form of an array subset, as the CLI's `--subset` takes it.

use crate::errors::{Error, Result};
use std::ops::Range;

/// Parses a half-open subset written as one `start:stop` per dimension, separated by commas
/// (`"0:10,5:20"`), against an array of the given shape.
///
/// An empty `start` means 0 and an empty `stop` means the dimension's length, so `":"` is the
/// whole dimension; spaces around numbers are ignored. A 0-dimensional array takes the empty
/// string. The result has one range per dimension.
///
/// # Errors
///
/// - [`Error::InvalidArgument`] when the number of ranges differs from the number of
///   dimensions, when a range has no `:`, or when a bound is not a non-negative integer;
/// - [`Error::OutOfBounds`] when `start > stop` or `stop` exceeds the dimension's length.
///
/// The messages name `--subset`, since the CLI passes them on to the user as they are.
///
/// ```
/// use zarrbuf::Error;
/// use zarrbuf::subset::parse_subset;
/// assert_eq!(parse_subset("0:10,5:", &[100, 20])?, vec![0..10, 5..20]);
/// assert_eq!(parse_subset(":", &[7])?, vec![0..7]);
/// assert_eq!(parse_subset("", &[])?, vec![]);
/// assert!(matches!(parse_subset("0:3", &[4, 4]), Err(Error::InvalidArgument(_))));
/// assert!(matches!(parse_subset("0:99", &[4]), Err(Error::OutOfBounds(_))));
/// # Ok::<(), zarrbuf::Error>(())
/// ```
pub fn parse_subset(text: &str, shape: &[u64]) -> Result<Vec<Range<u64>>> {
    let parts: Vec<&str> = if text.trim().is_empty() {
        Vec::new()
    } else {
        text.split(',').collect()
    };
    if parts.len() != shape.len() {
        return Err(Error::InvalidArgument(format!(
            "--subset {text:?} has {} ranges but the array has {} dimensions (shape {shape:?}); give one start:stop per dimension",
            parts.len(),
            shape.len()
        )));
    }
    parts
        .iter()
        .zip(shape)
        .enumerate()
        .map(|(k, (p, &n))| {
            let (a, b) = p.split_once(':').ok_or_else(|| {
                Error::InvalidArgument(format!("--subset: {p:?} (dimension {k}) is not start:stop"))
            })?;
            let parse = |s: &str, default: u64| -> Result<u64> {
                if s.trim().is_empty() {
                    return Ok(default);
                }
                s.trim().parse::<u64>().map_err(|_| {
                    Error::InvalidArgument(format!(
                        "--subset: {s:?} (dimension {k}) is not a non-negative integer"
                    ))
                })
            };
            let (start, stop) = (parse(a, 0)?, parse(b, n)?);
            if start > stop || stop > n {
                return Err(Error::OutOfBounds(format!(
                    "--subset {start}:{stop} on dimension {k} is outside the array's extent 0:{n}"
                )));
            }
            Ok(start..stop)
        })
        .collect()
}
