//! Zip files whose bytes lie: a flipped byte in a stored entry (its CRC-32), central
//! directory entries that point at another entry's bytes or disagree with their local
//! header, and compressed entries (bzip2, deflate) whose declared sizes are wrong. Each is
//! an error naming the entry, from a read, a ranged read and `check`, and none hangs.

use std::io::Write;
use zarrbuf::ArrayReadExt;
use zarrs::storage::byte_range::ByteRange;

const STORED: u16 = 0;
const DEFLATE: u16 = 8;
const BZIP2: u16 = 12;

/// One entry of a zip file to write: its name, method, the bytes on disk, and the CRC-32
/// and uncompressed size its headers declare.
#[derive(Clone)]
struct Item {
    name: String,
    method: u16,
    data: Vec<u8>,
    crc: u32,
    size: u64,
}

impl Item {
    fn stored(name: &str, data: &[u8]) -> Item {
        Item {
            name: name.into(),
            method: STORED,
            data: data.to_vec(),
            crc: crc32fast::hash(data),
            size: data.len() as u64,
        }
    }

    fn bzip2(name: &str, plain: &[u8]) -> Item {
        let mut enc = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::best());
        enc.write_all(plain).unwrap();
        Item {
            method: BZIP2,
            data: enc.finish().unwrap(),
            ..Item::stored(name, plain)
        }
    }

    fn deflate(name: &str, plain: &[u8]) -> Item {
        let mut enc = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::best());
        enc.write_all(plain).unwrap();
        Item {
            method: DEFLATE,
            data: enc.finish().unwrap(),
            ..Item::stored(name, plain)
        }
    }
}

/// A zip file of `items`, and where each one's central directory header begins (so a test
/// can change what the central directory says). Local headers say what the items say.
fn zip_bytes(items: &[Item]) -> (Vec<u8>, Vec<usize>) {
    let mut out = Vec::new();
    let mut offsets = Vec::new();
    let header = |out: &mut Vec<u8>, it: &Item| {
        out.extend_from_slice(&[20, 0, 0, 0]);
        out.extend_from_slice(&it.method.to_le_bytes());
        out.extend_from_slice(&[0, 0, 0x21, 0]);
        out.extend_from_slice(&it.crc.to_le_bytes());
        out.extend_from_slice(&(it.data.len() as u32).to_le_bytes());
        out.extend_from_slice(&(it.size as u32).to_le_bytes());
        out.extend_from_slice(&(it.name.len() as u16).to_le_bytes());
        out.extend_from_slice(&[0, 0]);
    };
    for it in items {
        offsets.push(out.len() as u32);
        out.extend_from_slice(b"PK\x03\x04");
        header(&mut out, it);
        out.extend_from_slice(it.name.as_bytes());
        out.extend_from_slice(&it.data);
    }
    let central = out.len();
    let mut central_at = Vec::new();
    for (it, at) in items.iter().zip(&offsets) {
        central_at.push(out.len());
        out.extend_from_slice(b"PK\x01\x02\x14\x03");
        header(&mut out, it);
        out.extend_from_slice(&[0; 6]);
        out.extend_from_slice(&[0, 0, 0xa4, 0x81]);
        out.extend_from_slice(&at.to_le_bytes());
        out.extend_from_slice(it.name.as_bytes());
    }
    let size = out.len() - central;
    out.extend_from_slice(b"PK\x05\x06\0\0\0\0");
    out.extend_from_slice(&(items.len() as u16).to_le_bytes());
    out.extend_from_slice(&(items.len() as u16).to_le_bytes());
    out.extend_from_slice(&(size as u32).to_le_bytes());
    out.extend_from_slice(&(central as u32).to_le_bytes());
    out.extend_from_slice(&[0, 0]);
    (out, central_at)
}

/// Offsets inside a central directory header.
const CENTRAL_CRC: usize = 16;
const CENTRAL_SIZE: usize = 24;
const CENTRAL_OFFSET: usize = 42;

/// A uint8 array of 8 elements in chunks of 4, uncompressed (keys `c/0`, `c/1`).
const ZARR_JSON: &str = r#"{"zarr_format":3,"node_type":"array","shape":[8],"data_type":"uint8",
"chunk_grid":{"name":"regular","configuration":{"chunk_shape":[4]}},
"chunk_key_encoding":{"name":"default","configuration":{"separator":"/"}},
"fill_value":0,"codecs":[{"name":"bytes"}]}"#;

fn array_items() -> Vec<Item> {
    vec![
        Item::stored("zarr.json", ZARR_JSON.as_bytes()),
        Item::stored("c/0", &[1, 2, 3, 4]),
        Item::stored("c/1", &[5, 6, 7, 8]),
    ]
}

fn write_zip(tag: &str, bytes: &[u8]) -> String {
    let path =
        std::env::temp_dir().join(format!("zarrbuf-zipint-{tag}-{}.zip", std::process::id()));
    std::fs::write(&path, bytes).unwrap();
    path.to_string_lossy().into_owned()
}

fn read_err(zip: &str) -> String {
    let array = zarrbuf::open(zip, "").expect("the zip opens");
    match array.read_all(&zarrbuf::BufferPrototype::cpu()) {
        Ok(_) => panic!("{zip} read"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_good_zip_reads_whole_and_by_range() {
    let (bytes, _) = zip_bytes(&array_items());
    let zip = write_zip("good", &bytes);
    let array = zarrbuf::open(&zip, "").unwrap();
    let got = array
        .read_all(&zarrbuf::BufferPrototype::cpu())
        .unwrap()
        .to_native_bytes()
        .unwrap();
    assert_eq!(got, [1, 2, 3, 4, 5, 6, 7, 8]);
    let store = zarrbuf::store::open_store(&zip).unwrap();
    let key = zarrs::storage::StoreKey::new("c/1").unwrap();
    let part = store
        .get_partial(&key, ByteRange::FromStart(1, Some(2)))
        .unwrap()
        .unwrap();
    assert_eq!(&part[..], &[6, 7]);
}

#[test]
fn a_flipped_byte_in_a_stored_entry_fails_its_crc_on_read_range_and_check() {
    let mut items = array_items();
    items[2].data[1] ^= 0x40; // the CRC-32 stays the one of the good bytes
    let (bytes, _) = zip_bytes(&items);
    let zip = write_zip("crc", &bytes);
    let err = read_err(&zip);
    assert!(err.contains("c/1") && err.contains("CRC-32"), "{err}");
    // A ranged read of the entry checks the whole entry first.
    let store = zarrbuf::store::open_store(&zip).unwrap();
    let key = zarrs::storage::StoreKey::new("c/1").unwrap();
    let err = store
        .get_partial(&key, ByteRange::FromStart(0, Some(1)))
        .unwrap_err()
        .to_string();
    assert!(err.contains("CRC-32"), "{err}");
    let report =
        zarrbuf::check::check_array(&zip, "", &zarrbuf::options::CheckOptions::default()).unwrap();
    let names: Vec<String> = report.findings.iter().map(ToString::to_string).collect();
    assert_eq!(names.len(), 1, "{names:?}");
    assert!(
        names[0].starts_with("c/1: checksum:") && names[0].contains("CRC-32"),
        "{names:?}"
    );
}

#[test]
fn a_central_entry_pointing_at_another_entrys_bytes_is_refused_on_open() {
    let (mut bytes, central) = zip_bytes(&array_items());
    // c/1's central header points at c/0's local header (same sizes, different data).
    let c0 = central[1] + CENTRAL_OFFSET;
    let c0_offset: [u8; 4] = bytes[c0..c0 + 4].try_into().unwrap();
    let c1 = central[2] + CENTRAL_OFFSET;
    bytes[c1..c1 + 4].copy_from_slice(&c0_offset);
    let zip = write_zip("overlap", &bytes);
    let err = match zarrbuf::open(&zip, "") {
        Ok(_) => panic!("an archive with overlapping entries opened"),
        Err(e) => e.to_string(),
    };
    assert!(
        err.contains("\"c/0\"") && err.contains("\"c/1\"") && err.contains("same bytes"),
        "{err}"
    );
}

#[test]
fn a_local_header_that_disagrees_with_the_central_directory_is_refused() {
    // A local header naming another key.
    let mut items = array_items();
    let (mut bytes, _) = zip_bytes(&items);
    let at = bytes.windows(3).rposition(|w| w == b"c/1").unwrap();
    let local = bytes.windows(3).position(|w| w == b"c/1").unwrap();
    assert_ne!(at, local);
    bytes[local + 2] = b'9';
    let err = read_err(&write_zip("name", &bytes));
    assert!(err.contains("c/1") && err.contains("name"), "{err}");
    // A central CRC-32 that differs from the local one (the data matches neither rule).
    let (mut bytes, central) = zip_bytes(&items);
    bytes[central[1] + CENTRAL_CRC] ^= 1;
    let err = read_err(&write_zip("localcrc", &bytes));
    assert!(err.contains("c/0") && err.contains("CRC-32"), "{err}");
    // A central size one byte shorter than the local one.
    items[1].data.push(0);
    items[1].size = 5;
    items[1].crc = crc32fast::hash(&items[1].data);
    let (mut bytes, central) = zip_bytes(&items);
    bytes[central[1] + CENTRAL_SIZE] = 4;
    let err = read_err(&write_zip("localsize", &bytes));
    assert!(err.contains("c/0") && err.contains("sizes"), "{err}");
}

#[test]
fn compressed_entries_whose_declared_sizes_lie_stop_at_once() {
    // bzip2 and deflate entries that inflate to far more than they declare (the chunk is 4
    // bytes; the data is 8 MiB of zeros), and ones that declare more than they hold.
    let big = vec![0u8; 8 << 20];
    for (tag, mut item) in [
        ("bz2", Item::bzip2("c/0", &big)),
        ("deflate", Item::deflate("c/0", &big)),
    ] {
        item.size = 4;
        item.crc = crc32fast::hash(&big[..4]);
        let mut items = array_items();
        items[1] = item.clone();
        let err = read_err(&write_zip(&format!("{tag}-small"), &zip_bytes(&items).0));
        assert!(
            err.contains("c/0") && err.contains("more than the 4 bytes"),
            "{tag}: {err}"
        );
        let mut items = array_items();
        let mut short = if tag == "deflate" {
            Item::deflate("c/0", &[1, 2, 3])
        } else {
            Item::bzip2("c/0", &[1, 2, 3])
        };
        short.size = 4;
        items[1] = short;
        let err = read_err(&write_zip(&format!("{tag}-large"), &zip_bytes(&items).0));
        assert!(err.contains("c/0"), "{tag}: {err}");
        // Bytes after the compressed stream that the central directory counts as its own.
        let mut items = array_items();
        let mut trailing = if tag == "deflate" {
            Item::deflate("c/0", &[1, 2, 3, 4])
        } else {
            Item::bzip2("c/0", &[1, 2, 3, 4])
        };
        trailing.data.extend_from_slice(&[0x55; 300_000]);
        items[1] = trailing;
        let err = read_err(&write_zip(&format!("{tag}-trailing"), &zip_bytes(&items).0));
        assert!(err.contains("c/0"), "{tag}: {err}");
    }
}

#[test]
fn a_compressed_entry_with_a_good_crc_reads() {
    let mut items = array_items();
    items[1] = Item::bzip2("c/0", &[1, 2, 3, 4]);
    items[2] = Item::deflate("c/1", &[5, 6, 7, 8]);
    let zip = write_zip("compressed", &zip_bytes(&items).0);
    let array = zarrbuf::open(&zip, "").unwrap();
    let got = array
        .read_all(&zarrbuf::BufferPrototype::cpu())
        .unwrap()
        .to_native_bytes()
        .unwrap();
    assert_eq!(got, [1, 2, 3, 4, 5, 6, 7, 8]);
    // The same entries with a wrong CRC-32 in both headers.
    items[1].crc ^= 1;
    let err = read_err(&write_zip("compressed-crc", &zip_bytes(&items).0));
    assert!(err.contains("c/0") && err.contains("CRC-32"), "{err}");
}
