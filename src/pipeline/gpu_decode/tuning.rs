//! The device decoder's knobs: how many chunks a batch aims for per SM, how many batches are
//! in flight, and how large the hybrid's first (probe) batch may be. Each has a default
//! measured or reasoned for an H100; the environment may override it, so that a GPU run can
//! try another setting without a rebuild (`docs/gpu-verification.md`). Read once per
//! process, checked, and reported by [`tuning`].

use crate::errors::{Error, Result};
use std::sync::OnceLock;

/// Chunks per batch for each of the device's SMs (the least a batch aims for) by default.
/// Four waves of one thread block per SM.
pub(crate) const CHUNKS_PER_SM: usize = 4;

/// Batches in flight by default: one decompressing on the device while the next is
/// gathered and its chunks are copied host → device.
pub(crate) const BATCHES_IN_FLIGHT: usize = 2;

/// Until the device has finished a batch, its one batch takes at most 1/`PROBE_SHARE` of the
/// units left, by default (1/8: a device 7× slower than the CPU threads still finishes its
/// probe before they finish the rest).
pub(crate) const PROBE_SHARE: usize = 8;

/// One knob: its environment variable, its default, the values it accepts, what it is.
struct Knob {
    var: &'static str,
    default: usize,
    range: std::ops::RangeInclusive<usize>,
    what: &'static str,
}

/// The knobs, in [`Tuning`]'s field order.
const KNOBS: [Knob; 3] = [
    Knob {
        var: "ZARRBUF_CHUNKS_PER_SM",
        default: CHUNKS_PER_SM,
        range: 1..=1024,
        what: "chunks per device batch for each SM of the GPU",
    },
    Knob {
        var: "ZARRBUF_BATCHES_IN_FLIGHT",
        default: BATCHES_IN_FLIGHT,
        range: 1..=8,
        what: "device batches in flight",
    },
    Knob {
        var: "ZARRBUF_PROBE_SHARE",
        default: PROBE_SHARE,
        range: 1..=1024,
        what: "the hybrid's first device batch takes at most 1/N of the chunks left",
    },
];

/// The device decoder's knobs in effect in this process (see [`tuning`]).
///
/// ```
/// let t = zarrbuf::cuda::tuning()?;
/// assert!(t.chunks_per_sm >= 1 && t.batches_in_flight >= 1 && t.probe_share >= 1);
/// # Ok::<(), zarrbuf::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tuning {
    /// A device batch aims for this many chunks per SM (`ZARRBUF_CHUNKS_PER_SM`, default 4,
    /// 1 to 1024).
    pub chunks_per_sm: usize,
    /// Device batches in flight (`ZARRBUF_BATCHES_IN_FLIGHT`, default 2, 1 to 8); each takes
    /// `staging_bytes / batches_in_flight` of device memory for its compressed input.
    pub batches_in_flight: usize,
    /// With `Decode::Both`, the device's first batch, before its speed is known, takes at
    /// most 1/`probe_share` of the chunks left (`ZARRBUF_PROBE_SHARE`, default 8, 1 to 1024).
    pub probe_share: usize,
}

impl Tuning {
    /// The defaults, with no variable set.
    ///
    /// ```
    /// let d = zarrbuf::cuda::Tuning::DEFAULT;
    /// assert_eq!((d.chunks_per_sm, d.batches_in_flight, d.probe_share), (4, 2, 8));
    /// ```
    pub const DEFAULT: Tuning = Tuning {
        chunks_per_sm: CHUNKS_PER_SM,
        batches_in_flight: BATCHES_IN_FLIGHT,
        probe_share: PROBE_SHARE,
    };

    /// The knobs from `lookup` (an environment variable's value, `None` when unset): each
    /// unset or empty variable keeps its default; anything but a whole number in the knob's
    /// range is an error naming the variable, the value and what it accepts.
    fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> std::result::Result<Self, String> {
        let mut values = [0usize; 3];
        for (value, knob) in values.iter_mut().zip(&KNOBS) {
            *value = match lookup(knob.var).as_deref().map(str::trim) {
                None | Some("") => knob.default,
                Some(text) => match text.parse::<usize>() {
                    Ok(n) if knob.range.contains(&n) => n,
                    _ => {
                        return Err(format!(
                            "{}={text:?} is not a whole number from {} to {} ({}); set it to \
                             one, or unset it for the default {}",
                            knob.var,
                            knob.range.start(),
                            knob.range.end(),
                            knob.what,
                            knob.default
                        ));
                    }
                },
            };
        }
        Ok(Tuning {
            chunks_per_sm: values[0],
            batches_in_flight: values[1],
            probe_share: values[2],
        })
    }
}

impl std::fmt::Display for Tuning {
    /// `ZARRBUF_CHUNKS_PER_SM=4 ZARRBUF_BATCHES_IN_FLIGHT=2 ZARRBUF_PROBE_SHARE=8`, each
    /// followed by ` (default)` when it is one.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let values = [self.chunks_per_sm, self.batches_in_flight, self.probe_share];
        for (i, (value, knob)) in values.iter().zip(&KNOBS).enumerate() {
            let sep = if i == 0 { "" } else { " " };
            let default = if *value == knob.default {
                " (default)"
            } else {
                ""
            };
            write!(f, "{sep}{}={value}{default}", knob.var)?;
        }
        Ok(())
    }
}

/// The device decoder's knobs in effect: the defaults, overridden by the environment
/// variables `ZARRBUF_CHUNKS_PER_SM`, `ZARRBUF_BATCHES_IN_FLIGHT` and `ZARRBUF_PROBE_SHARE`,
/// read once, at the first call (later changes to the environment are not seen).
///
/// # Errors
///
/// [`Error::InvalidArgument`] when a variable holds anything but a whole number in its
/// range; every read that decodes on the device then fails with the same error.
///
/// ```
/// let t = zarrbuf::cuda::tuning()?;
/// println!("{t}"); // ZARRBUF_CHUNKS_PER_SM=4 (default) ZARRBUF_BATCHES_IN_FLIGHT=2 (default) ...
/// # Ok::<(), zarrbuf::Error>(())
/// ```
pub fn tuning() -> Result<Tuning> {
    static TUNING: OnceLock<std::result::Result<Tuning, String>> = OnceLock::new();
    TUNING
        .get_or_init(|| Tuning::from_lookup(|var| std::env::var(var).ok()))
        .clone()
        .map_err(Error::InvalidArgument)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(vars: &[(&str, &str)]) -> std::result::Result<Tuning, String> {
        Tuning::from_lookup(|var| {
            vars.iter()
                .find(|(k, _)| *k == var)
                .map(|(_, v)| v.to_string())
        })
    }

    #[test]
    fn unset_or_empty_variables_keep_the_defaults() {
        assert_eq!(with(&[]), Ok(Tuning::DEFAULT));
        assert_eq!(with(&[("ZARRBUF_PROBE_SHARE", " ")]), Ok(Tuning::DEFAULT));
        assert_eq!(
            Tuning::DEFAULT.to_string(),
            "ZARRBUF_CHUNKS_PER_SM=4 (default) ZARRBUF_BATCHES_IN_FLIGHT=2 (default) \
             ZARRBUF_PROBE_SHARE=8 (default)"
        );
    }

    #[test]
    fn each_variable_overrides_its_knob() {
        let t = with(&[
            ("ZARRBUF_CHUNKS_PER_SM", "16"),
            ("ZARRBUF_BATCHES_IN_FLIGHT", " 3 "),
            ("ZARRBUF_PROBE_SHARE", "1"),
        ])
        .unwrap();
        assert_eq!(
            t,
            Tuning {
                chunks_per_sm: 16,
                batches_in_flight: 3,
                probe_share: 1
            }
        );
        assert_eq!(
            t.to_string(),
            "ZARRBUF_CHUNKS_PER_SM=16 ZARRBUF_BATCHES_IN_FLIGHT=3 ZARRBUF_PROBE_SHARE=1"
        );
    }

    #[test]
    fn bad_values_are_errors_naming_the_variable_and_what_it_takes() {
        for (var, value) in [
            ("ZARRBUF_CHUNKS_PER_SM", "0"),
            ("ZARRBUF_CHUNKS_PER_SM", "4.5"),
            ("ZARRBUF_CHUNKS_PER_SM", "2000"),
            ("ZARRBUF_BATCHES_IN_FLIGHT", "9"),
            ("ZARRBUF_BATCHES_IN_FLIGHT", "-1"),
            ("ZARRBUF_PROBE_SHARE", "eight"),
        ] {
            let m = with(&[(var, value)]).unwrap_err();
            assert!(
                m.starts_with(&format!(
                    "{var}=\"{value}\" is not a whole number from 1 to"
                )),
                "{m}"
            );
            assert!(m.contains("unset it for the default"), "{m}");
        }
    }
}
