//! Stores other than one array in a directory: zip files written by zarr-python's ZipStore
//! (and a directory store zipped like `zip -r`), and groups with and without consolidated
//! metadata, as fixtures/stores.json describes them. Zip files read exactly on every
//! prototype and refuse every write with one sentence; `list_hierarchy` and `zarrbuf info`
//! show what zarr-python wrote; opening a group as an array names its arrays.

use crate::common::{prototypes, root};
use serde_json::Value;
use std::process::{Command, Output};
use zarrbuf::{
    ArrayReadExt, ArrayWriteExt, Error, NDBuffer,
    options::{PipelineMode, ReadOptions},
};

/// The sentence every write into a zip file is refused with.
const READ_ONLY: &str =
    "zip stores are read-only in zarrbuf; copy the array into a directory instead: zarrbuf copy";

/// fixtures/stores.json.
fn stores() -> Vec<Value> {
    let text = std::fs::read_to_string(root().join("stores.json")).expect("fixtures/stores.json");
    let v: Value = serde_json::from_str(&text).expect("stores.json is JSON");
    v.as_array().expect("a list of stores").clone()
}

fn store_path(s: &Value) -> String {
    root()
        .join(s["store"].as_str().unwrap())
        .to_string_lossy()
        .into_owned()
}

fn store_named(name: &str) -> (Value, String) {
    let s = stores()
        .into_iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("{name} is in stores.json"));
    let path = store_path(&s);
    (s, path)
}

fn arrays(s: &Value) -> Vec<Value> {
    s["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["node_type"] == "array")
        .cloned()
        .collect()
}

fn npy(node: &Value) -> NDBuffer {
    zarrbuf::npy::read(&root().join(node["npy"].as_str().unwrap())).unwrap()
}

fn same(got: &NDBuffer, want: &NDBuffer) -> bool {
    got.shape() == want.shape() && got.to_native_bytes().unwrap() == want.to_native_bytes().unwrap()
}

fn zarrbuf_cli(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_zarrbuf"))
        .args(args)
        .env_remove("ZARRBUF_DEVICE")
        .output()
        .expect("the zarrbuf binary runs")
}

/// The error `zarrbuf::open` returns (an opened array has no `Debug`).
fn open_err(location: &str, path: &str) -> Error {
    match zarrbuf::open(location, path) {
        Ok(_) => panic!("{location}:{path} opened"),
        Err(e) => e,
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A failed run: non-zero status, one `error: ` line on stderr containing `want`.
fn assert_one_line_error(o: &Output, want: &str) {
    assert!(!o.status.success(), "expected failure: {}", text(&o.stdout));
    let err = text(&o.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "one line: {err:?}");
    assert!(
        lines[0].starts_with("error: ") && lines[0].contains(want),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

fn temp_dir(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("zarrbuf-stores-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

#[test]
fn every_store_fixture_reads_exactly_on_every_prototype() {
    let protos = prototypes();
    let all = stores();
    assert!(all.len() >= 5, "stores.json lists {} stores", all.len());
    for s in &all {
        let location = store_path(s);
        for node in arrays(s) {
            let path = node["path"].as_str().unwrap();
            let what = format!("{}:{path}", s["name"]);
            let array = zarrbuf::open(&location, path).unwrap_or_else(|e| panic!("{what}: {e}"));
            let want = npy(&node);
            for (pname, proto) in &protos {
                let got = array
                    .read_all(proto)
                    .unwrap_or_else(|e| panic!("{what} on {pname}: {e}"));
                assert_eq!(got.memory(), proto.memory(), "{what}");
                assert!(same(&got, &want), "{what} on {pname} differs from the .npy");
            }
            // The staged pipeline, and the device decoder's host twin, through a subset.
            let shape = array.shape().to_vec();
            let subset: Vec<std::ops::Range<u64>> = shape.iter().map(|&n| n / 3..n).collect();
            for opts in [
                ReadOptions::default()
                    .with_mode(PipelineMode::Staged)
                    .with_staging_bytes(1),
                ReadOptions::default()
                    .with_mode(PipelineMode::Staged)
                    .with_decode(zarrbuf::options::Decode::Gpu),
            ] {
                let got = array
                    .read_opt(&subset, &zarrbuf::BufferPrototype::cpu(), &opts)
                    .unwrap_or_else(|e| panic!("{what} staged: {e}"));
                let ranges: Vec<std::ops::Range<usize>> = subset
                    .iter()
                    .map(|r| r.start as usize..r.end as usize)
                    .collect();
                let part = want.get(&ranges).unwrap();
                assert!(same(&got, &part), "{what}: staged subset differs");
            }
        }
    }
}

#[test]
fn list_hierarchy_shows_what_zarr_python_wrote() {
    for s in stores() {
        let name = s["name"].as_str().unwrap();
        let h =
            zarrbuf::list_hierarchy(&store_path(&s), "").unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(h.consolidated, s["consolidated"] == true, "{name}");
        let want = s["nodes"].as_array().unwrap();
        let paths: Vec<&str> = h.nodes.iter().map(|n| n.path.as_str()).collect();
        let want_paths: Vec<&str> = want.iter().map(|n| n["path"].as_str().unwrap()).collect();
        assert_eq!(paths, want_paths, "{name}");
        for (got, want) in h.nodes.iter().zip(want) {
            let what = format!("{name}:{}", got.path);
            assert_eq!(
                got.zarr_format as u64,
                want["zarr_format"].as_u64().unwrap(),
                "{what}"
            );
            match got.array() {
                None => assert_eq!(want["node_type"], "group", "{what}"),
                Some(a) => {
                    assert_eq!(want["node_type"], "array", "{what}");
                    let json = serde_json::to_value(a).unwrap();
                    for field in [
                        "shape",
                        "data_type",
                        "chunks",
                        "shards",
                        "chunks_stored",
                        "chunks_total",
                        "stored_bytes",
                    ] {
                        assert_eq!(json[field], want[field], "{what}: {field}");
                    }
                    assert_eq!(a.unreadable, None, "{what}");
                    assert!(
                        a.codecs.iter().any(|c| c.contains("zstd")),
                        "{what}: {:?}",
                        a.codecs
                    );
                }
            }
        }
        // A subgroup lists only itself and what is under it; an array lists itself.
        let sub = zarrbuf::list_hierarchy(&store_path(&s), "g").unwrap();
        let paths: Vec<&str> = sub.nodes.iter().map(|n| n.path.as_str()).collect();
        assert_eq!(paths, ["g", "g/labels"], "{name}");
        let one = zarrbuf::list_hierarchy(&store_path(&s), "temperature").unwrap();
        assert_eq!(one.nodes.len(), 1, "{name}");
        assert_eq!(one.nodes[0].array().unwrap().shape, [20, 30], "{name}");
    }
}

#[test]
fn consolidated_metadata_is_what_the_listing_reads() {
    // With a child's own metadata gone, a consolidated group still lists it: the listing
    // came from the consolidated copy, not from the store's keys.
    let dir = temp_dir("consolidated");
    for (name, child_meta) in [
        ("v3_group_consolidated", "temperature/zarr.json"),
        ("v2_group_consolidated", "temperature/.zarray"),
    ] {
        let (_, location) = store_named(name);
        let copy = dir.join(format!("{name}.zarr"));
        copy_dir(std::path::Path::new(&location), &copy);
        std::fs::remove_file(copy.join(child_meta)).unwrap();
        let h = zarrbuf::list_hierarchy(copy.to_str().unwrap(), "").unwrap();
        assert!(h.consolidated, "{name}");
        let t = h
            .nodes
            .iter()
            .find(|n| n.path == "temperature")
            .expect(name);
        assert_eq!(t.array().unwrap().shape, [20, 30], "{name}");
        assert_eq!(t.array().unwrap().chunks_stored, 5, "{name}");
    }
    // The same group without consolidated metadata is listed from its keys.
    let plain = dir.join("plain.zarr");
    copy_dir(
        std::path::Path::new(&store_named("v2_group_consolidated").1),
        &plain,
    );
    std::fs::remove_file(plain.join(".zmetadata")).unwrap();
    let h = zarrbuf::list_hierarchy(plain.to_str().unwrap(), "").unwrap();
    assert!(!h.consolidated);
    let paths: Vec<&str> = h.nodes.iter().map(|n| n.path.as_str()).collect();
    assert_eq!(paths, ["", "g", "g/labels", "temperature"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn writes_into_a_zip_are_refused_with_one_sentence() {
    let (s, zip) = store_named("v3_zipstore");
    let node = &arrays(&s)[0];
    let array = zarrbuf::open(&zip, node["path"].as_str().unwrap()).unwrap();
    let data = npy(node);
    let err = array.write_all(&data).unwrap_err().to_string();
    assert!(err.contains(READ_ONLY), "{err}");
    assert!(err.contains(&zip), "names the zip file: {err}");
    // The store itself refuses every write.
    let store = zarrbuf::store::open_store(&zip).unwrap();
    let key = zarrs::storage::StoreKey::new("x").unwrap();
    let e = store.set(&key, vec![1u8].into()).unwrap_err().to_string();
    assert!(e.contains(READ_ONLY), "{e}");
    let e = store
        .erase_prefix(&zarrs::storage::StorePrefix::root())
        .unwrap_err()
        .to_string();
    assert!(e.contains(READ_ONLY), "{e}");
    // A new array in a zip store.
    let e = match zarrbuf::create_like(
        &array,
        array.shape(),
        store.clone(),
        "new",
        &Default::default(),
        false,
    ) {
        Ok(_) => panic!("created an array in a zip file"),
        Err(e) => e.to_string(),
    };
    assert!(e.contains(READ_ONLY), "{e}");
    // The command line: copy into an existing zip, a new .zip path, a zip named otherwise;
    // check --repair of a zip.
    let dir = temp_dir("refuse");
    let unnamed = dir.join("store.bin");
    std::fs::copy(&zip, &unnamed).unwrap();
    let src = store_named("v3_group_consolidated").1;
    for dst in [
        zip.clone(),
        dir.join("new.zip").to_string_lossy().into_owned(),
        unnamed.to_string_lossy().into_owned(),
    ] {
        let o = zarrbuf_cli(&["copy", &src, &dst, "--src-path", "temperature"]);
        assert_one_line_error(&o, READ_ONLY);
    }
    assert!(!dir.join("new.zip").exists(), "nothing was created");
    let o = zarrbuf_cli(&["check", &zip, "--path", "temperature", "--repair"]);
    assert_one_line_error(&o, READ_ONLY);
    // A plain file is not a directory either (said without the zip sentence).
    let plain = dir.join("plain.txt");
    std::fs::write(&plain, "not a store").unwrap();
    let o = zarrbuf_cli(&[
        "copy",
        &src,
        plain.to_str().unwrap(),
        "--src-path",
        "temperature",
    ]);
    assert_one_line_error(&o, "is a file, not a directory");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn zip_files_are_found_by_name_or_signature_and_bad_ones_are_named() {
    let (s, zip) = store_named("v3_zipstore_deflate");
    let node = &arrays(&s)[1];
    let path = node["path"].as_str().unwrap();
    let want = npy(node);
    let dir = temp_dir("detect");
    // Any name, and a file:// URL.
    let renamed = dir.join("data.zarr.bin");
    std::fs::copy(&zip, &renamed).unwrap();
    for location in [
        renamed.to_string_lossy().into_owned(),
        format!("file://{zip}"),
    ] {
        let a = zarrbuf::open(&location, path).unwrap_or_else(|e| panic!("{location}: {e}"));
        assert!(same(
            &a.read_all(&zarrbuf::BufferPrototype::cpu()).unwrap(),
            &want
        ));
    }
    // Missing, truncated, and not a zip.
    let missing = dir.join("missing.zip");
    let e = open_err(missing.to_str().unwrap(), "").to_string();
    assert!(e.contains("no such zip file"), "{e}");
    let bytes = std::fs::read(&zip).unwrap();
    for (name, content) in [
        ("truncated.zip", &bytes[..bytes.len() / 2]),
        ("empty.zip", &b""[..]),
        ("garbage.zip", &b"PK\x03\x04 not really a zip at all"[..]),
    ] {
        let f = dir.join(name);
        std::fs::write(&f, content).unwrap();
        let e = open_err(f.to_str().unwrap(), path).to_string();
        assert!(e.contains("not a readable zip file"), "{name}: {e}");
        let o = zarrbuf_cli(&["info", f.to_str().unwrap()]);
        assert_one_line_error(&o, "not a readable zip file");
    }
    let other = dir.join("notes.txt");
    std::fs::write(&other, "hello").unwrap();
    let e = open_err(other.to_str().unwrap(), "").to_string();
    assert!(e.contains("no such directory or zip file"), "{e}");
    // The async reader sends zip files to the synchronous one.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let e = rt
        .block_on(zarrbuf::open_async(&zip, path))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("zip stores open with the synchronous reader"),
        "{e}"
    );
    let e = rt
        .block_on(zarrbuf::open_async("s3://bucket/data.zarr.zip", path))
        .unwrap_err()
        .to_string();
    assert!(e.contains("from local disk only"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_cli_reads_checks_benches_and_copies_out_of_a_zip() {
    let (s, zip) = store_named("v3_zip_nested");
    let dir = temp_dir("cli");
    for node in arrays(&s) {
        let path = node["path"].as_str().unwrap();
        let out = dir.join("out.npy");
        let o = zarrbuf_cli(&["read", &zip, "--path", path, "--out", out.to_str().unwrap()]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        assert!(
            same(&zarrbuf::npy::read(&out).unwrap(), &npy(&node)),
            "{path}"
        );
        let o = zarrbuf_cli(&["check", &zip, "--path", path]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        let o = zarrbuf_cli(&["bench", &zip, "--path", path, "--reps", "1"]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        // zip → directory, then read back.
        let copy = dir.join(format!("{}.zarr", path.replace('/', "_")));
        let o = zarrbuf_cli(&["copy", &zip, copy.to_str().unwrap(), "--src-path", path]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        let a = zarrbuf::open(copy.to_str().unwrap(), "").unwrap();
        assert!(same(
            &a.read_all(&zarrbuf::BufferPrototype::cpu()).unwrap(),
            &npy(&node)
        ));
    }
    let o = zarrbuf_cli(&["read", &zip, "--path", "temperature", "--async"]);
    assert_one_line_error(&o, "zip stores open with the synchronous reader");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn info_on_a_group_prints_the_tree_and_json() {
    for name in [
        "v3_zipstore",
        "v3_group_consolidated",
        "v2_group_consolidated",
    ] {
        let (_, location) = store_named(name);
        let o = zarrbuf_cli(&["info", &location]);
        assert!(o.status.success(), "{name}: {}", text(&o.stderr));
        let out = text(&o.stdout);
        for want in [
            "├── g: group",
            "│   └── labels: int16 [16, 24], chunks [4, 6]",
            "└── temperature: float32 [20, 30], chunks [10, 10]",
            "5 of 6 chunks stored",
            "zstd",
        ] {
            assert!(out.contains(want), "{name}: {want:?} in\n{out}");
        }
        assert_eq!(
            out.contains("[consolidated metadata]"),
            name != "v3_zipstore",
            "{out}"
        );
        if name != "v2_group_consolidated" {
            assert!(out.contains("in shards [8, 12]"), "{name}:\n{out}");
        }
        let o = zarrbuf_cli(&["info", &location, "--json"]);
        assert!(o.status.success(), "{name}: {}", text(&o.stderr));
        let json: Value = serde_json::from_slice(&o.stdout).expect("--json prints JSON");
        let nodes = json["nodes"].as_array().unwrap();
        let shape = |p: &str| nodes.iter().find(|n| n["path"] == p).unwrap()["shape"].clone();
        assert_eq!(shape("temperature"), serde_json::json!([20, 30]), "{name}");
        assert_eq!(shape("g/labels"), serde_json::json!([16, 24]), "{name}");
        assert_eq!(nodes[0]["node_type"], "group", "{name}");
        assert_eq!(json["consolidated"], name != "v3_zipstore", "{name}");
        // An array's info is unchanged; its --json is the one-node listing.
        let o = zarrbuf_cli(&["info", &location, "--path", "g/labels"]);
        assert!(text(&o.stdout).contains("shape:      [16, 24]"), "{name}");
        let o = zarrbuf_cli(&["info", &location, "--path", "g/labels", "--json"]);
        let json: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(json["nodes"].as_array().unwrap().len(), 1);
        assert_eq!(json["nodes"][0]["node_type"], "array");
    }
    let o = zarrbuf_cli(&[
        "info",
        &store_named("v3_zipstore").1,
        "--path",
        "nothing/here",
    ]);
    assert_one_line_error(&o, "no array metadata");
}

#[test]
fn opening_a_group_as_an_array_names_its_arrays() {
    for name in [
        "v3_zipstore",
        "v3_group_consolidated",
        "v2_group_consolidated",
    ] {
        let (_, location) = store_named(name);
        match open_err(&location, "") {
            Error::IsGroup { group, arrays } => {
                assert_eq!(group, location);
                assert_eq!(arrays, ["g/labels", "temperature"], "{name}");
            }
            other => panic!("{name}: {other}"),
        }
        let e = open_err(&location, "g").to_string();
        assert!(
            e.contains("is a zarr group, not an array") && e.contains("g/labels"),
            "{e}"
        );
        let o = zarrbuf_cli(&["read", &location]);
        assert_one_line_error(
            &o,
            "is a zarr group, not an array; the arrays in it: g/labels, temperature",
        );
        assert!(
            !text(&o.stderr).contains("expected string"),
            "no parser message"
        );
    }
}

#[test]
fn groups_in_s3_list_and_refuse_to_open_as_arrays() {
    let Ok(endpoint) = std::env::var("ZARRBUF_TEST_S3_ENDPOINT") else {
        crate::common::skip(
            crate::common::Need::Servers,
            "group listings over the local S3 server",
            "ZARRBUF_TEST_S3_ENDPOINT is not set: source <(bash scripts/start-test-servers.sh)",
        );
        return;
    };
    let o = crate::common::s3::options(&endpoint, "10s");
    let opts = crate::common::s3::opts_ref(&o);
    crate::common::s3::create_bucket(&endpoint, "stores");
    let rt = crate::common::s3::runtime(2);
    let groups: Vec<Value> = stores()
        .into_iter()
        .filter(|s| s["kind"] == "directory")
        .collect();
    assert_eq!(groups.len(), 2);
    rt.block_on(async {
        use object_store::ObjectStoreExt;
        let bucket = zarrbuf::store::object_store_for_url("s3://stores", &opts).unwrap();
        for s in &groups {
            let dir = std::path::PathBuf::from(store_path(s));
            for file in crate::common::walk(&dir) {
                let key = format!(
                    "{}/{}",
                    dir.file_name().unwrap().to_string_lossy(),
                    file.strip_prefix(&dir).unwrap().to_string_lossy()
                );
                let bytes = std::fs::read(&file).unwrap();
                bucket
                    .put(&object_store::path::Path::from(key), bytes.into())
                    .await
                    .unwrap();
            }
        }
    });
    for s in &groups {
        let name = s["name"].as_str().unwrap();
        let url = format!("s3://stores/{name}.zarr");
        // The async open of a group names its arrays.
        let err = match rt.block_on(zarrbuf::open_opt_async(
            &url,
            "",
            &zarrbuf::options::OpenOptions::default().with_store_options(opts.iter().copied()),
        )) {
            Ok(_) => panic!("{url} opened as an array"),
            Err(e) => e,
        };
        assert!(
            matches!(&err, Error::IsGroup { arrays, .. } if arrays == &["g/labels", "temperature"]),
            "{err}"
        );
        // The CLI lists it (credentials and endpoint from the environment).
        let out = Command::new(env!("CARGO_BIN_EXE_zarrbuf"))
            .args(["info", &url, "--json"])
            .env("AWS_ENDPOINT_URL", &endpoint)
            .env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", "testing")
            .env("AWS_REGION", "us-east-1")
            .output()
            .unwrap();
        assert!(out.status.success(), "{url}: {}", text(&out.stderr));
        let json: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(json["consolidated"], true, "{url}");
        let got = json["nodes"].as_array().unwrap();
        let want = s["nodes"].as_array().unwrap();
        assert_eq!(got.len(), want.len(), "{url}");
        for (g, w) in got.iter().zip(want) {
            for field in [
                "path",
                "node_type",
                "shape",
                "chunks_stored",
                "stored_bytes",
            ] {
                assert_eq!(g[field], w[field], "{url} {}: {field}", w["path"]);
            }
        }
    }
}

#[test]
fn arrays_zarrbuf_refuses_are_listed_with_the_reason() {
    // Every refused store lists as one array that says why zarrbuf cannot read it, with
    // the reason the open gives; listing never fails on it. Variable-length strings and
    // bytes, which only NDBuffer reads refuse, list as readable under their zarr type.
    let text = std::fs::read_to_string(root().join("refused.json")).unwrap();
    let refused: Vec<Value> = serde_json::from_str(&text).unwrap();
    for r in refused {
        let name = r["name"].as_str().unwrap();
        let location = root().join(r["store"].as_str().unwrap());
        let h = zarrbuf::list_hierarchy(location.to_str().unwrap(), r["path"].as_str().unwrap())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(h.nodes.len(), 1, "{name}");
        let a = h.nodes[0].array().expect(name);
        assert!(!a.shape.is_empty() || a.chunks_total <= 1, "{name}: {a:?}");
        let rows = r["rows"].to_string();
        if rows.contains("dtype:string") || rows.contains("dtype:variable_length_bytes") {
            // NDBuffer reads refuse them, but they read into a VarLenBuffer: listed readable.
            assert!(a.unreadable.is_none(), "{name}: {a:?}");
            assert!(
                ["string", "variable_length_bytes"].contains(&a.data_type.as_str()),
                "{name}: {a:?}"
            );
        } else if r["feature"].is_null() {
            let why = a
                .unreadable
                .as_deref()
                .unwrap_or_else(|| panic!("{name}: readable?"));
            let phrase = r["error"].as_str().unwrap();
            assert!(
                why.contains(phrase),
                "{name}: {why:?} should contain {phrase:?}"
            );
        }
    }
}
