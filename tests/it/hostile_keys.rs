//! Keys that would leave their store — `..` components, absolute keys — from consolidated
//! metadata, a listing or a caller are refused on every route, and nothing outside the store
//! is read.

use std::path::PathBuf;
use std::process::Command;
use zarrs::storage::{ReadableStorageTraits, StoreKey};

fn dir(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("hostile-keys-{name}"));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

const ZARRAY: &str = r#"{"zarr_format":2,"shape":[4],"chunks":[2],"dtype":"<i4","compressor":null,"fill_value":0,"order":"C","filters":null}"#;

/// A v2 group whose `.zmetadata` names an array outside the store, beside a real array there
/// (what a listing that followed the key would find).
fn v2_group_pointing_outside(d: &std::path::Path) -> PathBuf {
    let store = d.join("store.zarr");
    std::fs::create_dir_all(&store).unwrap();
    std::fs::create_dir_all(d.join("outside")).unwrap();
    std::fs::write(d.join("outside/.zarray"), ZARRAY).unwrap();
    std::fs::write(store.join(".zgroup"), r#"{"zarr_format":2}"#).unwrap();
    let zmeta = format!(
        r#"{{"zarr_consolidated_format":1,"metadata":{{".zgroup":{{"zarr_format":2}},"../outside/.zarray":{ZARRAY}}}}}"#
    );
    std::fs::write(store.join(".zmetadata"), zmeta).unwrap();
    store
}

#[test]
fn consolidated_v2_keys_leaving_the_store_are_refused() {
    let d = dir("v2");
    let store = v2_group_pointing_outside(&d);
    let err = zarrbuf::list_hierarchy(store.to_str().unwrap(), "").unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("outside the store") && text.contains("../outside/.zarray"),
        "{text}"
    );
    // `zarrbuf info` says so in one line and fails.
    let o = Command::new(env!("CARGO_BIN_EXE_zarrbuf"))
        .args(["info", store.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!o.status.success(), "{o:?}");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.starts_with("error: ") && stderr.contains("outside the store"),
        "{stderr}"
    );
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn consolidated_v3_keys_leaving_the_store_are_refused() {
    let d = dir("v3");
    let store = d.join("store.zarr");
    std::fs::create_dir_all(&store).unwrap();
    let zarr_json = r#"{"zarr_format":3,"node_type":"group","attributes":{},
        "consolidated_metadata":{"kind":"inline","must_understand":false,"metadata":{
        "../../..":{"zarr_format":3,"node_type":"group","attributes":{}}}}}"#;
    std::fs::write(store.join("zarr.json"), zarr_json).unwrap();
    let text = zarrbuf::list_hierarchy(store.to_str().unwrap(), "")
        .unwrap_err()
        .to_string();
    assert!(text.contains("outside the store"), "{text}");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_directory_store_refuses_keys_leaving_it() {
    let d = dir("direct");
    std::fs::write(d.join("secret"), b"secret").unwrap();
    std::fs::create_dir_all(d.join("store.zarr")).unwrap();
    let store = zarrbuf::store::open_store(d.join("store.zarr").to_str().unwrap()).unwrap();
    let err = store.get(&StoreKey::new("../secret").unwrap()).unwrap_err();
    assert!(err.to_string().contains("outside the store"), "{err}");
    let err = store
        .get(&StoreKey::new("a/../../secret").unwrap())
        .unwrap_err();
    assert!(err.to_string().contains("outside the store"), "{err}");
    std::fs::remove_dir_all(&d).unwrap();
}

/// A v3 group whose inline consolidated metadata names an array under `key`.
fn v3_group_naming(store: &std::path::Path, key: &str) {
    std::fs::create_dir_all(store).unwrap();
    let array = r#"{"zarr_format":3,"node_type":"array","shape":[4],"data_type":"int32",
        "chunk_grid":{"name":"regular","configuration":{"chunk_shape":[2]}},
        "chunk_key_encoding":{"name":"default","configuration":{"separator":"/"}},
        "fill_value":0,"codecs":[{"name":"bytes","configuration":{"endian":"little"}}],
        "attributes":{}}"#;
    let zarr_json = format!(
        r#"{{"zarr_format":3,"node_type":"group","attributes":{{}},
        "consolidated_metadata":{{"kind":"inline","must_understand":false,"metadata":{{
        {key:?}:{array}}}}}}}"#
    );
    std::fs::write(store.join("zarr.json"), zarr_json).unwrap();
}

#[test]
fn check_and_info_refuse_consolidated_keys_leaving_the_store_alike() {
    let d = dir("check-agrees");
    let outside = d.join("victim");
    std::fs::create_dir_all(&outside).unwrap();
    let absolute = format!("{}/victim", d.display());
    for (name, key) in [
        ("dotdot", "../victim"),
        ("inner-dotdot", "a/../../victim"),
        ("absolute", absolute.as_str()),
        ("absolute-short", "/abs/key"),
    ] {
        let store = d.join(format!("{name}.zarr"));
        v3_group_naming(&store, key);
        let s = store.to_str().unwrap();
        let err = zarrbuf::list_hierarchy(s, "").unwrap_err().to_string();
        assert!(err.contains("outside the store"), "{name}: {err}");
        for args in [vec!["info", s], vec!["check", s]] {
            let o = Command::new(env!("CARGO_BIN_EXE_zarrbuf"))
                .args(&args)
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(1), "{name} {args:?}: {stderr}");
            assert!(
                stderr.starts_with("error: ")
                    && stderr.contains("outside the store")
                    && stderr.contains(key),
                "{name} {args:?}: {stderr}"
            );
        }
        // The library's check says so too, rather than checking a group of no arrays.
        let err = zarrbuf::check::check_array(s, "", &Default::default()).unwrap_err();
        assert!(
            err.to_string().contains("outside the store"),
            "{name}: {err}"
        );
    }
    std::fs::remove_dir_all(&d).unwrap();
}
