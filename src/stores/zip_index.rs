//! A zip file's central directory, read once with rc-zip and checked before any entry is
//! served: every entry's bytes (its local header and its compressed data, as the central
//! directory declares them) lie inside the file and apart from every other entry's, so no
//! key can be made to read another key's bytes. Where each entry's bytes must end (the next
//! entry's local header, or the end of the file) is kept for the read, which checks the
//! local header against the central directory (`zip_entry_read.rs`).

use rc_zip::fsm::{ArchiveFsm, FsmResult};
use rc_zip::parse::{Entry, EntryKind};
use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;

/// The fixed part of a local file header: signature to extra-field length.
pub(crate) const LOCAL_HEADER_BYTES: u64 = 30;

/// One file entry of the archive: what the central directory says of it, and the offset its
/// bytes must end by (the next local header, or the end of the file).
#[derive(Clone)]
pub(crate) struct FileEntry {
    pub(crate) entry: Entry,
    pub(crate) limit: u64,
}

/// A name in the archive: a file, or a folder (an explicit directory entry).
#[derive(Clone)]
pub(crate) enum Node {
    File(Box<FileEntry>),
    Folder,
}

/// The archive's names (full names, `/`-separated) and what each is.
pub(crate) type Names = BTreeMap<String, Node>;

/// Reads and checks the central directory of `file` (`size` bytes long). The error is a
/// sentence saying what is wrong with the archive.
pub(crate) fn read_index(file: &File, size: u64) -> Result<Names, String> {
    let archive = parse(file, size)?;
    let entries: Vec<&Entry> = archive.entries().collect();
    let limits = check_extents(&entries, size)?;
    let mut names = Names::new();
    for (entry, limit) in entries.into_iter().zip(limits) {
        let node = match entry.kind() {
            EntryKind::File => Node::File(Box::new(FileEntry {
                entry: entry.clone(),
                limit,
            })),
            EntryKind::Directory => Node::Folder,
            // Links are not followed (as zarrs_zip and zarr-python's ZipStore do not).
            EntryKind::Symlink => continue,
        };
        // A name written twice (zarr-python's ZipStore appends a key it rewrites): the
        // last entry is the key's value, as Python's zipfile reads it.
        names.insert(entry.name.clone(), node);
    }
    Ok(names)
}

/// The archive's central directory, read with rc-zip's state machine.
fn parse(file: &File, size: u64) -> Result<rc_zip::parse::Archive, String> {
    let mut fsm = ArchiveFsm::new(size);
    loop {
        if let Some(offset) = fsm.wants_read() {
            let space = fsm.space();
            let want = (space.len() as u64).min(size.saturating_sub(offset));
            // `want` is at most `space.len()`, a usize.
            let want = usize::try_from(want).unwrap_or(space.len());
            if want == 0 {
                // rc-zip asks for bytes past the end (a length field in the directory runs
                // beyond the file) and would ask again forever: nothing more will come.
                return Err(format!(
                    "its central directory runs past the end of the file (an entry's name, extra field or \
                     comment is longer than the {size} bytes the file holds): the file is cut \
                     short or damaged"
                ));
            }
            file.read_exact_at(&mut space[..want], offset)
                .map_err(|e| format!("cannot read the zip file: {e}"))?;
            fsm.fill(want);
        }
        fsm = match fsm.process() {
            Ok(FsmResult::Continue(next)) => next,
            Ok(FsmResult::Done(archive)) => return Ok(archive),
            Err(e) => return Err(e.to_string()),
        };
    }
}

/// Where each entry's bytes begin and end at least: its local header's fixed part and its
/// compressed data (the name and extra field, known only from the local header, are checked
/// on read).
fn least_extent(entry: &Entry) -> (u64, u64) {
    let data = match entry.kind() {
        EntryKind::File => entry.compressed_size,
        _ => 0,
    };
    let end = entry
        .header_offset
        .saturating_add(LOCAL_HEADER_BYTES)
        .saturating_add(data);
    (entry.header_offset, end)
}

/// Checks that every entry's least extent lies inside the file and apart from every other
/// entry's, and gives each entry (in `entries`' order) the offset its bytes must end by.
fn check_extents(entries: &[&Entry], size: u64) -> Result<Vec<u64>, String> {
    let mut order: Vec<usize> = (0..entries.len()).collect();
    order.sort_by_key(|&i| entries[i].header_offset);
    let mut limits = vec![size; entries.len()];
    for (n, &i) in order.iter().enumerate() {
        let (start, end) = least_extent(entries[i]);
        if end > size {
            return Err(format!(
                "its entry {:?} declares bytes {start}..{end}, past the end of the file \
                 ({size} bytes): the file is cut short or its central directory is damaged",
                entries[i].name
            ));
        }
        if let Some(&j) = order.get(n + 1) {
            let next = entries[j].header_offset;
            if end > next {
                return Err(format!(
                    "its entries {:?} and {:?} claim the same bytes (the first declares \
                     {start}..{end}, the second starts at {next}): one key would read another's \
                     data; the central directory is damaged or crafted",
                    entries[i].name, entries[j].name
                ));
            }
            limits[i] = next;
        }
    }
    Ok(limits)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, header_offset: u64, compressed_size: u64) -> Entry {
        let mut e = header_entry(name);
        e.header_offset = header_offset;
        e.compressed_size = compressed_size;
        e.uncompressed_size = compressed_size;
        e
    }

    /// An entry as rc-zip makes one from a local header (`Entry` has no other public
    /// constructor): its state machine is driven just far enough to parse the header.
    fn header_entry(name: &str) -> Entry {
        let mut bytes = b"PK\x03\x04\x14\x00\x00\x00\x00\x00".to_vec();
        bytes.extend_from_slice(&[0; 16]);
        bytes.extend_from_slice(&u16::try_from(name.len()).unwrap().to_le_bytes());
        bytes.extend_from_slice(&[0, 0]);
        bytes.extend_from_slice(name.as_bytes());
        let mut fsm = rc_zip::fsm::EntryFsm::new(None, None);
        fsm.space()[..bytes.len()].copy_from_slice(&bytes);
        fsm.fill(bytes.len());
        fsm.process_till_header().unwrap().unwrap().clone()
    }

    #[test]
    fn apart_entries_get_the_next_header_as_their_limit() {
        let a = entry("a", 0, 10);
        let b = entry("b", 40, 5);
        let limits = check_extents(&[&b, &a], 100).unwrap();
        assert_eq!(limits, vec![100, 40]);
    }

    #[test]
    fn shared_or_outside_bytes_are_refused() {
        let a = entry("a", 0, 10);
        let b = entry("b", 20, 5);
        let err = check_extents(&[&a, &b], 100).unwrap_err();
        assert!(err.contains("\"a\"") && err.contains("\"b\""), "{err}");
        let same = entry("c", 0, 10);
        assert!(check_extents(&[&a, &same], 100).is_err());
        let err = check_extents(&[&entry("d", 90, 50)], 100).unwrap_err();
        assert!(err.contains("past the end"), "{err}");
    }
}
