//! Variable-length strings and bytes as numpy's fixed-width types: `<U{n}` (UTF-32, the
//! longest string's characters) and `|S{n}` (the longest byte string's bytes), padded with
//! NULs — the form `.npy` files hold them in without pickling.

use super::{Buffer, NDBuffer, VarLenBuffer};
use crate::data_types::{DataType, Order, VarLenKind};
use crate::errors::{Error, Result};

/// The numpy fixed-width type that holds every element of `data`: `<U{n}`
/// ([`DataType::FixedUtf32`]) for strings, `n` the most characters of any element, or `|S{n}`
/// ([`DataType::FixedBytes`]) for byte strings, `n` the most bytes; `n` is at least 1 (numpy
/// has no zero-width type). Host memory only (copy device buffers with `to_host` first).
///
/// numpy strips trailing NULs when it reads these types, so elements that end in NUL do
/// not come back exactly.
///
/// ```
/// use zarrbuf::{DataType, VarLenBuffer};
/// let v = VarLenBuffer::from_strings(vec![3], ["a", "βγδ", ""])?;
/// assert_eq!(zarrbuf::npy::fixed_width_type(&v)?, DataType::FixedUtf32(3));
/// let b = VarLenBuffer::from_bytes_iter(vec![1], [&b""[..]])?;
/// assert_eq!(zarrbuf::npy::fixed_width_type(&b)?, DataType::FixedBytes(1));
/// # Ok::<(), zarrbuf::Error>(())
/// ```
pub fn fixed_width_type(data: &VarLenBuffer) -> Result<DataType> {
    let (offsets, values) = host_parts(data)?;
    let mut widest = 1usize;
    for w in offsets.windows(2) {
        let bytes = &values[w[0]..w[1]];
        let n = match data.kind() {
            VarLenKind::Utf8 => utf8_chars(bytes),
            VarLenKind::Bytes => bytes.len(),
        };
        widest = widest.max(n);
    }
    Ok(match data.kind() {
        VarLenKind::Utf8 => DataType::FixedUtf32(widest),
        VarLenKind::Bytes => DataType::FixedBytes(widest),
    })
}

/// `data` as an [`NDBuffer`] of its [`fixed_width_type`] in host memory (C order), ready for
/// [`npy::write`](crate::npy::write). It takes `len() × width` bytes (× 4 for strings):
/// check [`fixed_width_type`]'s size first when the elements' lengths vary widely.
///
/// ```
/// use zarrbuf::VarLenBuffer;
/// let v = VarLenBuffer::from_strings(vec![2], ["ab", "c"])?;
/// let fixed = zarrbuf::npy::to_fixed_width(&v)?;
/// assert_eq!(fixed.shape(), &[2]);
/// assert_eq!(fixed.dtype(), zarrbuf::DataType::FixedUtf32(2));
/// let units: Vec<u32> = fixed.to_native_bytes()?.chunks(4)
///     .map(|c| u32::from_ne_bytes(c.try_into().unwrap())).collect();
/// assert_eq!(units, [97, 98, 99, 0]);
/// # Ok::<(), zarrbuf::Error>(())
/// ```
pub fn to_fixed_width(data: &VarLenBuffer) -> Result<NDBuffer> {
    let dtype = fixed_width_type(data)?;
    let (offsets, values) = host_parts(data)?;
    let n = offsets.len() - 1;
    let bytes = n.checked_mul(dtype.size()).ok_or_else(|| {
        Error::InvalidSize(format!(
            "{n} elements of {dtype} are more bytes than this machine can address"
        ))
    })?;
    let mut out = vec![0u8; bytes];
    for (i, w) in offsets.windows(2).enumerate() {
        let element = &values[w[0]..w[1]];
        let slot = &mut out[i * dtype.size()..(i + 1) * dtype.size()];
        match data.kind() {
            VarLenKind::Bytes => slot[..element.len()].copy_from_slice(element),
            VarLenKind::Utf8 => {
                let text = std::str::from_utf8(element).map_err(|e| {
                    Error::DataType(format!("element {i} is not valid UTF-8 ({e})"))
                })?;
                for (c, unit) in text.chars().zip(slot.chunks_exact_mut(4)) {
                    unit.copy_from_slice(&(c as u32).to_ne_bytes());
                }
            }
        }
    }
    let shape: Vec<usize> = data.shape().iter().map(|&d| d as usize).collect();
    NDBuffer::from_buffer(Buffer::from_vec(out), dtype, &shape, Order::C)
}

/// The number of characters of UTF-8 bytes (bytes that start no character not counted).
fn utf8_chars(bytes: &[u8]) -> usize {
    bytes.iter().filter(|&&b| (b & 0xC0) != 0x80).count()
}

/// The offsets (as `usize`, checked against the values) and the values of a host buffer.
fn host_parts(data: &VarLenBuffer) -> Result<(Vec<usize>, super::HostBytes<'_>)> {
    if !data.offsets().is_host_accessible() {
        return Err(Error::NotHostAccessible(format!(
            "variable-length elements in {}; copy them to the host (to_host) first",
            data.memory()
        )));
    }
    let raw = data.offsets().as_host_bytes()?;
    let values = data.values().as_host_bytes()?;
    let offsets: Vec<usize> = raw
        .chunks_exact(8)
        .map(|c| i64::from_le_bytes(c.try_into().unwrap_or_default()).max(0) as usize)
        .collect();
    if offsets.is_empty()
        || offsets.windows(2).any(|w| w[1] < w[0])
        || offsets.last().is_some_and(|&l| l > values.len())
    {
        return Err(Error::InvalidArgument(
            "variable-length offsets that do not fit their values".into(),
        ));
    }
    Ok((offsets, values))
}
