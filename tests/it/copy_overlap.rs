//! A copy never writes into its own source: `zarrbuf copy` and the library (`create_like`,
//! `resume_like`, `copy_array`) refuse a destination that is the source, lies inside it or
//! holds it — named through another path, a symlink, `..` or a `file://` URL, in memory —
//! with or without `--overwrite`, and the source stays whole; a bind mount of the source is
//! the source (compared by device and inode); and `memory://` is refused on either side.

use crate::common::root;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use zarrbuf::{ArrayLayout, ArrayReadExt, BufferPrototype, options::CopyOptions};
use zarrs::storage::store::MemoryStore;

fn zarrbuf(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_zarrbuf"))
        .args(args)
        .env_remove("ZARRBUF_DEVICE")
        .output()
        .expect("the zarrbuf binary runs")
}

fn fixture() -> String {
    root()
        .join("data/v3_int8.zarr")
        .to_string_lossy()
        .into_owned()
}

/// A fresh directory holding `store.zarr` with the fixture's array at its root and at
/// `inner`, and `link`, a symlink to `store.zarr`.
fn stores(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("copy-overlap-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let store = dir.join("store.zarr");
    let s = store.to_str().unwrap();
    let f = fixture();
    for extra in [&[][..], &["--dst-path", "inner"][..]] {
        let mut args = vec!["copy", f.as_str(), s];
        args.extend_from_slice(extra);
        let o = zarrbuf(&args);
        assert!(o.status.success(), "{o:?}");
    }
    std::os::unix::fs::symlink(&store, dir.join("link")).unwrap();
    dir
}

/// The bytes of the array at `path` of the store at `store`.
fn contents(store: &Path, path: &str) -> Vec<i8> {
    let a = zarrbuf::open(store.to_str().unwrap(), path).unwrap();
    a.read_all(&BufferPrototype::cpu())
        .unwrap()
        .to_vec::<i8>()
        .unwrap()
}

fn assert_refused(o: &Output) {
    assert!(!o.status.success(), "the copy ran: {o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.starts_with("error: ") && err.contains("overlaps the source"),
        "{err}"
    );
}

#[test]
fn cli_refuses_every_spelling_of_an_overlapping_destination() {
    let dir = stores("cli");
    let store = dir.join("store.zarr");
    let want = contents(&store, "");
    let want_inner = contents(&store, "inner");
    let d = dir.to_str().unwrap();
    let cases: Vec<Vec<String>> = [
        // The issue's case: the destination holds the source.
        vec![format!("{d}/store.zarr/inner"), format!("{d}/store.zarr")],
        // The source holds the destination.
        vec![format!("{d}/store.zarr"), format!("{d}/store.zarr/inner")],
        vec![
            format!("{d}/store.zarr"),
            format!("{d}/store.zarr"),
            "--dst-path".into(),
            "inner/deeper".into(),
        ],
        // The same array through `..`, a trailing slash and `.`.
        vec![
            format!("{d}/store.zarr/inner"),
            format!("{d}/store.zarr/inner/../inner/"),
        ],
        vec![
            format!("{d}/store.zarr/./inner"),
            format!("{d}/store.zarr/inner/.."),
        ],
        // Through the symlink, either side.
        vec![format!("{d}/link/inner"), format!("{d}/store.zarr")],
        vec![format!("{d}/store.zarr/inner"), format!("{d}/link")],
        vec![
            format!("{d}/link"),
            format!("{d}/store.zarr"),
            "--src-path".into(),
            "inner".into(),
        ],
        // file:// URLs are the same paths.
        vec![
            format!("file://{d}/store.zarr/inner"),
            format!("{d}/store.zarr"),
        ],
        vec![
            format!("{d}/store.zarr"),
            format!("file://{d}/link"),
            "--src-path".into(),
            "inner".into(),
        ],
    ]
    .into_iter()
    .collect();
    for case in &cases {
        for overwrite in [true, false] {
            let mut args: Vec<&str> = vec!["copy"];
            args.extend(case.iter().map(String::as_str));
            if overwrite {
                args.push("--overwrite");
            }
            assert_refused(&zarrbuf(&args));
            assert_eq!(contents(&store, ""), want, "{args:?} changed the source");
            assert_eq!(contents(&store, "inner"), want_inner, "{args:?} changed it");
        }
    }
    // Beside the source is fine: a sibling path of the same store, and another store whose
    // name merely starts like it.
    let o = zarrbuf(&[
        "copy",
        &format!("{d}/store.zarr"),
        &format!("{d}/link"),
        "--src-path",
        "inner",
        "--dst-path",
        "inner2",
    ]);
    assert!(o.status.success(), "{o:?}");
    assert_eq!(contents(&store, "inner2"), want_inner);
    let o = zarrbuf(&[
        "copy",
        &format!("{d}/store.zarr/inner"),
        &format!("{d}/store.zarr2"),
    ]);
    assert!(o.status.success(), "{o:?}");
    assert_eq!(contents(&dir.join("store.zarr2"), ""), want_inner);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn library_refuses_overlaps_in_one_store_object() {
    let src = zarrbuf::open(&fixture(), "").unwrap();
    let store = Arc::new(MemoryStore::new());
    let layout = ArrayLayout::default();
    let a = zarrbuf::create_like(&src, src.shape(), store.clone(), "/a", &layout, false).unwrap();
    zarrbuf::copy_array(&src, &a, &CopyOptions::default()).unwrap();
    let want = a
        .read_all(&BufferPrototype::cpu())
        .unwrap()
        .to_vec::<i8>()
        .unwrap();
    for path in ["/", "/a", "/a/", "/a/b"] {
        for overwrite in [true, false] {
            let err = zarrbuf::create_like(&a, a.shape(), store.clone(), path, &layout, overwrite)
                .err()
                .unwrap_or_else(|| panic!("{path} was created"));
            assert!(err.to_string().contains("overlaps the source"), "{err}");
        }
        let err = zarrbuf::resume_like(&a, a.shape(), store.clone(), path, &layout)
            .err()
            .expect("refused");
        assert!(err.to_string().contains("overlaps the source"), "{err}");
    }
    let err = zarrbuf::copy_array(&a, &a, &CopyOptions::default()).unwrap_err();
    assert!(err.to_string().contains("overlaps the source"), "{err}");
    let got = a
        .read_all(&BufferPrototype::cpu())
        .unwrap()
        .to_vec::<i8>()
        .unwrap();
    assert_eq!(got, want);
    // A sibling is fine, and so is another memory:// store (each is new).
    zarrbuf::create_like(&a, a.shape(), store.clone(), "/ab", &layout, false).unwrap();
    let other = zarrbuf::store::open_store("memory://").unwrap();
    zarrbuf::create_like(&a, a.shape(), other, "/a", &layout, false).unwrap();
}

#[test]
fn library_refuses_overlapping_locations_of_stores_it_opened() {
    let dir = stores("library");
    let d = dir.to_str().unwrap();
    let store = dir.join("store.zarr");
    let want = contents(&store, "inner");
    let layout = ArrayLayout::default();
    let src = zarrbuf::open(&format!("{d}/store.zarr/inner"), "").unwrap();
    for dst in [
        format!("{d}/link"),
        format!("{d}/store.zarr/inner/.."),
        format!("file://{d}/store.zarr"),
    ] {
        let target = zarrbuf::store::open_store(&dst).unwrap();
        for overwrite in [true, false] {
            let err =
                zarrbuf::create_like(&src, src.shape(), target.clone(), "/", &layout, overwrite)
                    .err()
                    .unwrap_or_else(|| panic!("{dst} was created"));
            assert!(err.to_string().contains("overlaps the source"), "{err}");
        }
    }
    // The async reader's file:// stores are located too.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let async_src = rt
        .block_on(zarrbuf::open_async(&format!("file://{d}/link"), "inner"))
        .unwrap();
    let target = zarrbuf::store::open_store(&format!("{d}/store.zarr/inner")).unwrap();
    let err = zarrbuf::create_like(&async_src, async_src.shape(), target, "/x", &layout, true)
        .err()
        .expect("refused");
    assert!(err.to_string().contains("overlaps the source"), "{err}");
    // copy_array on arrays opened at overlapping locations.
    let root = zarrbuf::open(&format!("{d}/link"), "").unwrap();
    let err = zarrbuf::copy_array(&src, &root, &CopyOptions::default()).unwrap_err();
    assert!(err.to_string().contains("overlaps the source"), "{err}");
    assert_eq!(contents(&store, "inner"), want);
    // Another directory is fine.
    let elsewhere = zarrbuf::store::open_store(&format!("{d}/store.zarr2")).unwrap();
    zarrbuf::create_like(&src, src.shape(), elsewhere, "/", &layout, false).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Runs `zarrbuf ARGS` in a private mount namespace where `target` is a bind mount of
/// `source` (`unshare -m`: the mount is gone when the command ends); `None` when this user
/// cannot bind-mount.
fn zarrbuf_through_bind_mount(source: &Path, target: &Path, args: &[&str]) -> Option<Output> {
    let script = r#"mount --bind "$1" "$2" || exit 97; shift 2; exec "$@""#;
    let o = Command::new("unshare")
        .args(["-m", "sh", "-c", script, "sh"])
        .arg(source)
        .arg(target)
        .arg(env!("CARGO_BIN_EXE_zarrbuf"))
        .args(args)
        .env_remove("ZARRBUF_DEVICE")
        .output()
        .ok()?;
    // 97: mount refused; unshare's own failure (no namespaces for this user) exits 1 before
    // anything ran and says so on stderr.
    let unshare_failed = String::from_utf8_lossy(&o.stderr).starts_with("unshare:");
    (o.status.code() != Some(97) && !unshare_failed).then_some(o)
}

#[test]
fn cli_refuses_a_destination_that_is_a_bind_mount_of_the_source() {
    let dir = stores("bind-mount");
    let d = dir.to_str().unwrap();
    let store = dir.join("store.zarr");
    let mount = dir.join("mnt");
    std::fs::create_dir_all(&mount).unwrap();
    let want = contents(&store, "");
    let want_inner = contents(&store, "inner");
    let m = mount.to_str().unwrap();
    let s = format!("{d}/store.zarr");
    // `mnt` is `store.zarr` by identity only: no symlink or `..` leads from one to the other.
    let cases: Vec<Vec<String>> = vec![
        vec![s.clone(), m.into()],
        vec![format!("{s}/inner"), m.into()],
        vec![s.clone(), format!("{m}/inner")],
        vec![s.clone(), format!("{m}/new/deeper")],
        vec![m.into(), s.clone()],
        vec![s.clone(), m.into(), "--dst-path".into(), "inner/x".into()],
    ];
    for case in &cases {
        for flag in ["--overwrite", "--resume", ""] {
            let mut args: Vec<&str> = vec!["copy"];
            args.extend(case.iter().map(String::as_str));
            if !flag.is_empty() {
                args.push(flag);
            }
            let Some(o) = zarrbuf_through_bind_mount(&store, &mount, &args) else {
                zarrbuf_test_support::skip(
                    zarrbuf_test_support::Need::Mounts,
                    "copies into a bind mount of their source",
                    "this user cannot bind-mount in a private mount namespace (unshare -m)",
                );
                std::fs::remove_dir_all(&dir).unwrap();
                return;
            };
            assert_refused(&o);
            assert_eq!(contents(&store, ""), want, "{args:?} changed the source");
            assert_eq!(contents(&store, "inner"), want_inner, "{args:?} changed it");
        }
    }
    // Beside the source through the mount is still fine.
    let o = zarrbuf_through_bind_mount(
        &store,
        &mount,
        &["copy", &format!("{s}/inner"), m, "--dst-path", "inner2"],
    )
    .expect("mounted above");
    assert!(o.status.success(), "{o:?}");
    assert_eq!(contents(&store, "inner2"), want_inner);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn cli_refuses_a_memory_store_on_either_side() {
    let dir = stores("memory");
    let s = dir.join("store.zarr").to_string_lossy().into_owned();
    let want = contents(&dir.join("store.zarr"), "");
    for args in [
        vec!["copy", s.as_str(), "memory://x"],
        vec!["copy", s.as_str(), "MEMORY://", "--overwrite"],
        vec!["copy", "memory://", s.as_str(), "--overwrite"],
    ] {
        let o = zarrbuf(&args);
        assert!(!o.status.success(), "{args:?} ran: {o:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.starts_with("error: ") && err.contains("memory:// store lives only"),
            "{args:?}: {err}"
        );
        assert!(!String::from_utf8_lossy(&o.stderr).contains("copied"));
        assert_eq!(contents(&dir.join("store.zarr"), ""), want, "{args:?}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
