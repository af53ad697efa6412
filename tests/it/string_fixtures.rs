//! The string and bytes fixtures written by zarr-python and xarray
//! (`fixtures/strings.json`, each with a JSON expectation of its elements in C order): every
//! one reads exactly through `read_as::<VarLenBuffer>` (whole, sync and async, and subsets against the
//! whole), v2 strings stored in order F included.

use serde_json::Value;
use std::ops::Range;
use zarrbuf::{ArrayReadAsyncExt, ArrayReadExt, BufferPrototype, VarLenBuffer, VarLenKind};

use crate::common::root;

struct Entry {
    name: String,
    store: String,
    path: String,
    kind: VarLenKind,
    shape: Vec<u64>,
    values: Vec<Vec<u8>>,
}

fn entries() -> Vec<Entry> {
    let text = std::fs::read_to_string(root().join("strings.json")).expect("fixtures/strings.json");
    let list: Value = serde_json::from_str(&text).expect("strings.json is JSON");
    list.as_array()
        .expect("a list")
        .iter()
        .map(|e| {
            let s = |k: &str| e[k].as_str().unwrap_or_else(|| panic!("{k}")).to_string();
            let exp: Value = serde_json::from_str(
                &std::fs::read_to_string(root().join(s("expected"))).expect("expectation"),
            )
            .expect("expectation is JSON");
            let kind = match exp["kind"].as_str() {
                Some("utf8") => VarLenKind::Utf8,
                Some("bytes") => VarLenKind::Bytes,
                other => panic!("{}: kind {other:?}", s("name")),
            };
            let values = exp["values"]
                .as_array()
                .expect("values")
                .iter()
                .map(|v| {
                    let v = v.as_str().expect("a string");
                    match kind {
                        VarLenKind::Utf8 => v.as_bytes().to_vec(),
                        VarLenKind::Bytes => hex(v),
                    }
                })
                .collect();
            let shape = exp["shape"]
                .as_array()
                .expect("shape")
                .iter()
                .map(|n| n.as_u64().expect("a length"))
                .collect();
            Entry {
                name: s("name"),
                store: root()
                    .join(s("store"))
                    .to_str()
                    .expect("utf-8 path")
                    .to_string(),
                path: s("path"),
                kind,
                shape,
                values,
            }
        })
        .collect()
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

fn elements(v: &VarLenBuffer) -> Vec<Vec<u8>> {
    v.iter_bytes()
        .expect("host")
        .collect::<zarrbuf::Result<_>>()
        .expect("elements")
}

/// The elements of `sub` (ranges per axis) of a C-order array of `shape`.
fn expected_subset(values: &[Vec<u8>], shape: &[u64], sub: &[Range<u64>]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let count: u64 = sub.iter().map(|r| r.end - r.start).product();
    for k in 0..count {
        let (mut rest, mut flat) = (k, 0u64);
        let mut index = vec![0u64; sub.len()];
        for d in (0..sub.len()).rev() {
            let n = sub[d].end - sub[d].start;
            index[d] = sub[d].start + rest % n;
            rest /= n;
        }
        for d in 0..sub.len() {
            flat = flat * shape[d] + index[d];
        }
        out.push(values[flat as usize].clone());
    }
    out
}

#[test]
fn every_string_fixture_reads_exactly() {
    let all = entries();
    assert!(all.len() >= 10, "strings.json lists {} fixtures", all.len());
    let cpu = BufferPrototype::cpu();
    assert!(all.iter().any(|e| e.name == "v2_vlen_utf8_F"));
    for e in &all {
        let array =
            zarrbuf::open(&e.store, &e.path).unwrap_or_else(|err| panic!("{}: {err}", e.name));
        assert_eq!(zarrbuf::varlen_kind(&array), Some(e.kind), "{}", e.name);
        let whole = array
            .read_all_as::<VarLenBuffer>(&cpu)
            .unwrap_or_else(|err| panic!("{}: {err}", e.name));
        assert_eq!(whole.shape(), e.shape.as_slice(), "{}", e.name);
        assert_eq!(whole.kind(), e.kind, "{}", e.name);
        assert_eq!(elements(&whole), e.values, "{}", e.name);
        // Subsets that start and end inside chunks agree with the whole.
        let sub: Vec<Range<u64>> = e.shape.iter().map(|&n| (n / 3)..(n - n / 4)).collect();
        let part = array
            .read_as::<VarLenBuffer>(&sub, &cpu)
            .unwrap_or_else(|err| panic!("{}: {sub:?}: {err}", e.name));
        assert_eq!(
            elements(&part),
            expected_subset(&e.values, &e.shape, &sub),
            "{} {sub:?}",
            e.name
        );
    }
}

#[test]
fn every_string_fixture_reads_exactly_async() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let cpu = BufferPrototype::cpu();
    for e in &entries() {
        let whole = rt
            .block_on(async {
                let array = zarrbuf::open_async(&e.store, &e.path).await?;
                array.read_all_as_async::<VarLenBuffer>(&cpu).await
            })
            .unwrap_or_else(|err| panic!("{}: {err}", e.name));
        assert_eq!(elements(&whole), e.values, "{}", e.name);
    }
}
