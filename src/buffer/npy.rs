//! Reading and writing numpy `.npy` files (format 1.0–3.0), for the CLI and tests.

use crate::buffer::Buffer;
use crate::buffer::NDBuffer;
use crate::data_types::{ByteOrder, DataType, Order};
use crate::errors::{Error, Result};
use std::io::{Read, Write};
use std::path::Path;

pub use super::varlen_fixed::{fixed_width_type, to_fixed_width};

const MAGIC: &[u8] = b"\x93NUMPY";

fn io_err(path: &Path, source: std::io::Error) -> Error {
    Error::Io {
        path: path.display().to_string(),
        source,
    }
}

/// Writes `array` (any memory, layout, byte order) as a C-order little-endian `.npy`.
///
/// ```
/// let a = zarrbuf::NDBuffer::from_vec(vec![1.0f32, 2.0], &[2])?;
/// let path = std::env::temp_dir().join("zarrbuf-doc-write.npy");
/// zarrbuf::npy::write(&path, &a)?;
/// let b = zarrbuf::npy::read(&path)?;
/// assert!(a.array_equal(&b, true)?);
/// # Ok::<(), zarrbuf::Error>(())
/// ```
pub fn write(path: &Path, array: &NDBuffer) -> Result<()> {
    // Write straight from host memory when the layout already is what .npy wants; a copy
    // would double the peak memory of a whole-array read.
    let in_place = array.is_c_contiguous()
        && array.byte_order() == ByteOrder::Little
        && array.buffer().is_host_accessible();
    let (borrowed, copied);
    let host: &[u8] = if in_place {
        borrowed = array.buffer().as_host_bytes()?;
        &borrowed[array.offset()..array.offset() + array.nbytes()]
    } else {
        copied = match ByteOrder::native() {
            ByteOrder::Little => array.to_native_bytes()?,
            ByteOrder::Big => array.to_byte_order(ByteOrder::Little)?.to_native_bytes()?,
        };
        &copied
    };
    let shape = match array.shape() {
        [] => "()".to_string(),
        [n] => format!("({n},)"),
        dims => format!(
            "({})",
            dims.iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let dict = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {shape}, }}",
        array.dtype().npy_descr()
    );
    // Header padded with spaces and a newline so the data starts 64-byte aligned.
    let unpadded = MAGIC.len() + 2 + 2 + dict.len() + 1;
    let pad = (64 - unpadded % 64) % 64;
    let header = format!("{dict}{}\n", " ".repeat(pad));
    let (version, len_bytes): ([u8; 2], Vec<u8>) = match u16::try_from(header.len()) {
        Ok(n) => ([1, 0], n.to_le_bytes().to_vec()),
        Err(_) => ([2, 0], (header.len() as u32).to_le_bytes().to_vec()),
    };
    let file = std::fs::File::create(path).map_err(|e| io_err(path, e))?;
    let mut w = std::io::BufWriter::with_capacity(1 << 20, file);
    let write_all = |w: &mut std::io::BufWriter<std::fs::File>| -> std::io::Result<()> {
        w.write_all(MAGIC)?;
        w.write_all(&version)?;
        w.write_all(&len_bytes)?;
        w.write_all(header.as_bytes())?;
        w.write_all(host)?;
        w.flush()
    };
    write_all(&mut w).map_err(|e| io_err(path, e))
}

/// Reads a `.npy` file into a host NDBuffer (byte order as stored, C or F order as stored).
///
/// ```
/// let a = zarrbuf::NDBuffer::from_vec(vec![1u16, 2, 3], &[3])?;
/// let path = std::env::temp_dir().join("zarrbuf-doc-read.npy");
/// zarrbuf::npy::write(&path, &a)?;
/// assert_eq!(zarrbuf::npy::read(&path)?.to_vec::<u16>()?, vec![1, 2, 3]);
/// # Ok::<(), zarrbuf::Error>(())
/// ```
pub fn read(path: &Path) -> Result<NDBuffer> {
    let mut file = std::fs::File::open(path).map_err(|e| io_err(path, e))?;
    let mut data = Vec::new();
    file.read_to_end(&mut data).map_err(|e| io_err(path, e))?;
    let bad = |what: &str| {
        Error::InvalidArgument(format!(
            "{} is not a valid .npy file: {what}",
            path.display()
        ))
    };
    if data.len() < 10 || &data[..6] != MAGIC {
        return Err(bad("missing the \\x93NUMPY magic"));
    }
    let (header_len, start) = match data[6] {
        1 => (u16::from_le_bytes([data[8], data[9]]) as usize, 10),
        2 | 3 if data.len() >= 12 => (
            u32::from_le_bytes([data[8], data[9], data[10], data[11]]) as usize,
            12,
        ),
        v => return Err(bad(&format!("unsupported format version {v}"))),
    };
    let header = data
        .get(start..start + header_len)
        .and_then(|h| std::str::from_utf8(h).ok())
        .ok_or_else(|| bad("truncated header"))?
        .to_string();
    let field = |key: &str| -> Option<&str> {
        let at = header.find(&format!("'{key}'"))? + key.len() + 2;
        let rest = header[at..].trim_start().strip_prefix(':')?.trim_start();
        Some(rest)
    };
    let descr = field("descr")
        .and_then(|r| r.strip_prefix('\''))
        .and_then(|r| r.split('\'').next())
        .ok_or_else(|| bad("no 'descr'"))?;
    let fortran = field("fortran_order")
        .map(|r| r.starts_with("True"))
        .ok_or_else(|| bad("no 'fortran_order'"))?;
    let shape_text = field("shape")
        .and_then(|r| r.strip_prefix('('))
        .and_then(|r| r.split(')').next())
        .ok_or_else(|| bad("no 'shape'"))?;
    let shape = shape_text
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.trim_end_matches('L').parse::<usize>())
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|_| bad("bad 'shape'"))?;
    let (dtype, order) =
        parse_descr(descr).ok_or_else(|| bad(&format!("unsupported dtype {descr:?}")))?;
    let body = data.split_off(start + header_len);
    let expected = shape
        .iter()
        .try_fold(dtype.size(), |n, &d| n.checked_mul(d))
        .ok_or_else(|| bad(&format!("shape {shape:?} of {descr} is too large")))?;
    if body.len() != expected {
        return Err(bad(&format!(
            "{} data bytes for shape {shape:?} of {descr}, expected {expected}",
            body.len(),
        )));
    }
    let layout = if fortran { Order::F } else { Order::C };
    let strides = layout.strides(&shape, dtype.size());
    NDBuffer::from_parts(Buffer::from_vec(body), dtype, &shape, &strides, 0, order)
}

fn parse_descr(descr: &str) -> Option<(DataType, ByteOrder)> {
    // The first character is the byte order; anything else (empty, non-ASCII) is not a descr.
    let (endian, code) = descr.split_at_checked(1)?;
    let order = match endian {
        "<" | "|" => ByteOrder::Little,
        "=" => ByteOrder::native(),
        ">" => ByteOrder::Big,
        _ => return None,
    };
    let dtype = DataType::from_numpy_code(code)?;
    Some((dtype, order))
}
