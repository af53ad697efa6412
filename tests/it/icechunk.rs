//! Icechunk repositories (feature `icechunk`): the repository fixtures/data/icechunk_repo,
//! written by the icechunk Python package (fixtures/icechunk.json describes its branches,
//! tag, a snapshot and the .npy of every array at each), read at every version on every
//! prototype, sync and async, through the API and the CLI; copies committed into new
//! repositories and read back by the icechunk Python package (`.venv/bin/python`); a failed
//! copy commits nothing; virtual chunk references; the repository over the local S3 server.
//!
//! The parts that need `.venv` (icechunk for Python) or the local S3 server skip visibly
//! without them and fail under ZARRBUF_REQUIRE_SERVERS=1, as CI runs them.
use crate::common::{self, Need, prototypes, root, skip, walk};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use zarrbuf::icechunk::IcechunkVersion;
use zarrbuf::{
    ArrayReadAsyncExt, ArrayReadExt, ArrayWriteExt, BufferPrototype, Error, NDBuffer,
    options::OpenOptions,
};

fn spec() -> Value {
    let text =
        std::fs::read_to_string(root().join("icechunk.json")).expect("fixtures/icechunk.json");
    serde_json::from_str(&text).expect("icechunk.json is JSON")
}

fn repo() -> String {
    root()
        .join(spec()["repo"].as_str().unwrap())
        .to_string_lossy()
        .into_owned()
}

/// Each version of icechunk.json with its arrays' paths and expected data.
fn versions() -> Vec<(IcechunkVersion, Vec<(String, NDBuffer)>)> {
    spec()["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            let version = if let Some(b) = v["branch"].as_str() {
                IcechunkVersion::Branch(b.into())
            } else if let Some(t) = v["tag"].as_str() {
                IcechunkVersion::Tag(t.into())
            } else {
                IcechunkVersion::Snapshot(v["snapshot"].as_str().unwrap().into())
            };
            let arrays = v["arrays"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(path, npy)| {
                    let want = zarrbuf::npy::read(&root().join(npy.as_str().unwrap())).unwrap();
                    (path.clone(), want)
                })
                .collect();
            (version, arrays)
        })
        .collect()
}

fn same(what: &str, got: &NDBuffer, want: &NDBuffer) {
    assert_eq!(got.shape(), want.shape(), "{what}");
    assert_eq!(got.dtype(), want.dtype(), "{what}");
    assert!(
        got.to_native_bytes().unwrap() == want.to_native_bytes().unwrap(),
        "{what}: contents differ"
    );
}

fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("icechunk-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn zarrbuf_cli(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_zarrbuf"));
    cmd.args(args).env_remove("ZARRBUF_DEVICE");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("the zarrbuf binary runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Asserts a one-line `error:` failure that contains `text`.
fn fails_with(o: &Output, text: &str) {
    let err = stderr(o);
    assert!(
        !o.status.success(),
        "expected a failure, got success: {err}"
    );
    assert_eq!(err.lines().count(), 1, "one error line: {err}");
    assert!(err.starts_with("error: ") && err.contains(text), "{err}");
}

/// `.venv/bin/python` when it has the icechunk package, else a visible skip.
fn python() -> Option<PathBuf> {
    let python = root().join("../.venv/bin/python");
    let ok = Command::new(&python)
        .args(["-c", "import icechunk, zarr"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        skip(
            Need::Servers,
            "reading icechunk repositories back with the icechunk Python package",
            ".venv/bin/python with icechunk is missing: bash scripts/setup-python-env.sh",
        );
        return None;
    }
    Some(python)
}

/// Runs Python `code` with `args`; panics with its exit status and output when it fails.
///
/// A script that ran to its end leaves with `os._exit(0)`, skipping the interpreter's
/// teardown: under load the icechunk package's native threads have made a finished script
/// exit non-zero there, silently, after every line of its output was right.
fn run_python(python: &Path, code: &str, args: &[&str]) -> String {
    let code =
        format!("{code}\nimport os, sys\nsys.stdout.flush()\nsys.stderr.flush()\nos._exit(0)\n");
    let out = Command::new(python)
        .arg("-c")
        .arg(code)
        .args(args)
        .env("ICECHUNK_LOG", "error")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "python failed ({}): {text}",
        out.status
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Python: the commit messages of `branch` (newest first), one per line, then `ok` when the
/// array at `path` reads as the .npy `npy` (when given).
const READBACK: &str = r#"
import sys, icechunk, zarr, numpy as np
repo_dir, branch = sys.argv[1], sys.argv[2]
repo = icechunk.Repository.open(icechunk.local_filesystem_storage(repo_dir))
for snap in repo.ancestry(branch=branch):
    print(snap.message)
session = repo.readonly_session(branch=branch)
for path, npy in zip(sys.argv[3::2], sys.argv[4::2]):
    got = zarr.open_array(session.store, path=path, mode="r")[...]
    want = np.load(npy)
    assert got.dtype == want.dtype and np.array_equal(got, want), (path, got, want)
    print("ok", path)
"#;

#[test]
fn every_array_reads_exactly_at_every_version_on_every_prototype() {
    let repo = repo();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    for (version, arrays) in versions() {
        let opts = OpenOptions::default().with_version(version.clone());
        for (path, want) in &arrays {
            let array = zarrbuf::open_opt(&repo, path, &opts)
                .unwrap_or_else(|e| panic!("{path} at {version}: {e}"));
            let remote = rt
                .block_on(zarrbuf::open_opt_async(&repo, path, &opts))
                .unwrap_or_else(|e| panic!("{path} at {version} (async): {e}"));
            for (pname, proto) in prototypes() {
                let what = format!("{path} at {version} on {pname}");
                let got = array
                    .read_all(&proto)
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                assert_eq!(got.memory(), proto.memory());
                same(&what, &got, want);
                let got = rt
                    .block_on(remote.read_all_async(&proto))
                    .unwrap_or_else(|e| panic!("{what} (async): {e}"));
                same(&format!("{what} (async)"), &got, want);
                // A part of it, across chunk (and shard) boundaries.
                let part: Vec<_> = want.shape().iter().map(|&n| 1..n as u64 - 1).collect();
                let got = array.read(&part, &proto).unwrap();
                assert_eq!(
                    got.shape(),
                    part.iter()
                        .map(|r| (r.end - r.start) as usize)
                        .collect::<Vec<_>>()
                );
            }
        }
    }
    // Without options the repository opens at main's tip, as version "branch main" does.
    let main = &versions()[0];
    assert_eq!(main.0, IcechunkVersion::Branch("main".into()));
    let (path, want) = &main.1[0];
    let got = zarrbuf::open(&repo, path)
        .unwrap()
        .read_all(&BufferPrototype::cpu())
        .unwrap();
    same("default version", &got, want);
    // The versions differ where the commits changed them.
    let v1 = &versions()[1];
    assert_ne!(
        main.1[0].1.to_native_bytes().unwrap(),
        v1.1[0].1.to_native_bytes().unwrap()
    );
}

#[test]
fn the_hierarchy_lists_at_each_version_and_groups_name_their_arrays() {
    let repo = repo();
    let h = zarrbuf::list_hierarchy(&repo, "").unwrap();
    let paths: Vec<&str> = h.nodes.iter().map(|n| n.path.as_str()).collect();
    assert_eq!(paths, ["", "g", "g/labels", "temperature"]);
    let t = h.nodes[3].array().unwrap();
    assert_eq!((t.chunks_stored, t.chunks_total), (6, 6));
    let dev = zarrbuf::list_hierarchy_opt(&repo, "g", &OpenOptions::default().with_branch("dev"))
        .unwrap();
    assert_eq!(dev.nodes.len(), 2);
    let Err(Error::IsGroup { arrays, .. }) = zarrbuf::open(&repo, "") else {
        panic!("the root is a group")
    };
    assert_eq!(arrays, ["g/labels", "temperature"]);
}

#[test]
fn versions_that_do_not_exist_and_misplaced_options_are_clear_errors() {
    let repo = repo();
    let err = |opts: OpenOptions| {
        zarrbuf::open_opt(&repo, "temperature", &opts)
            .err()
            .expect("an error")
            .to_string()
    };
    let e = err(OpenOptions::default().with_branch("nope"));
    assert!(
        e.contains("no branch \"nope\"") && e.contains("dev, main"),
        "{e}"
    );
    let e = err(OpenOptions::default().with_tag("v9"));
    assert!(e.contains("no tag \"v9\"") && e.contains("v1"), "{e}");
    let e = err(OpenOptions::default().with_snapshot("not-an-id"));
    assert!(e.contains("not an icechunk snapshot id"), "{e}");
    let e = err(OpenOptions::default().with_snapshot("AAAAAAAAAAAAAAAAAAAA"));
    assert!(e.contains("snapshot"), "{e}");
    // A version for a zarr store.
    let zarr_dir = root().join("data/v3_int8.zarr");
    let e = zarrbuf::open_opt(
        zarr_dir.to_str().unwrap(),
        "",
        &OpenOptions::default().with_tag("v1"),
    )
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("not an icechunk repository"), "{e}");
    assert!(IcechunkVersion::from_choice(Some("a"), None, Some("b")).is_err());
}

#[test]
fn reads_refuse_writes_with_a_sentence() {
    let repo = repo();
    for opts in [
        OpenOptions::default(),
        OpenOptions::default().with_tag("v1"),
    ] {
        let array = zarrbuf::open_opt(&repo, "temperature", &opts).unwrap();
        let patch = NDBuffer::from_vec(vec![0f32; 4], &[2, 2]).unwrap();
        let e = array.write(&[0..2, 0..2], &patch).unwrap_err().to_string();
        assert!(
            e.contains("zarrbuf copy SRC") && e.contains("--branch"),
            "{e}"
        );
    }
}

#[test]
fn the_cli_reads_each_version() {
    let repo = repo();
    let dir = scratch("cli");
    std::fs::create_dir_all(&dir).unwrap();
    for (version, arrays) in versions() {
        let flag = format!("--{}", version.to_string().split(' ').next().unwrap());
        let name = version.to_string().split(' ').nth(1).unwrap().to_string();
        for (path, want) in &arrays {
            let out = dir.join("out.npy");
            let o = zarrbuf_cli(
                &[
                    "read",
                    &repo,
                    "--path",
                    path,
                    &flag,
                    &name,
                    "--out",
                    out.to_str().unwrap(),
                ],
                &[],
            );
            assert!(o.status.success(), "{}", stderr(&o));
            same(
                &format!("cli {path} {flag} {name}"),
                &zarrbuf::npy::read(&out).unwrap(),
                want,
            );
            let o = zarrbuf_cli(
                &[
                    "read",
                    &repo,
                    "--path",
                    path,
                    &flag,
                    &name,
                    "--async",
                    "--out",
                    out.to_str().unwrap(),
                ],
                &[],
            );
            assert!(o.status.success(), "{}", stderr(&o));
            same(
                &format!("cli async {path}"),
                &zarrbuf::npy::read(&out).unwrap(),
                want,
            );
        }
    }
    let o = zarrbuf_cli(&["info", &repo, "--branch", "dev"], &[]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success() && text.contains("labels: int16"),
        "{text}{}",
        stderr(&o)
    );
    let o = zarrbuf_cli(
        &["info", &repo, "--path", "temperature", "--tag", "v1"],
        &[],
    );
    assert!(String::from_utf8_lossy(&o.stdout).contains("[24, 40]"));
    let o = zarrbuf_cli(&["check", &repo, "--tag", "v1"], &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("0 damaged"), "{}", stderr(&o));
    fails_with(
        &zarrbuf_cli(&["check", &repo, "--repair"], &[]),
        "changes only by commits",
    );
    let o = zarrbuf_cli(
        &[
            "bench",
            &repo,
            "--path",
            "temperature",
            "--reps",
            "1",
            "--branch",
            "main",
        ],
        &[],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    fails_with(
        &zarrbuf_cli(
            &["read", &repo, "--path", "temperature", "--tag", "v9"],
            &[],
        ),
        "no tag \"v9\"",
    );
    let o = zarrbuf_cli(&["read", &repo, "--branch", "a", "--tag", "b"], &[]);
    assert!(
        !o.status.success() && stderr(&o).contains("cannot be used with"),
        "{}",
        stderr(&o)
    );
}

/// A copy of the fixture repository to write into.
fn repo_copy(name: &str) -> PathBuf {
    let dir = scratch(name);
    let src = PathBuf::from(repo());
    for file in walk(&src) {
        let to = dir.join(file.strip_prefix(&src).unwrap());
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(&file, &to).unwrap();
    }
    dir
}

#[test]
fn copies_commit_one_snapshot_that_icechunk_reads_back() {
    let Some(python) = python() else { return };
    let v3_int8 = root().join("data/v3_int8.zarr");
    let npy_int8 = root().join("data/v3_int8.npy");
    // Into a new repository (the directory does not exist yet), on main.
    let new = scratch("copy-new");
    let o = zarrbuf_cli(
        &[
            "copy",
            v3_int8.to_str().unwrap(),
            new.to_str().unwrap(),
            "--dst-path",
            "x",
            "--chunks",
            "5,5",
            "--memory",
            "1",
            "--message",
            "add x",
        ],
        &[],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("committed snapshot"), "{}", stderr(&o));
    let out = run_python(
        &python,
        READBACK,
        &[
            new.to_str().unwrap(),
            "main",
            "x",
            npy_int8.to_str().unwrap(),
        ],
    );
    assert_eq!(out, "add x\nRepository initialized\nok x\n");
}

#[test]
fn a_copy_into_a_branch_commits_there_and_leaves_main() {
    let Some(python) = python() else { return };
    // From the fixture repository at tag v1 into a branch of a copy of it, rechunked.
    let (version, arrays) = &versions()[1];
    assert_eq!(version, &IcechunkVersion::Tag("v1".into()));
    let (_, want) = arrays.iter().find(|(p, _)| p == "temperature").unwrap();
    let want_npy = scratch("copy-want.npy");
    zarrbuf::npy::write(&want_npy, want).unwrap();
    let target = repo_copy("copy-branch");
    let o = zarrbuf_cli(
        &[
            "copy",
            &repo(),
            target.to_str().unwrap(),
            "--src-path",
            "temperature",
            "--src-tag",
            "v1",
            "--dst-path",
            "t8",
            "--chunks",
            "8,8",
            "--shards",
            "8,16",
            "--branch",
            "dev",
            "--message",
            "rechunk",
        ],
        &[],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let out = run_python(
        &python,
        READBACK,
        &[
            target.to_str().unwrap(),
            "dev",
            "t8",
            want_npy.to_str().unwrap(),
        ],
    );
    assert!(
        out.starts_with("rechunk\nrelabel\ntemperature and labels\n"),
        "{out}"
    );
    assert!(out.ends_with("ok t8\n"), "{out}");
    // zarrbuf reads it back too, and main did not move.
    let got = zarrbuf::open_opt(
        target.to_str().unwrap(),
        "t8",
        &OpenOptions::default().with_branch("dev"),
    )
    .unwrap()
    .read_all(&BufferPrototype::cpu())
    .unwrap();
    same("t8 on dev", &got, want);
    let out = run_python(&python, READBACK, &[target.to_str().unwrap(), "main"]);
    assert!(out.starts_with("warm the first chunk\n"), "{out}");
}

#[test]
fn a_library_copy_through_icechunk_writer_commits_one_snapshot() {
    let Some(python) = python() else { return };
    let v3_int8 = root().join("data/v3_int8.zarr");
    let npy_int8 = root().join("data/v3_int8.npy");
    let target = repo_copy("copy-lib");
    // Through the library: IcechunkWriter, then commit.
    let src = zarrbuf::open(v3_int8.to_str().unwrap(), "").unwrap();
    let writer = zarrbuf::icechunk::IcechunkWriter::open(target.to_str().unwrap(), "main").unwrap();
    let dst = zarrbuf::create_like(
        &src,
        src.shape(),
        writer.store(),
        "/lib",
        &zarrbuf::ArrayLayout::default(),
        false,
    )
    .unwrap();
    zarrbuf::copy_array(&src, &dst, &zarrbuf::options::CopyOptions::default()).unwrap();
    let id = writer.commit("from the library").unwrap();
    let out = run_python(
        &python,
        READBACK,
        &[
            target.to_str().unwrap(),
            "main",
            "lib",
            npy_int8.to_str().unwrap(),
        ],
    );
    assert!(
        out.starts_with("from the library\nwarm the first chunk\n"),
        "{out}"
    );
    let back = zarrbuf::open_opt(
        target.to_str().unwrap(),
        "lib",
        &OpenOptions::default().with_snapshot(&id),
    )
    .unwrap();
    assert_eq!(back.shape(), src.shape());
}

#[test]
fn a_failed_copy_commits_nothing() {
    let Some(python) = python() else { return };
    // A source whose last chunk does not decode: the copy fails after earlier blocks were
    // written into the session.
    let src_dir = scratch("failing-src");
    let fixture = root().join("data/v3_int8.zarr");
    for file in walk(&fixture) {
        let to = src_dir.join(file.strip_prefix(&fixture).unwrap());
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(&file, &to).unwrap();
    }
    let chunks: Vec<PathBuf> = walk(&src_dir)
        .into_iter()
        .filter(|p| p.file_name().unwrap() != "zarr.json")
        .collect();
    std::fs::write(chunks.last().unwrap(), b"not gzip").unwrap();
    let target = repo_copy("failed-copy");
    let before = run_python(&python, READBACK, &[target.to_str().unwrap(), "main"]);
    let o = zarrbuf_cli(
        &[
            "copy",
            src_dir.to_str().unwrap(),
            target.to_str().unwrap(),
            "--dst-path",
            "x",
            "--chunks",
            "4,4",
            "--memory",
            "1",
            "--message",
            "must not appear",
        ],
        &[],
    );
    fails_with(&o, "(source)");
    let after = run_python(&python, READBACK, &[target.to_str().unwrap(), "main"]);
    assert_eq!(before, after, "a failed copy committed");
    assert!(zarrbuf::open(target.to_str().unwrap(), "x").is_err());

    // Refused up front: a tag or snapshot as the destination, --resume into a branch.
    let v3 = fixture.to_str().unwrap();
    let t = target.to_str().unwrap();
    fails_with(
        &zarrbuf_cli(&["copy", v3, t, "--tag", "v1"], &[]),
        "names a snapshot, which never changes",
    );
    fails_with(
        &zarrbuf_cli(&["copy", v3, t, "--snapshot", "1CECHNKREP0F1RSTCMT0"], &[]),
        "--branch NAME",
    );
    fails_with(
        &zarrbuf_cli(&["copy", v3, t, "--branch", "main", "--resume"], &[]),
        "run it again without --resume",
    );
    fails_with(
        &zarrbuf_cli(&["copy", v3, t, "--branch", "nope"], &[]),
        "no branch \"nope\"",
    );
    // A directory that is neither empty nor a repository does not become one.
    let e = zarrbuf::icechunk::IcechunkWriter::open(v3, "main")
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("neither an icechunk repository nor empty"),
        "{e}"
    );
    assert_eq!(before, run_python(&python, READBACK, &[t, "main"]));
}

/// Python: a repository at argv[1]/repo whose array `v` has one virtual chunk, the bytes of
/// argv[1]/raw.bin (int32 0..16), in a container for file://argv[1]/.
const VIRTUAL: &str = r#"
import sys, icechunk, zarr, numpy as np
d = sys.argv[1]
np.arange(16, dtype="<i4").tofile(f"{d}/raw.bin")
config = icechunk.RepositoryConfig.default()
config.set_virtual_chunk_container(icechunk.VirtualChunkContainer(f"file://{d}/", icechunk.local_filesystem_store(d)))
repo = icechunk.Repository.create(icechunk.local_filesystem_storage(f"{d}/repo"), config,
                                  authorize_virtual_chunk_access={f"file://{d}/": None})
s = repo.writable_session("main")
zarr.create_array(s.store, name="v", shape=(16,), chunks=(16,), dtype="<i4", compressors=None, fill_value=0)
s.store.set_virtual_ref("v/c/0", f"file://{d}/raw.bin", offset=0, length=64)
s.commit("virtual")
"#;

#[test]
fn virtual_chunks_read_from_authorized_containers_only() {
    let Some(python) = python() else { return };
    let dir = scratch("virtual");
    std::fs::create_dir_all(&dir).unwrap();
    let dir = std::fs::canonicalize(&dir).unwrap();
    run_python(&python, VIRTUAL, &[dir.to_str().unwrap()]);
    let repo = dir.join("repo");
    let repo = repo.to_str().unwrap();
    let e = zarrbuf::open(repo, "v")
        .unwrap()
        .read_all(&BufferPrototype::cpu())
        .unwrap_err()
        .to_string();
    assert!(e.contains("v/c/0") && e.contains("virtual chunk"), "{e}");
    assert!(e.contains("--virtual-access"), "{e}");
    let prefix = format!("file://{}/", dir.display());
    let opts = OpenOptions::default().with_virtual_access(&prefix);
    let got = zarrbuf::open_opt(repo, "v", &opts)
        .unwrap()
        .read_all(&BufferPrototype::cpu())
        .unwrap();
    assert_eq!(got.to_vec::<i32>().unwrap(), (0..16).collect::<Vec<i32>>());
    let o = zarrbuf_cli(
        &["read", repo, "--path", "v", "--virtual-access", &prefix],
        &[],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    fails_with(
        &zarrbuf_cli(&["read", repo, "--path", "v"], &[]),
        "virtual chunk",
    );
}

/// Uploads the fixture repository, as it is on disk, to `url` on the local S3 server.
fn upload_fixture(endpoint: &str, url: &str) {
    let o = common::s3::options(endpoint, "10s");
    let rt = common::s3::runtime(2);
    let store = zarrbuf::store::object_store_for_url(url, &common::s3::opts_ref(&o)).unwrap();
    let src = PathBuf::from(repo());
    rt.block_on(async {
        use object_store::ObjectStoreExt;
        for file in walk(&src) {
            let key = file
                .strip_prefix(&src)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            store
                .put(
                    &object_store::path::Path::from(key),
                    std::fs::read(&file).unwrap().into(),
                )
                .await
                .unwrap();
        }
    });
}

#[test]
fn repositories_in_the_local_s3_server_read_and_take_copies() {
    let Ok(endpoint) = std::env::var("ZARRBUF_TEST_S3_ENDPOINT") else {
        skip(
            Need::Servers,
            "icechunk over the local S3 server",
            "ZARRBUF_TEST_S3_ENDPOINT is not set: source <(bash scripts/start-test-servers.sh)",
        );
        return;
    };
    common::s3::create_bucket(&endpoint, "icechunk");
    let env = [
        ("AWS_ENDPOINT_URL", endpoint.as_str()),
        ("AWS_ACCESS_KEY_ID", "testing"),
        ("AWS_SECRET_ACCESS_KEY", "testing"),
        ("AWS_REGION", "us-east-1"),
    ];
    upload_fixture(&endpoint, "s3://icechunk/fixture");
    let dir = scratch("s3");
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("out.npy");
    for (version, arrays) in versions() {
        let flag = format!("--{}", version.to_string().split(' ').next().unwrap());
        let name = version.to_string().split(' ').nth(1).unwrap().to_string();
        for (path, want) in &arrays {
            let o = zarrbuf_cli(
                &[
                    "read",
                    "s3://icechunk/fixture",
                    "--path",
                    path,
                    &flag,
                    &name,
                    "--out",
                    out.to_str().unwrap(),
                ],
                &env,
            );
            assert!(o.status.success(), "{}", stderr(&o));
            same(
                &format!("s3 {path} {flag} {name}"),
                &zarrbuf::npy::read(&out).unwrap(),
                want,
            );
        }
    }
    // Without a version flag the prefix is recognised after a zarr open found nothing.
    let (path, want) = &versions()[0].1[0];
    let o = zarrbuf_cli(
        &[
            "read",
            "s3://icechunk/fixture",
            "--path",
            path,
            "--out",
            out.to_str().unwrap(),
        ],
        &env,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    same(
        "s3 main by probing",
        &zarrbuf::npy::read(&out).unwrap(),
        want,
    );
    let o = zarrbuf_cli(&["info", "s3://icechunk/fixture"], &env);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("temperature: float32"),
        "{}",
        stderr(&o)
    );
    // A copy into a new repository in S3 (a prefix of its own: the server outlives a run),
    // committed and read back.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let new = format!("s3://icechunk/new-{}-{nanos}", std::process::id());
    let v3_int8 = root().join("data/v3_int8.zarr");
    let o = zarrbuf_cli(
        &[
            "copy",
            v3_int8.to_str().unwrap(),
            &new,
            "--dst-path",
            "x",
            "--message",
            "s3 copy",
        ],
        &env,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let o = zarrbuf_cli(
        &[
            "read",
            &new,
            "--path",
            "x",
            "--branch",
            "main",
            "--out",
            out.to_str().unwrap(),
        ],
        &env,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    same(
        "s3 copy",
        &zarrbuf::npy::read(&out).unwrap(),
        &zarrbuf::npy::read(&root().join("data/v3_int8.npy")).unwrap(),
    );
}

#[test]
fn a_fifo_or_a_link_out_in_the_repository_is_an_error_not_a_hang() {
    let (_, arrays) = versions().into_iter().next().expect("a version");
    let path = arrays[0].0.clone();
    // A chunk and a manifest icechunk would open replaced by FIFOs (a blocking open of one
    // never returns).
    for folder in ["chunks", "manifests"] {
        let dir = repo_copy(&format!("ic-fifo-{folder}"));
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir.join(folder))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        for at in &files {
            std::fs::remove_file(at).unwrap();
            let made = Command::new("mkfifo")
                .arg(at)
                .status()
                .expect("mkfifo runs");
            assert!(made.success());
        }
        let err = match zarrbuf::open(dir.to_str().unwrap(), &path) {
            Ok(_) => panic!("{folder}: a repository with FIFOs opened"),
            Err(e) => e.to_string(),
        };
        assert!(
            err.contains("FIFO") && err.contains(folder),
            "{folder}: {err}"
        );
        let o = zarrbuf_cli(&["check", dir.to_str().unwrap(), "--path", &path], &[]);
        fails_with(&o, "FIFO");
    }
    // A link to a file outside the repository.
    let dir = repo_copy("ic-link-out");
    let outside = scratch("ic-link-out-target");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret"), b"not a chunk").unwrap();
    std::os::unix::fs::symlink(outside.join("secret"), dir.join("chunks/YYYYYYYY")).unwrap();
    let err = match zarrbuf::open(dir.to_str().unwrap(), &path) {
        Ok(_) => panic!("a repository with a link out opened"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("leads out"), "{err}");
}
