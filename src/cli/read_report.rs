//! How `zarrbuf read` reports what it read, per output kind: a summary (shape, type, memory,
//! a CRC-32 checksum, the throughput) or, with `--out`, a `.npy` file (variable-length
//! strings and bytes as the fixed-width type of their longest element).

use super::output::{errln, outln};
use std::path::Path;
use zarrbuf::{Error, NDBuffer, ReadOutput, Result, VarLenBuffer, VarLenKind};

/// `read --out` refuses a fixed-width `.npy` larger than both this many times the data's
/// bytes (offsets and values) ...
const NPY_GROWTH_LIMIT: u64 = 4;
/// ... and this many bytes (64 MiB).
const NPY_BYTES_LIMIT: u64 = 64 << 20;

/// zarr's name of a variable-length data type.
pub(crate) fn zarr_type_name(kind: VarLenKind) -> &'static str {
    match kind {
        VarLenKind::Utf8 => "string",
        VarLenKind::Bytes => "variable_length_bytes",
    }
}

/// A read's result as `zarrbuf read` reports it.
pub(crate) trait ReadReport: ReadOutput {
    /// Prints the summary of a read that took `seconds`.
    fn summary(&self, seconds: f64) -> Result<()>;
    /// Writes the result to `file` as `.npy` and says so on stderr.
    fn save(&self, file: &Path, seconds: f64) -> Result<()>;
}

/// The CRC-32 of `data`'s elements in C order, little-endian (what `.npy` files hold).
pub(crate) fn elements_crc32(data: &NDBuffer) -> Result<u32> {
    // Hash in place when the result already sits in host memory, C-contiguous and
    // little-endian: a copy would double the peak memory of a whole-array read.
    if data.is_c_contiguous()
        && data.byte_order() == zarrbuf::dtype::ByteOrder::Little
        && data.buffer().is_host_accessible()
    {
        let host = data.buffer().as_host_bytes()?;
        Ok(crc32fast::hash(
            &host[data.offset()..data.offset() + data.nbytes()],
        ))
    } else {
        Ok(crc32fast::hash(&data.to_native_bytes()?))
    }
}

impl ReadReport for NDBuffer {
    fn summary(&self, seconds: f64) -> Result<()> {
        let crc = elements_crc32(self)?;
        outln!("shape:      {:?}", self.shape())?;
        outln!("dtype:      {}", self.dtype())?;
        outln!("memory:     {}", self.memory())?;
        outln!("checksum:   crc32 {crc:08x} (C order, little-endian)")?;
        outln!(
            "throughput: {:.3} GB/s ({} bytes in {:.4} s)",
            self.nbytes() as f64 / seconds.max(1e-9) / 1e9,
            self.nbytes(),
            seconds
        )?;
        Ok(())
    }

    fn save(&self, file: &Path, seconds: f64) -> Result<()> {
        zarrbuf::npy::write(file, self)?;
        errln!(
            "wrote {} ({:?} {}) read in {:.3} s",
            file.display(),
            self.shape(),
            self.dtype(),
            seconds
        );
        Ok(())
    }
}

impl ReadReport for VarLenBuffer {
    fn summary(&self, seconds: f64) -> Result<()> {
        let crc = checksum(self)?;
        let bytes = self.offsets().len() + self.values().len();
        outln!("shape:      {:?}", self.shape())?;
        outln!(
            "dtype:      {} (variable-length {})",
            zarr_type_name(self.kind()),
            self.kind()
        )?;
        outln!("memory:     {}", self.memory())?;
        outln!("elements:   {}", self.len())?;
        outln!("values:     {} bytes", self.values().len())?;
        outln!("checksum:   crc32 {crc:08x} (Arrow large layout: i64 LE offsets, then values)")?;
        outln!(
            "throughput: {:.3} GB/s ({bytes} bytes of offsets and values in {seconds:.4} s)",
            bytes as f64 / seconds.max(1e-9) / 1e9,
        )?;
        Ok(())
    }

    fn save(&self, file: &Path, seconds: f64) -> Result<()> {
        write_varlen_npy(file, self, seconds)
    }
}

/// The CRC-32 (IEEE, as for fixed-size arrays) of the elements in Arrow's large layout: the
/// `n + 1` little-endian `i64` offsets (the first 0), then the values.
fn checksum(data: &VarLenBuffer) -> Result<u32> {
    let host = data.to_host()?;
    let mut h = crc32fast::Hasher::new();
    h.update(&host.offsets().as_host_bytes()?);
    h.update(&host.values().as_host_bytes()?);
    Ok(h.finalize())
}

/// Writes `data` as a fixed-width `<U{n}` / `|S{n}` `.npy` (`n`: the longest element),
/// unless that file would be larger than both [`NPY_GROWTH_LIMIT`] × the data's bytes and
/// [`NPY_BYTES_LIMIT`].
fn write_varlen_npy(file: &Path, data: &VarLenBuffer, seconds: f64) -> Result<()> {
    let host = data.to_host()?;
    let dtype = zarrbuf::npy::fixed_width_type(&host)?;
    let fixed = (host.len() as u64).saturating_mul(dtype.size() as u64);
    let data_bytes = (host.offsets().len() + host.values().len()) as u64;
    let limit = data_bytes
        .saturating_mul(NPY_GROWTH_LIMIT)
        .max(NPY_BYTES_LIMIT);
    if fixed > limit {
        return Err(Error::TooLarge {
            what: format!(
                "--out {}: {} elements as the fixed-width {} of the longest element",
                file.display(),
                host.len(),
                dtype.npy_descr()
            ),
            bytes: fixed,
            limit,
            limit_from: format!(
                "a fixed-width .npy may take {NPY_GROWTH_LIMIT} × the {data_bytes} bytes of \
                 the offsets and values or 64 MiB, whichever is more"
            ),
            advice: "read a --subset, leave out --out for the count and checksum, or read it \
                     from Python (zarrbuf.open(...).read() gives a NumPy StringDType array)"
                .into(),
        });
    }
    let fixed = zarrbuf::npy::to_fixed_width(&host)?;
    zarrbuf::npy::write(file, &fixed)?;
    errln!(
        "wrote {} ({:?} {}, {} variable-length elements) read in {:.3} s",
        file.display(),
        fixed.shape(),
        fixed.dtype(),
        host.len(),
        seconds
    );
    Ok(())
}
