//! `zarrbuf info` and `read` of arrays of variable-length strings and bytes (zarr
//! `string`, `variable_length_bytes`, v2 object arrays with `VLenUTF8` / `VLenBytes`).

use super::names::label;
use super::output::{errln, outln};
use super::source::Source;
use std::ops::Range;
use std::path::Path;
use std::time::Instant;
use zarrbuf::{BufferPrototype, Error, Result, VarLenBuffer, VarLenKind, options::ReadOptions};

/// `read --out` refuses a fixed-width `.npy` larger than both this many times the data's
/// bytes (offsets and values) ...
pub(crate) const NPY_GROWTH_LIMIT: u64 = 4;
/// ... and this many bytes (64 MiB).
pub(crate) const NPY_BYTES_LIMIT: u64 = 64 << 20;

fn type_name(kind: VarLenKind) -> &'static str {
    match kind {
        VarLenKind::Utf8 => "string",
        VarLenKind::Bytes => "variable_length_bytes",
    }
}

/// `zarrbuf info` of a variable-length array.
pub(crate) fn info(store: &str, path: &str, i: &zarrbuf::VarLenInfo) -> Result<()> {
    outln!("array:      {}", label(store, path))?;
    outln!("zarr:       v{}", i.zarr_format)?;
    outln!("shape:      {:?}", i.shape)?;
    match &i.inner_chunks {
        Some(inner) => {
            outln!("shards:     {:?}", i.chunks)?;
            outln!("chunks:     {inner:?} (inside each shard)")?;
        }
        None => outln!("chunks:     {:?}", i.chunks)?,
    }
    outln!(
        "data type:  {} (variable-length {}; stored as {})",
        type_name(i.data_type),
        i.data_type,
        i.stored_type
    )?;
    outln!("codecs:     {}", i.codecs.join(", "))?;
    outln!("fill value: {}", i.fill_value)?;
    Ok(())
}

/// `zarrbuf read` of a variable-length array: a summary (element count, value bytes, a
/// checksum) or, with `out`, a fixed-width `.npy` file.
pub(crate) fn read(
    array: &Source,
    ranges: &[Range<u64>],
    proto: &BufferPrototype,
    opts: &ReadOptions,
    out: Option<&Path>,
) -> Result<()> {
    let start = Instant::now();
    let data = array.read_varlen(ranges, proto, opts)?;
    let seconds = start.elapsed().as_secs_f64();
    match out {
        Some(file) => write_npy(file, &data, seconds),
        None => summary(&data, seconds),
    }
}

/// The CRC-32 (IEEE, as for fixed-size arrays) of the elements in Arrow's large layout: the
/// `n + 1` little-endian `i64` offsets (the first 0), then the values.
pub(crate) fn checksum(data: &VarLenBuffer) -> Result<u32> {
    let host = data.to_host()?;
    let mut h = crc32fast::Hasher::new();
    h.update(&host.offsets().as_host_bytes()?);
    h.update(&host.values().as_host_bytes()?);
    Ok(h.finalize())
}

fn summary(data: &VarLenBuffer, seconds: f64) -> Result<()> {
    let crc = checksum(data)?;
    let bytes = data.offsets().len() + data.values().len();
    outln!("shape:      {:?}", data.shape())?;
    outln!(
        "dtype:      {} (variable-length {})",
        type_name(data.kind()),
        data.kind()
    )?;
    outln!("memory:     {}", data.memory())?;
    outln!("elements:   {}", data.len())?;
    outln!("values:     {} bytes", data.values().len())?;
    outln!("checksum:   crc32 {crc:08x} (Arrow large layout: i64 LE offsets, then values)")?;
    outln!(
        "throughput: {:.3} GB/s ({bytes} bytes of offsets and values in {seconds:.4} s)",
        bytes as f64 / seconds.max(1e-9) / 1e9,
    )?;
    Ok(())
}

/// Writes `data` as a fixed-width `<U{n}` / `|S{n}` `.npy` (`n`: the longest element),
/// unless that file would be larger than both [`NPY_GROWTH_LIMIT`] × the data's bytes and
/// [`NPY_BYTES_LIMIT`].
fn write_npy(file: &Path, data: &VarLenBuffer, seconds: f64) -> Result<()> {
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
