//! One read API for both output kinds (`ReadOutput`): `read_as::<VarLenBuffer>` reads the
//! string fixtures written by zarr-python as the deprecated `read_varlen` methods did (sync
//! and async, every wrapper), `read_as::<NDBuffer>` reads the fixed-size fixtures as `read`
//! does, and asking for the other kind than the array holds is an error naming the call to
//! make instead.

use crate::common::{fixtures, root};
use serde_json::Value;
use std::ops::Range;
use zarrbuf::options::ReadOptions;
use zarrbuf::{ArrayReadAsyncExt, ArrayReadExt, BufferPrototype, Error, NDBuffer, VarLenBuffer};

/// The string fixtures: (name, store, path) from `fixtures/strings.json`.
fn string_fixtures() -> Vec<(String, String, String)> {
    let text = std::fs::read_to_string(root().join("strings.json")).expect("fixtures/strings.json");
    let list: Value = serde_json::from_str(&text).expect("strings.json is JSON");
    let list = list.as_array().expect("a list");
    assert!(
        list.len() >= 10,
        "strings.json lists {} fixtures",
        list.len()
    );
    list.iter()
        .map(|e| {
            let s = |k: &str| e[k].as_str().unwrap_or_else(|| panic!("{k}")).to_string();
            let store = root().join(s("store")).to_str().expect("utf-8").to_string();
            (s("name"), store, s("path"))
        })
        .collect()
}

/// A VarLenBuffer as plain values: kind, shape and every element's bytes.
fn plain(v: &VarLenBuffer) -> (String, Vec<u64>, Vec<Vec<u8>>) {
    let elements = v
        .iter_bytes()
        .expect("host")
        .collect::<zarrbuf::Result<_>>()
        .expect("elements");
    (format!("{:?}", v.kind()), v.shape().to_vec(), elements)
}

/// A subset that starts and ends inside the array.
fn middle(shape: &[u64]) -> Vec<Range<u64>> {
    shape.iter().map(|&n| n / 3..n - n / 4).collect()
}

#[test]
#[allow(deprecated)]
fn read_as_varlen_equals_the_deprecated_read_varlen() {
    use zarrbuf::ArrayReadVarLenExt;
    let (cpu, opts) = (BufferPrototype::cpu(), ReadOptions::default());
    for (name, store, path) in string_fixtures() {
        let array = zarrbuf::open(&store, &path).unwrap_or_else(|e| panic!("{name}: {e}"));
        let new = plain(&array.read_all_as::<VarLenBuffer>(&cpu).unwrap());
        assert_eq!(new, plain(&array.read_varlen_all(&cpu).unwrap()), "{name}");
        let old = array.read_varlen_all_opt(&cpu, &opts).unwrap();
        assert_eq!(new, plain(&old), "{name}");
        let got = array.read_all_as_opt::<VarLenBuffer>(&cpu, &opts).unwrap();
        assert_eq!(new, plain(&got), "{name}");
        let sub = middle(array.shape());
        let new = plain(&array.read_as::<VarLenBuffer>(&sub, &cpu).unwrap());
        assert_eq!(
            new,
            plain(&array.read_varlen(&sub, &cpu).unwrap()),
            "{name}"
        );
        let old = array.read_varlen_opt(&sub, &cpu, &opts).unwrap();
        assert_eq!(new, plain(&old), "{name}");
        let got = array
            .read_as_opt::<VarLenBuffer>(&sub, &cpu, &opts)
            .unwrap();
        assert_eq!(new, plain(&got), "{name}");
    }
}

#[test]
#[allow(deprecated)]
fn read_as_async_varlen_equals_the_deprecated_read_varlen_async() {
    use zarrbuf::ArrayReadVarLenAsyncExt;
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let (cpu, opts) = (BufferPrototype::cpu(), ReadOptions::default());
    for (name, store, path) in string_fixtures() {
        let sync = zarrbuf::open(&store, &path).unwrap_or_else(|e| panic!("{name}: {e}"));
        let want_all = plain(&sync.read_all_as::<VarLenBuffer>(&cpu).unwrap());
        let sub = middle(sync.shape());
        let want_sub = plain(&sync.read_as::<VarLenBuffer>(&sub, &cpu).unwrap());
        let got = rt.block_on(async {
            let a = zarrbuf::open_async(&store, &path).await?;
            let all = [
                a.read_all_as_async::<VarLenBuffer>(&cpu).await?,
                a.read_all_as_opt_async::<VarLenBuffer>(&cpu, &opts).await?,
                a.read_varlen_all_async(&cpu).await?,
                a.read_varlen_all_opt_async(&cpu, &opts).await?,
            ];
            let sub = [
                a.read_as_async::<VarLenBuffer>(&sub, &cpu).await?,
                a.read_as_opt_async::<VarLenBuffer>(&sub, &cpu, &opts)
                    .await?,
                a.read_varlen_async(&sub, &cpu).await?,
                a.read_varlen_opt_async(&sub, &cpu, &opts).await?,
            ];
            Ok::<_, Error>((all, sub))
        });
        let (all, sub) = got.unwrap_or_else(|e| panic!("{name}: {e}"));
        for (k, v) in all.iter().enumerate() {
            assert_eq!(plain(v), want_all, "{name}: whole read {k}");
        }
        for (k, v) in sub.iter().enumerate() {
            assert_eq!(plain(v), want_sub, "{name}: subset read {k}");
        }
    }
}

#[test]
fn read_as_ndbuffer_equals_read() {
    let cpu = BufferPrototype::cpu();
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let all = fixtures();
    assert!(all.len() >= 40, "the manifest lists {} fixtures", all.len());
    for f in all.iter().step_by(7) {
        let array = zarrbuf::open(&f.store_path(), &f.path).unwrap();
        let bytes = |b: NDBuffer| (b.shape().to_vec(), b.dtype(), b.to_native_bytes().unwrap());
        let want = bytes(array.read_all(&cpu).unwrap());
        assert_eq!(bytes(array.read_all_as(&cpu).unwrap()), want, "{}", f.name);
        let sub = middle(array.shape());
        let want_sub = bytes(array.read(&sub, &cpu).unwrap());
        let got: NDBuffer = array.read_as(&sub, &cpu).unwrap();
        assert_eq!(bytes(got), want_sub, "{}", f.name);
        let got = rt.block_on(async {
            let a = zarrbuf::open_async(&f.store_path(), &f.path).await?;
            let all = a.read_all_as_async::<NDBuffer>(&cpu).await?;
            let sub = a.read_as_async::<NDBuffer>(&sub, &cpu).await?;
            Ok::<_, Error>((all, sub))
        });
        let (all, sub) = got.unwrap_or_else(|e| panic!("{}: {e}", f.name));
        assert_eq!(bytes(all), want, "{} async", f.name);
        assert_eq!(bytes(sub), want_sub, "{} async", f.name);
    }
}

#[test]
fn the_other_kind_is_an_error_naming_the_call_to_make() {
    let cpu = BufferPrototype::cpu();
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let (name, store, path) = string_fixtures().remove(0);
    let strings = zarrbuf::open(&store, &path).unwrap();
    let err = strings.read_all_as::<NDBuffer>(&cpu).unwrap_err();
    assert!(matches!(err, Error::Unsupported(_)), "{name}: {err:?}");
    assert!(err.to_string().contains("read_as::<VarLenBuffer>"), "{err}");
    assert_eq!(
        err.to_string(),
        strings.read_all(&cpu).unwrap_err().to_string()
    );
    let err = rt
        .block_on(async {
            let a = zarrbuf::open_async(&store, &path).await?;
            a.read_all_as_async::<NDBuffer>(&cpu).await
        })
        .unwrap_err();
    assert!(err.to_string().contains("read_as::<VarLenBuffer>"), "{err}");

    let f = &fixtures()[0];
    let numbers = zarrbuf::open(&f.store_path(), &f.path).unwrap();
    let err = numbers.read_all_as::<VarLenBuffer>(&cpu).unwrap_err();
    assert!(matches!(err, Error::DataType(_)), "{}: {err:?}", f.name);
    assert!(err.to_string().contains("read_as::<NDBuffer>"), "{err}");
    let err = rt
        .block_on(async {
            let a = zarrbuf::open_async(&f.store_path(), &f.path).await?;
            a.read_all_as_async::<VarLenBuffer>(&cpu).await
        })
        .unwrap_err();
    assert!(err.to_string().contains("read_as::<NDBuffer>"), "{err}");
}
