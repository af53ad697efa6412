//! The encoded layout of numcodecs' `VLenUTF8` / `VLenBytes` (zarr v3's `vlen-utf8` and
//! `vlen-bytes` codecs, v2's filters of those names): a little-endian `u32` element count,
//! then for each element in C order a little-endian `u32` byte length and that many bytes.
//!
//! [`scan`] checks a decoded chunk in one pass and returns where each element's bytes start;
//! it allocates nothing before the count is known to fit the chunk's bytes (every element
//! takes at least its 4-byte length prefix), so a hostile count cannot size an allocation.

use crate::data_types::VarLenKind;

/// Bytes of the element count and of each length prefix.
const PREFIX: usize = 4;

/// Where each element of a checked chunk starts, in C order of the chunk. An element's
/// length is the `u32` just before its start (see [`VlenIndex::len_of`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct VlenIndex {
    starts: Vec<usize>,
}

impl VlenIndex {
    /// The number of elements.
    #[cfg(test)]
    pub(crate) fn count(&self) -> usize {
        self.starts.len()
    }

    /// The byte range of element `i` in the chunk the index was made from.
    ///
    /// # Panics
    ///
    /// When `i` is out of range or `bytes` is not the chunk [`scan`] checked.
    pub(crate) fn range(&self, bytes: &[u8], i: usize) -> std::ops::Range<usize> {
        let start = self.starts[i];
        start..start + Self::len_of(bytes, start)
    }

    /// The length prefix in front of an element starting at `start` (checked by [`scan`]).
    fn len_of(bytes: &[u8], start: usize) -> usize {
        let mut raw = [0u8; PREFIX];
        raw.copy_from_slice(&bytes[start - PREFIX..start]);
        u32::from_le_bytes(raw) as usize
    }
}

fn read_u32(bytes: &[u8], at: usize) -> Option<u32> {
    let raw: [u8; PREFIX] = bytes.get(at..at.checked_add(PREFIX)?)?.try_into().ok()?;
    Some(u32::from_le_bytes(raw))
}

/// Checks a decoded vlen chunk that must hold `expected` elements of `kind` and returns the
/// start of each element's bytes. The error says what is wrong, without naming the chunk
/// (the caller does): a chunk too short for its count, a count other than `expected`, a
/// count that cannot fit the chunk's bytes, a length prefix or an element past the end,
/// bytes after the last element, or (for [`VarLenKind::Utf8`]) an element that is not
/// UTF-8.
pub(crate) fn scan(bytes: &[u8], expected: usize, kind: VarLenKind) -> Result<VlenIndex, String> {
    let len = bytes.len();
    let Some(count) = read_u32(bytes, 0) else {
        return Err(format!(
            "its decoded bytes ({len}) are too short for the 4-byte element count of the \
             variable-length encoding; the chunk is damaged"
        ));
    };
    let count = count as usize;
    if count != expected {
        return Err(format!(
            "its variable-length encoding says it holds {count} elements, but the chunk has \
             {expected}; the chunk is damaged or belongs to another array"
        ));
    }
    // Every element takes at least its length prefix: a count that cannot fit is refused
    // before anything is allocated for it.
    let least = count
        .checked_mul(PREFIX)
        .and_then(|n| n.checked_add(PREFIX))
        .filter(|&n| n <= len);
    if least.is_none() {
        return Err(format!(
            "its variable-length encoding holds {count} elements, which take at least {} \
             bytes, but the chunk decodes to {len}; the chunk is truncated or damaged",
            (count as u128) * PREFIX as u128 + PREFIX as u128
        ));
    }
    let mut starts = Vec::with_capacity(count);
    let mut at = PREFIX;
    for i in 0..count {
        let Some(n) = read_u32(bytes, at) else {
            return Err(format!(
                "the length prefix of element {i} (at byte {at}) runs past the end of the \
                 chunk's {len} decoded bytes; the chunk is truncated or damaged"
            ));
        };
        let start = at + PREFIX;
        let end = start
            .checked_add(n as usize)
            .filter(|&e| e <= len)
            .ok_or_else(|| {
                format!(
                    "element {i} claims {n} bytes at byte {start}, but only {} of the chunk's \
                     {len} decoded bytes remain; the chunk is truncated or damaged",
                    len.saturating_sub(start)
                )
            })?;
        if kind == VarLenKind::Utf8
            && let Err(e) = std::str::from_utf8(&bytes[start..end])
        {
            return Err(format!(
                "element {i} is not valid UTF-8 ({e}); the array's data type is string, \
                 whose elements must be UTF-8"
            ));
        }
        starts.push(start);
        at = end;
    }
    if at != len {
        return Err(format!(
            "{} bytes follow its last element (the variable-length encoding ends at byte \
             {at} of {len}); the chunk is damaged",
            len - at
        ));
    }
    Ok(VlenIndex { starts })
}

/// Encodes elements in the vlen layout (for tests and fixtures written by hand).
#[cfg(test)]
pub(crate) fn encode<T: AsRef<[u8]>>(items: &[T]) -> Vec<u8> {
    let mut out = (items.len() as u32).to_le_bytes().to_vec();
    for item in items {
        out.extend_from_slice(&(item.as_ref().len() as u32).to_le_bytes());
        out.extend_from_slice(item.as_ref());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn elements(bytes: &[u8], idx: &VlenIndex) -> Vec<Vec<u8>> {
        (0..idx.count())
            .map(|i| bytes[idx.range(bytes, i)].to_vec())
            .collect()
    }

    #[test]
    fn round_trip() {
        let items: [&[u8]; 4] = [b"abc", b"", "αβ".as_bytes(), b"x"];
        let enc = encode(&items);
        let idx = scan(&enc, 4, VarLenKind::Utf8).unwrap();
        assert_eq!(elements(&enc, &idx), items.map(|b| b.to_vec()));
        let bin = encode(&[&b"\0\xff"[..]]);
        let idx = scan(&bin, 1, VarLenKind::Bytes).unwrap();
        assert_eq!(elements(&bin, &idx), [b"\0\xff".to_vec()]);
    }

    #[test]
    fn malformations() {
        let ok = encode(&["ab", "c"]);
        let err = |b: &[u8], n: usize, k| scan(b, n, k).unwrap_err();
        assert!(err(&ok[..3], 2, VarLenKind::Bytes).contains("too short"));
        assert!(err(&ok, 3, VarLenKind::Bytes).contains("holds 2 elements"));
        // A count of 2^32-1 on a 10-byte chunk: refused before anything is allocated.
        let mut huge = u32::MAX.to_le_bytes().to_vec();
        huge.extend_from_slice(&[0; 6]);
        assert!(err(&huge, u32::MAX as usize, VarLenKind::Bytes).contains("at least"));
        // The second element's prefix cut short.
        assert!(err(&ok[..ok.len() - 3], 2, VarLenKind::Bytes).contains("length prefix"));
        // The last element's bytes cut short.
        assert!(err(&ok[..ok.len() - 1], 2, VarLenKind::Bytes).contains("claims 1 bytes"));
        let mut trailing = ok.clone();
        trailing.push(0);
        assert!(err(&trailing, 2, VarLenKind::Bytes).contains("1 bytes follow"));
        let bad = encode(&[&b"\xc3"[..]]);
        assert!(err(&bad, 1, VarLenKind::Utf8).contains("UTF-8"));
        assert!(scan(&bad, 1, VarLenKind::Bytes).is_ok());
        // A length prefix that overflows the position.
        let mut wrap = 1u32.to_le_bytes().to_vec();
        wrap.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(err(&wrap, 1, VarLenKind::Bytes).contains("claims"));
    }
}
