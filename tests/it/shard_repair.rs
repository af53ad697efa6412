//! `check --repair` on a shard whose index (its checksum intact) gives one inner chunk an
//! impossible range: the check names that inner chunk alone, and the repair rewrites the
//! shard — atomically, by a new file renamed into place — keeping every other inner chunk as
//! stored (numbers, index at the end or at the start, and strings), so that only the damaged
//! one reads as the fill value afterwards.

use crate::common::root;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use zarrbuf::check::{Problem, check_array};
use zarrbuf::options::CheckOptions;
use zarrbuf::{ArrayReadExt, BufferPrototype, VarLenBuffer};

/// A copy of fixture store `name` in a fresh directory.
fn fixture_copy(name: &str, tag: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("shard-repair-{tag}"));
    let _ = std::fs::remove_dir_all(&dir);
    copy_tree(&root().join("data").join(name), &dir);
    dir
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

fn text(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The sharding layout of the array at `dir`: shape, shard shape, inner chunk shape, and
/// whether the index is at the start.
struct Layout {
    shape: Vec<u64>,
    shard: Vec<u64>,
    inner: Vec<u64>,
    at_start: bool,
}

fn layout(dir: &Path) -> Layout {
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("zarr.json")).unwrap()).unwrap();
    let list = |v: &serde_json::Value| -> Vec<u64> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_u64().unwrap())
            .collect()
    };
    let sharding = &meta["codecs"][0]["configuration"];
    let index_codecs: Vec<&str> = sharding["index_codecs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        index_codecs,
        ["bytes", "crc32c"],
        "the test rewrites such indexes"
    );
    Layout {
        shape: list(&meta["shape"]),
        shard: list(&meta["chunk_grid"]["configuration"]["chunk_shape"]),
        inner: list(&sharding["chunk_shape"]),
        at_start: sharding["index_location"] == "start",
    }
}

/// Gives the first stored inner chunk of the shard at `path` an impossible size (2^62 bytes)
/// and writes the index's crc32c anew, so that only that entry is wrong; returns its number
/// (C order) and how many inner chunks the shard stores.
fn damage_first_entry(path: &Path, l: &Layout) -> (usize, usize) {
    let per: u64 = l.shard.iter().zip(&l.inner).map(|(s, i)| s / i).product();
    let mut bytes = std::fs::read(path).unwrap();
    let len = per as usize * 16;
    let start = if l.at_start { 0 } else { bytes.len() - len - 4 };
    let entry = |b: &[u8], k: usize, half: usize| {
        let at = start + k * 16 + half * 8;
        u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
    };
    let stored: Vec<usize> = (0..per as usize)
        .filter(|&k| entry(&bytes, k, 0) != u64::MAX)
        .collect();
    assert!(
        stored.len() >= 2,
        "the shard stores {} inner chunks",
        stored.len()
    );
    let k = stored[0];
    let at = start + k * 16 + 8;
    bytes[at..at + 8].copy_from_slice(&(1u64 << 62).to_le_bytes());
    let crc = crc32c::crc32c(&bytes[start..start + len]);
    bytes[start + len..start + len + 4].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(path, bytes).unwrap();
    (k, stored.len())
}

/// The C-order element numbers of inner chunk number `k` of shard `shard`.
fn elements_of(l: &Layout, shard: &[u64], k: usize) -> Vec<usize> {
    let per: Vec<u64> = l.shard.iter().zip(&l.inner).map(|(s, i)| s / i).collect();
    let mut local = vec![0u64; per.len()];
    let mut rest = k as u64;
    for d in (0..per.len()).rev() {
        local[d] = rest % per[d];
        rest /= per[d];
    }
    let ranges: Vec<std::ops::Range<u64>> = (0..per.len())
        .map(|d| {
            let lo = shard[d] * l.shard[d] + local[d] * l.inner[d];
            lo..(lo + l.inner[d]).min(l.shape[d])
        })
        .collect();
    let total: u64 = l.shape.iter().product();
    (0..total as usize)
        .filter(|&flat| {
            let mut rest = flat as u64;
            let mut inside = true;
            for d in (0..l.shape.len()).rev() {
                inside &= ranges[d].contains(&(rest % l.shape[d]));
                rest /= l.shape[d];
            }
            inside
        })
        .collect()
}

/// Damages shard `key` (at shard indices `shard`) of a copy of fixture `name`, checks that
/// `check` names the one inner chunk, repairs, and returns the store and the damaged
/// elements.
fn damage_and_repair(name: &str, key: &str, shard: &[u64]) -> (PathBuf, Vec<usize>) {
    let dir = fixture_copy(name, name);
    let l = layout(&dir);
    let path = dir.join(key);
    let (k, stored) = damage_first_entry(&path, &l);
    let report = check_array(text(&dir), "", &CheckOptions::default()).unwrap();
    assert!(!report.is_clean());
    let named: Vec<(&str, Option<&Vec<u64>>, Problem)> = report
        .findings
        .iter()
        .map(|f| (f.key.as_str(), f.inner.as_ref(), f.problem))
        .collect();
    assert_eq!(named.len(), 1, "{:?}", report.findings);
    assert_eq!(named[0].0, key, "{:?}", report.findings);
    assert!(
        named[0].1.is_some(),
        "the whole shard was blamed: {:?}",
        report.findings
    );
    let inode = std::fs::metadata(&path).unwrap().ino();
    let repaired = check_array(text(&dir), "", &CheckOptions::default().with_repair(true)).unwrap();
    let said = repaired.repaired.join("\n");
    assert!(
        said.contains(&format!("rewrote {key}: kept {} intact", stored - 1))
            && said.contains("dropped 1 damaged"),
        "{said}"
    );
    assert!(path.is_file(), "the repair removed the shard");
    // Written whole into a new file and renamed into place, never in place.
    assert_ne!(std::fs::metadata(&path).unwrap().ino(), inode);
    let leftovers: Vec<_> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("zarrbuf-tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    let again = check_array(text(&dir), "", &CheckOptions::default()).unwrap();
    assert!(again.is_clean(), "{:?}", again.findings);
    (dir, elements_of(&l, shard, k))
}

#[test]
fn a_numeric_shard_keeps_every_inner_chunk_but_the_damaged_one() {
    for (name, key, shard) in [
        ("v3_shard_end.zarr", "c/0/0", vec![0, 0]),
        ("v3_shard_start.zarr", "c/1", vec![1]),
    ] {
        let original = zarrbuf::open(text(&root().join("data").join(name)), "")
            .unwrap()
            .read_all(&BufferPrototype::cpu())
            .unwrap();
        let (dir, damaged) = damage_and_repair(name, key, &shard);
        let got = zarrbuf::open(text(&dir), "")
            .unwrap()
            .read_all(&BufferPrototype::cpu())
            .unwrap();
        // Compared as bit patterns: the float fixture's fill value is NaN.
        let (want, got): (Vec<u64>, Vec<u64>) = if name == "v3_shard_end.zarr" {
            let bits = |b: &zarrbuf::NDBuffer| -> Vec<u64> {
                b.to_vec::<i32>()
                    .unwrap()
                    .iter()
                    .map(|&v| v as u64)
                    .collect()
            };
            (bits(&original), bits(&got))
        } else {
            let bits = |b: &zarrbuf::NDBuffer| -> Vec<u64> {
                b.to_vec::<f64>()
                    .unwrap()
                    .iter()
                    .map(|v| v.to_bits())
                    .collect()
            };
            (bits(&original), bits(&got))
        };
        let fill = if name == "v3_shard_end.zarr" {
            (-1i32) as u64
        } else {
            f64::NAN.to_bits()
        };
        assert!(!damaged.is_empty());
        for (i, (w, g)) in want.iter().zip(&got).enumerate() {
            let expected = if damaged.contains(&i) { fill } else { *w };
            assert_eq!(*g, expected, "{name}: element {i}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn a_string_shard_keeps_every_inner_chunk_but_the_damaged_one() {
    let name = "v3_string_sharded.zarr";
    let cpu = BufferPrototype::cpu();
    let strings = |dir: &Path| -> Vec<String> {
        zarrbuf::open(text(dir), "")
            .unwrap()
            .read_all_as::<VarLenBuffer>(&cpu)
            .unwrap()
            .iter_str()
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    let original = strings(&root().join("data").join(name));
    let (dir, damaged) = damage_and_repair(name, "c/0", &[0]);
    let got = strings(&dir);
    assert_eq!(got.len(), original.len());
    for (i, (w, g)) in original.iter().zip(&got).enumerate() {
        let expected = if damaged.contains(&i) { "" } else { w.as_str() };
        assert_eq!(g, expected, "element {i}");
    }
    // Something intact was there to keep.
    assert!((0..16).any(|i| !damaged.contains(&i) && !original[i].is_empty()));
    std::fs::remove_dir_all(&dir).unwrap();
}
