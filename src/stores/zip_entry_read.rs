//! Reading one zip entry the way zarr-python's zipfile does, and no further: its local
//! header must agree with the central directory (name, method, and CRC-32 and sizes unless a
//! data descriptor carries them), its data must end before the next entry begins, and the
//! bytes it yields must match the central directory's CRC-32.
//!
//! A compressed entry (deflate, bzip2, zstd) is inflated whole, by rc-zip's decoders, into
//! a buffer that grows up to its declared size plus one byte: a decoder that writes the
//! extra byte, or
//! that stops making progress before the stream ends (a bzip2 entry whose declared sizes lie
//! kept rc-zip's own loop spinning forever), is an error at once. A stored entry is read in
//! place; its CRC-32 needs every byte of it, so a ranged read of a stored entry (a shard's
//! inner chunk) first checks the whole entry once, streaming, and later ranged reads of
//! that entry trust the check (`zip_store.rs` remembers it).

use super::zip_index::{FileEntry, LOCAL_HEADER_BYTES};
use rc_zip::fsm::{EntryFsm, FsmResult};
use rc_zip::parse::Method;
use std::fs::File;
use std::os::unix::fs::FileExt;

/// A data descriptor follows the data (general-purpose flag bit 3).
const HAS_DATA_DESCRIPTOR: u16 = 1 << 3;

/// How many rounds in a row the inflater may make no progress before the entry is refused.
const IDLE_ROUNDS: u32 = 4;

/// What a stored entry's CRC-32 is computed over at a time.
const CRC_PIECE: usize = 1 << 20;

/// The output of an inflate starts at most this large and doubles as the decoder fills it
/// (up to the declared size and one byte), so a size the headers declare is never allocated
/// before the data produces it.
const FIRST_OUTPUT: usize = 1 << 20;

/// Checks `fe`'s local header against its central directory entry and gives the offset of
/// its data. The error says what disagrees.
pub(crate) fn data_offset(file: &File, fe: &FileEntry) -> Result<u64, String> {
    let e = &fe.entry;
    let at = e.header_offset;
    let mut fixed = [0u8; LOCAL_HEADER_BYTES as usize];
    file.read_exact_at(&mut fixed, at)
        .map_err(|err| format!("cannot read its local header at offset {at}: {err}"))?;
    if &fixed[..4] != b"PK\x03\x04" {
        return Err(format!(
            "has no local header at offset {at}, where the central directory puts it"
        ));
    }
    let u16_at = |i: usize| u16::from_le_bytes([fixed[i], fixed[i + 1]]);
    let u32_at =
        |i: usize| u32::from_le_bytes([fixed[i], fixed[i + 1], fixed[i + 2], fixed[i + 3]]);
    let (name_len, extra_len) = (u64::from(u16_at(26)), u64::from(u16_at(28)));
    let data = at + LOCAL_HEADER_BYTES + name_len + extra_len;
    let end = data.saturating_add(e.compressed_size);
    if end > fe.limit {
        return Err(format!(
            "declares data at bytes {data}..{end}, past where the next entry begins ({}): \
             it would read another entry's bytes",
            fe.limit
        ));
    }
    let mut tail = vec![0u8; usize::from(u16_at(26)) + usize::from(u16_at(28))];
    file.read_exact_at(&mut tail, at + LOCAL_HEADER_BYTES)
        .map_err(|err| format!("cannot read its local header at offset {at}: {err}"))?;
    let (name, extra) = tail.split_at(usize::from(u16_at(26)));
    let mismatch = |what: &str| {
        format!("has a local header whose {what} disagrees with the central directory")
    };
    if !same_name(name, &e.name) {
        return Err(mismatch(&format!(
            "name ({:?})",
            String::from_utf8_lossy(name)
        )));
    }
    if Method::from(u16_at(8)) != e.method {
        return Err(mismatch("compression method"));
    }
    if u16_at(6) & HAS_DATA_DESCRIPTOR == 0 {
        if u32_at(14) != e.crc32 {
            return Err(mismatch("CRC-32"));
        }
        let sizes = local_sizes(u32_at(18), u32_at(22), extra);
        if sizes != Some((e.compressed_size, e.uncompressed_size)) {
            return Err(mismatch("sizes"));
        }
    }
    Ok(data)
}

/// Whether a local header's name bytes are the central directory's (decoded) name: the
/// same UTF-8, or, for a name in a legacy code page, any non-UTF-8 bytes where the central
/// name is not plain ASCII (rc-zip decoded it from that code page).
fn same_name(local: &[u8], central: &str) -> bool {
    match std::str::from_utf8(local) {
        Ok(s) => s == central,
        Err(_) => !central.is_ascii(),
    }
}

/// A local header's (compressed, uncompressed) sizes: the 32-bit fields, or the zip64
/// extra field's where a field is saturated.
fn local_sizes(compressed: u32, uncompressed: u32, mut extra: &[u8]) -> Option<(u64, u64)> {
    if compressed != u32::MAX && uncompressed != u32::MAX {
        return Some((u64::from(compressed), u64::from(uncompressed)));
    }
    while extra.len() >= 4 {
        let id = u16::from_le_bytes([extra[0], extra[1]]);
        let len = usize::from(u16::from_le_bytes([extra[2], extra[3]]));
        let body = extra.get(4..4 + len)?;
        if id == 1 && body.len() >= 16 {
            let u = u64::from_le_bytes(body[..8].try_into().ok()?);
            let c = u64::from_le_bytes(body[8..16].try_into().ok()?);
            return Some((c, u));
        }
        extra = &extra[4 + len..];
    }
    None
}

/// Compares the CRC-32 `actual` of an entry's bytes with the central directory's.
fn check_crc(fe: &FileEntry, actual: u32) -> Result<(), String> {
    let expected = fe.entry.crc32;
    if actual == expected {
        return Ok(());
    }
    Err(crc_mismatch(expected, actual))
}

/// The words for an entry whose bytes give CRC-32 `actual` where `expected` was declared.
fn crc_mismatch(expected: u32, actual: u32) -> String {
    format!(
        "fails its CRC-32 check (its headers say {expected:08x}, its bytes give {actual:08x}): \
         the entry is damaged; restore the zip file from a good copy"
    )
}

/// The whole of stored entry `fe`, whose data starts at `data`, checked against its CRC-32.
pub(crate) fn read_stored(file: &File, fe: &FileEntry, data: u64) -> Result<Vec<u8>, String> {
    let n = stored_len(fe)?;
    let mut out = vec![0u8; n];
    file.read_exact_at(&mut out, data)
        .map_err(|err| format!("cannot be read: {err}"))?;
    check_crc(fe, crc32fast::hash(&out))?;
    Ok(out)
}

/// Checks stored entry `fe` (data at `data`) against its CRC-32, a piece at a time.
pub(crate) fn verify_stored(file: &File, fe: &FileEntry, data: u64) -> Result<(), String> {
    let n = stored_len(fe)?;
    let mut piece = vec![0u8; n.min(CRC_PIECE)];
    let mut hasher = crc32fast::Hasher::new();
    let mut done = 0usize;
    while done < n {
        let take = (n - done).min(piece.len());
        file.read_exact_at(&mut piece[..take], data + done as u64)
            .map_err(|err| format!("cannot be read: {err}"))?;
        hasher.update(&piece[..take]);
        done += take;
    }
    check_crc(fe, hasher.finalize())
}

/// A stored entry's length: its sizes must agree (nothing inflates a stored entry).
fn stored_len(fe: &FileEntry) -> Result<usize, String> {
    let e = &fe.entry;
    if e.compressed_size != e.uncompressed_size {
        return Err(format!(
            "is stored uncompressed but declares {} stored bytes and {} data bytes: the \
             central directory is damaged",
            e.compressed_size, e.uncompressed_size
        ));
    }
    usize::try_from(e.uncompressed_size)
        .map_err(|_| "does not fit this machine's address space".to_string())
}

/// The whole of compressed entry `fe`, inflated to exactly its declared size and checked
/// against its CRC-32 (see the module docs). The caller has bounded the declared size.
pub(crate) fn inflate(file: &File, fe: &FileEntry) -> Result<Vec<u8>, String> {
    let e = &fe.entry;
    let declared = usize::try_from(e.uncompressed_size)
        .ok()
        .and_then(|n| n.checked_add(1).map(|_| n))
        .ok_or_else(|| "does not fit this machine's address space".to_string())?;
    let method = e.method;
    let mut out = vec![0u8; (declared + 1).min(FIRST_OUTPUT)];
    let mut written = 0usize;
    let mut offset = e.header_offset;
    let mut fsm = EntryFsm::new(Some(e.clone()), None);
    let mut idle = 0;
    loop {
        let mut fed = 0;
        if fsm.wants_read() {
            let space = fsm.space();
            let room = fe.limit.saturating_sub(offset);
            let n = usize::try_from(room).map_or(space.len(), |r| r.min(space.len()));
            file.read_exact_at(&mut space[..n], offset)
                .map_err(|err| format!("cannot be read: {err}"))?;
            fed = fsm.fill(n);
            offset += fed as u64;
        }
        if written == out.len() {
            out.resize((2 * out.len()).min(declared + 1), 0);
        }
        match fsm.process(&mut out[written..]) {
            Ok(FsmResult::Continue((next, outcome))) => {
                written += outcome.bytes_written;
                if written > declared {
                    return Err(format!(
                        "inflates ({method:?}) to more than the {declared} bytes its central \
                         directory declares: the zip file is damaged or crafted"
                    ));
                }
                let progress = fed + outcome.bytes_read + outcome.bytes_written;
                idle = if progress == 0 { idle + 1 } else { 0 };
                if idle >= IDLE_ROUNDS {
                    return Err(format!(
                        "stops inflating ({method:?}) after {written} of its {declared} declared \
                         bytes, before its compressed data ends where the central directory \
                         says: the zip file is damaged or crafted"
                    ));
                }
                fsm = next;
            }
            Ok(FsmResult::Done(_)) => break,
            Err(rc_zip::Error::Format(rc_zip::error::FormatError::WrongChecksum {
                actual,
                ..
            })) => return Err(crc_mismatch(fe.entry.crc32, actual)),
            Err(err) => return Err(format!("cannot be inflated ({method:?}): {err}")),
        }
    }
    if written != declared {
        return Err(format!(
            "inflates to {written} bytes, not the {declared} its central directory declares"
        ));
    }
    out.truncate(declared);
    check_crc(fe, crc32fast::hash(&out))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zip64_local_sizes_come_from_the_extra_field() {
        assert_eq!(local_sizes(3, 4, &[]), Some((3, 4)));
        let mut extra = vec![9, 0, 2, 0, 0, 0];
        extra.extend_from_slice(&[1, 0, 16, 0]);
        extra.extend_from_slice(&7u64.to_le_bytes());
        extra.extend_from_slice(&5u64.to_le_bytes());
        assert_eq!(local_sizes(u32::MAX, u32::MAX, &extra), Some((5, 7)));
        assert_eq!(local_sizes(u32::MAX, 4, &[1, 0, 2]), None);
    }

    #[test]
    fn names_match_by_bytes_or_legacy_code_page() {
        assert!(same_name(b"a/c/0", "a/c/0"));
        assert!(!same_name(b"a/c/1", "a/c/0"));
        assert!(same_name(&[0x82], "\u{e9}"));
        assert!(!same_name(&[0x82], "x"));
    }
}
