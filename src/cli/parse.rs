//! Flag values: the device a command reads into, shapes and sizes.

use zarrbuf::{BufferPrototype, Device, Error, Result};

pub(crate) fn prototype(device: Option<&str>) -> Result<BufferPrototype> {
    match device {
        None => zarrbuf::alloc::default_prototype(),
        Some("auto") => {
            let device = if Device::Cuda(0).is_available() {
                Device::Cuda(0)
            } else {
                Device::Cpu
            };
            Ok(BufferPrototype::for_device(device))
        }
        Some(d) => {
            let device: Device = d.parse().map_err(|_| {
                Error::InvalidArgument(format!("--device {d:?}: use cpu, cuda, cuda:N or auto"))
            })?;
            device.check_available()?;
            Ok(BufferPrototype::for_device(device))
        }
    }
}

/// `--chunks 64,64,64` → `[64, 64, 64]`.
pub(crate) fn parse_shape(what: &str, text: &str) -> Result<Vec<u64>> {
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    text.split(',')
        .map(|p| {
            p.trim().parse::<u64>().map_err(|_| {
                Error::InvalidArgument(format!(
                    "--{what} {text:?}: {p:?} is not a positive integer; give one size per dimension, e.g. 64,64,64"
                ))
            })
        })
        .collect()
}

/// `--memory 512MiB` → bytes (units B, KiB, MiB, GiB, KB, MB, GB; none means bytes).
pub(crate) fn parse_bytes(text: &str) -> Result<usize> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let scale: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kib" | "k" => 1 << 10,
        "mib" | "m" => 1 << 20,
        "gib" | "g" => 1 << 30,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        _ => 0,
    };
    match num.parse::<u64>() {
        Ok(n) if scale > 0 && n > 0 => usize::try_from(n.saturating_mul(scale)).map_err(|_| {
            Error::InvalidArgument(format!(
                "--memory {text:?} is larger than this machine can address"
            ))
        }),
        _ => Err(Error::InvalidArgument(format!(
            "--memory {text:?}: give a positive size such as 512MiB, 2GiB or 1000000"
        ))),
    }
}
