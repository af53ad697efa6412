//! The run's knobs, read from the environment once at the start and printed as the log's
//! first line (`gpu-knobs: ...`), so that a second call can try another setting without a
//! rebuild: the library's device-decoder knobs (`zarrbuf::cuda::tuning`: chunks per SM,
//! batches in flight, the hybrid's probe share) and the benchmark's staging budget
//! (`ZARRBUF_BENCH_STAGING_BYTES`, every read's `ReadOptions::staging_bytes`). A bad value
//! stops the run before any check, naming the variable.

/// The benchmark's staging budget when `ZARRBUF_BENCH_STAGING_BYTES` is unset: the
/// library's default (`ReadOptions::default().staging_bytes`).
fn default_staging() -> usize {
    zarrbuf::options::ReadOptions::default().staging_bytes
}

/// The knobs in effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Knobs {
    pub(crate) tuning: zarrbuf::cuda::Tuning,
    /// The benchmark reads' staging budget in bytes.
    pub(crate) staging_bytes: usize,
}

impl Knobs {
    /// The knobs from the environment; an error names a bad variable and what it takes.
    pub(crate) fn from_env() -> Result<Knobs, String> {
        let tuning = zarrbuf::cuda::tuning().map_err(|e| e.to_string())?;
        let staging = std::env::var("ZARRBUF_BENCH_STAGING_BYTES").ok();
        Ok(Knobs {
            tuning,
            staging_bytes: staging_bytes(staging.as_deref())?,
        })
    }

    /// The log's first line.
    pub(crate) fn header(&self) -> String {
        let default = if self.staging_bytes == default_staging() {
            " (default)"
        } else {
            ""
        };
        let host_sms = std::env::var("ZARRBUF_HOST_SMS").unwrap_or_else(|_| "unset".into());
        format!(
            "gpu-knobs: {} ZARRBUF_BENCH_STAGING_BYTES={}{default} ZARRBUF_HOST_SMS={host_sms}",
            self.tuning, self.staging_bytes
        )
    }
}

/// `ZARRBUF_BENCH_STAGING_BYTES`'s value: unset or empty is the default; otherwise a whole
/// number of bytes from 1 to 2^40.
fn staging_bytes(value: Option<&str>) -> Result<usize, String> {
    match value.map(str::trim) {
        None | Some("") => Ok(default_staging()),
        Some(text) => match text.parse::<usize>() {
            Ok(n) if (1..=1 << 40).contains(&n) => Ok(n),
            _ => Err(format!(
                "ZARRBUF_BENCH_STAGING_BYTES={text:?} is not a whole number of bytes from 1 to \
                 2^40 (the benchmark reads' staging budget, e.g. 1073741824 for 1 GiB); set it \
                 to one, or unset it for the default {}",
                default_staging()
            )),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_staging_knob_takes_bytes_and_refuses_anything_else() {
        assert_eq!(staging_bytes(None), Ok(256 << 20));
        assert_eq!(staging_bytes(Some(" ")), Ok(256 << 20));
        assert_eq!(staging_bytes(Some("1073741824")), Ok(1 << 30));
        for bad in ["0", "1GiB", "-5", "1e9", "2000000000000"] {
            let m = staging_bytes(Some(bad)).unwrap_err();
            assert!(
                m.starts_with(&format!("ZARRBUF_BENCH_STAGING_BYTES=\"{bad}\" is not")),
                "{m}"
            );
        }
    }

    #[test]
    fn the_header_names_every_knob() {
        let k = Knobs {
            tuning: zarrbuf::cuda::Tuning::DEFAULT,
            staging_bytes: 1 << 30,
        };
        let h = k.header();
        for part in [
            "gpu-knobs: ZARRBUF_CHUNKS_PER_SM=4 (default) ",
            "ZARRBUF_BATCHES_IN_FLIGHT=2 (default) ",
            "ZARRBUF_PROBE_SHARE=8 (default) ",
            "ZARRBUF_BENCH_STAGING_BYTES=1073741824 ZARRBUF_HOST_SMS=",
        ] {
            assert!(h.contains(part), "{h} lacks {part}");
        }
    }
}
