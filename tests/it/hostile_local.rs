//! Damaged and hostile directory stores, through the `zarrbuf` binary as a user runs it:
//! keys that are FIFOs, directories or links out of the store are errors on every read
//! route and `unreadable` findings in `check`, never hangs; `check --repair` removes only
//! what it read and failed to decode and temporary files whose writer is gone; a second
//! writer into an array is refused; `--overwrite` leaves no directory of the old array;
//! output to a closed or full stdout ends without an internal error.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};
use zarrbuf::{ArrayWriteExt, NDBuffer};

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target/tmp/hostile_local")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A copy of fixture `name` (e.g. `v3_int8`) at `dir/<name>.zarr`.
fn fixture_copy(dir: &Path, name: &str) -> PathBuf {
    let from = crate::common::root().join(format!("data/{name}.zarr"));
    let to = dir.join(format!("{name}.zarr"));
    for file in crate::common::walk(&from) {
        let target = to.join(file.strip_prefix(&from).unwrap());
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::copy(&file, &target).unwrap();
    }
    to
}

fn command(args: &[&str]) -> Command {
    command_as(args, None)
}

/// `zarrbuf args`, as user and group `uid` when given (through util-linux's `setpriv`: root
/// reads files whatever their mode, so permission tests run their commands as another user).
fn command_as(args: &[&str], uid: Option<u32>) -> Command {
    let mut c = match uid {
        None => Command::new(env!("CARGO_BIN_EXE_zarrbuf")),
        Some(uid) => {
            let mut c = Command::new("setpriv");
            c.args([
                format!("--reuid={uid}"),
                format!("--regid={uid}"),
                "--clear-groups".into(),
                env!("CARGO_BIN_EXE_zarrbuf").into(),
            ]);
            c
        }
    };
    c.args(args)
        .env_remove("ZARRBUF_DEVICE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// Runs `zarrbuf args`; a run still going after a minute is a hang and fails the test.
fn zarrbuf(args: &[&str]) -> Output {
    zarrbuf_as(args, None)
}

/// [`zarrbuf`] as user `uid` when given (see [`command_as`]).
fn zarrbuf_as(args: &[&str], uid: Option<u32>) -> Output {
    let mut child = command_as(args, uid).spawn().unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("zarrbuf {args:?} hangs");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Asserts a failure that is one `error:` line containing `want`.
fn assert_error(o: &Output, want: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{}", text(o));
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("error: ") && err.contains(want),
        "{want:?} not in {err}"
    );
}

/// The findings of `check --json` of `store` (key, problem) and whether it exited 0.
fn check_json(store: &str, repair: bool) -> (bool, Vec<(String, String)>) {
    check_json_as(store, repair, None)
}

/// [`check_json`] as user `uid` when given (see [`command_as`]).
fn check_json_as(store: &str, repair: bool, uid: Option<u32>) -> (bool, Vec<(String, String)>) {
    let mut args = vec!["check", store, "--json"];
    if repair {
        args.push("--repair");
    }
    let o = zarrbuf_as(&args, uid);
    let report: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("check --json of {store}: {e}: {}", text(&o)));
    let findings = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["key"].as_str().unwrap().to_string(),
                f["problem"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    (o.status.success(), findings)
}

fn has(findings: &[(String, String)], key: &str, problem: &str) -> bool {
    findings.iter().any(|(k, p)| k == key && p == problem)
}

/// Every read route of `store`: the directory store, `file://` and the async reader.
fn read_routes(store: &Path) -> Vec<Vec<String>> {
    let path = store.to_string_lossy().into_owned();
    let url = format!("file://{path}");
    vec![
        vec!["read".into(), path.clone()],
        vec![
            "read".into(),
            path.clone(),
            "--subset".into(),
            "0:2,0:2".into(),
        ],
        vec!["read".into(), url],
        vec!["read".into(), path, "--async".into()],
    ]
}

#[test]
fn special_files_at_chunk_keys_are_read_errors_and_unreadable_findings_never_removed() {
    let dir = scratch("special");
    let store = fixture_copy(&dir, "v3_int8");
    let s = store.to_string_lossy().into_owned();
    std::fs::remove_file(store.join("c/0/0")).unwrap();
    nix::unistd::mkfifo(&store.join("c/0/0"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    std::fs::remove_file(store.join("c/0/1")).unwrap();
    std::fs::create_dir(store.join("c/0/1")).unwrap();
    for args in read_routes(&store) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        // Chunks are fetched in parallel: either special key may be the one reported.
        let out = zarrbuf(&args);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        let want = if err.contains("c/0/1") {
            "is a directory"
        } else {
            "FIFO"
        };
        assert_error(&out, want);
    }
    for (repair, round) in [(false, "check"), (true, "check --repair")] {
        let (ok, findings) = check_json(&s, repair);
        assert!(
            !ok,
            "{round} exits 1 while unreadable keys remain: {findings:?}"
        );
        assert!(
            has(&findings, "c/0/0", "unreadable"),
            "{round}: {findings:?}"
        );
        assert!(
            has(&findings, "c/0/1", "unreadable"),
            "{round}: {findings:?}"
        );
    }
    let kept = std::fs::symlink_metadata(store.join("c/0/0")).unwrap();
    assert!(std::os::unix::fs::FileTypeExt::is_fifo(&kept.file_type()));
    assert!(store.join("c/0/1").is_dir());
    // A chunk whose bytes were read and do not decode is still removed.
    std::fs::write(store.join("c/1/1"), b"not gzip at all").unwrap();
    let (_, findings) = check_json(&s, true);
    assert!(has(&findings, "c/1/1", "undecodable"), "{findings:?}");
    assert!(!store.join("c/1/1").exists());
}

#[test]
fn a_link_out_of_the_store_is_refused_on_read_and_reported_by_check() {
    let dir = scratch("link-out");
    let store = fixture_copy(&dir, "v3_int8");
    std::fs::rename(store.join("c"), dir.join("elsewhere")).unwrap();
    std::os::unix::fs::symlink("../elsewhere", store.join("c")).unwrap();
    // A link out of the store where no key can be is a note: no read goes through it.
    std::os::unix::fs::symlink("..", store.join("docs")).unwrap();
    for args in read_routes(&store) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_error(&zarrbuf(&args), "leads out of the store");
    }
    let s = store.to_string_lossy().into_owned();
    let (ok, findings) = check_json(&s, true);
    assert!(!ok && has(&findings, "c", "unreadable"), "{findings:?}");
    assert!(has(&findings, "docs", "unknown"), "{findings:?}");
    assert!(dir.join("elsewhere/0/0").is_file() && store.join("c").is_symlink());
    // A link that stays inside the store reads.
    std::fs::remove_file(store.join("c")).unwrap();
    std::fs::rename(dir.join("elsewhere"), store.join("chunks")).unwrap();
    std::os::unix::fs::symlink("chunks", store.join("c")).unwrap();
    let o = zarrbuf(&["read", &s]);
    assert!(o.status.success(), "{}", text(&o));
}

/// The unprivileged user and group `nobody`.
const NOBODY: u32 = 65534;

/// Gives `dir` and everything under it to user and group `uid`.
fn chown_tree(dir: &Path, uid: u32) {
    std::os::unix::fs::chown(dir, Some(uid), Some(uid)).unwrap();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            chown_tree(&path, uid);
        } else {
            std::os::unix::fs::chown(&path, Some(uid), Some(uid)).unwrap();
        }
    }
}

#[test]
fn a_chunk_that_cannot_be_opened_is_unreadable_and_kept() {
    let dir = scratch("denied");
    let store = fixture_copy(&dir, "v3_int8");
    let chunk = store.join("c/2/1");
    let mode = |m| {
        std::fs::set_permissions(&chunk, std::os::unix::fs::PermissionsExt::from_mode(m)).unwrap()
    };
    mode(0o000);
    // Root reads files whatever their mode: then the store goes to the unprivileged user
    // `nobody` (65534), and the commands run as that user.
    let uid = std::fs::read(&chunk).is_ok().then_some(NOBODY);
    if uid.is_some() {
        let can_switch = Command::new("setpriv").arg("--version").output().is_ok();
        if !can_switch {
            mode(0o644);
            zarrbuf_test_support::skip(
                zarrbuf_test_support::Need::Unprivileged,
                "a chunk without read permission",
                "this user reads files whatever their mode (root) and setpriv is missing; the FIFO and directory tests cover the never-remove rule",
            );
            return;
        }
        chown_tree(&store, NOBODY);
    }
    let s = store.to_string_lossy().into_owned();
    assert_error(&zarrbuf_as(&["read", &s], uid), "ermission denied");
    // A directory of chunks that cannot be listed is a finding too.
    let listing = |m| {
        std::fs::set_permissions(
            store.join("c/3"),
            std::os::unix::fs::PermissionsExt::from_mode(m),
        )
        .unwrap()
    };
    listing(0o000);
    let (ok, findings) = check_json_as(&s, true, uid);
    mode(0o644);
    listing(0o755);
    assert!(!ok && has(&findings, "c/2/1", "unreadable"), "{findings:?}");
    assert!(has(&findings, "c/3", "unreadable"), "{findings:?}");
    assert!(
        chunk.is_file(),
        "check --repair removed a chunk it could not read"
    );
}

#[test]
fn repair_removes_only_temporary_files_of_writers_that_are_gone() {
    let dir = scratch("temporaries");
    let store = fixture_copy(&dir, "v3_int8");
    let s = store.to_string_lossy().into_owned();
    let user = store.join("c/0/draft#2");
    let staging = store.join("c/0/0#3");
    let live = store.join("c/0/.1.zarrbuf-tmp.elsewhere.1.0");
    for f in [&user, &staging, &live] {
        std::fs::write(f, b"bytes").unwrap();
    }
    // The writer of `live` still runs: it holds its lock, as zarrbuf's writers do.
    let writer = std::fs::File::open(&live).unwrap();
    writer.lock().unwrap();
    let (ok, findings) = check_json(&s, true);
    assert!(ok, "{findings:?}");
    assert!(
        has(&findings, "c/0/.1.zarrbuf-tmp.elsewhere.1.0", "in-flight"),
        "{findings:?}"
    );
    assert!(has(&findings, "c/0/0#3", "in-flight"), "{findings:?}");
    assert!(has(&findings, "c/0/draft#2", "unknown"), "{findings:?}");
    assert!(user.exists() && staging.exists() && live.exists());
    // Its writer gone, the file is a leftover and the repair removes it; the others stay.
    drop(writer);
    let (ok, findings) = check_json(&s, false);
    assert!(
        !ok && has(&findings, "c/0/.1.zarrbuf-tmp.elsewhere.1.0", "leftover"),
        "{findings:?}"
    );
    let (ok, _) = check_json(&s, true);
    assert!(ok);
    assert!(!live.exists() && user.exists() && staging.exists());
}

#[test]
fn a_second_writer_into_an_array_is_refused() {
    let dir = scratch("two-writers");
    let src = crate::common::root().join("data/v3_large_3d.zarr");
    let src = src.to_string_lossy().into_owned();
    let dst = dir.join("dst.zarr");
    let d = dst.to_string_lossy().into_owned();
    let o = zarrbuf(&["copy", &src, &d]);
    assert!(o.status.success(), "{}", text(&o));
    // Another writer holds the array's lock (as a running copy does).
    let other = std::fs::File::open(dst.join(".zarrbuf.lock")).unwrap();
    other.lock().unwrap();
    assert_error(
        &zarrbuf(&["copy", &src, &d, "--overwrite"]),
        "another process is writing",
    );
    // The library refuses too.
    let array = zarrbuf::open(&d, "").unwrap();
    let data = NDBuffer::from_vec(vec![1f32; 24 * 32 * 20], &[24, 32, 20]).unwrap();
    let err = array.write_all(&data).unwrap_err().to_string();
    assert!(err.contains("another process is writing"), "{err}");
    drop(other);
    let o = zarrbuf(&["copy", &src, &d, "--overwrite", "--chunks", "8,8,8"]);
    assert!(o.status.success(), "{}", text(&o));
    // The lock file is no finding.
    let (ok, findings) = check_json(&d, false);
    assert!(ok && findings.is_empty(), "{findings:?}");
}

#[test]
fn an_overwrite_leaves_no_directory_of_the_old_array() {
    let dir = scratch("overwrite");
    let three = crate::common::root().join("data/v3_large_3d.zarr");
    let one = crate::common::root().join("data/v3_ragged_1d.zarr");
    let dst = dir.join("dst.zarr").to_string_lossy().into_owned();
    let o = zarrbuf(&["copy", &three.to_string_lossy(), &dst, "--chunks", "4,4,4"]);
    assert!(o.status.success(), "{}", text(&o));
    for round in 0..2 {
        let o = zarrbuf(&["copy", &one.to_string_lossy(), &dst, "--overwrite"]);
        assert!(o.status.success(), "round {round}: {}", text(&o));
        let o = zarrbuf(&["read", &dst]);
        assert!(o.status.success(), "round {round}: {}", text(&o));
        let (ok, findings) = check_json(&dst, false);
        assert!(ok && findings.is_empty(), "round {round}: {findings:?}");
        for entry in std::fs::read_dir(Path::new(&dst).join("c")).unwrap() {
            assert!(entry.unwrap().file_type().unwrap().is_file());
        }
    }
}

#[test]
fn a_closed_stdout_ends_quietly_and_a_full_one_is_one_error_line() {
    let store = crate::common::root().join("data/v3_shard_end.zarr");
    let s = store.to_string_lossy().into_owned();
    for args in [
        vec!["info", "--json", &s],
        vec!["info", &s],
        vec!["check", "--json", &s],
    ] {
        let mut child = command(&args).spawn().unwrap();
        // The reader goes before the command writes (`| head -0`).
        drop(child.stdout.take());
        let o = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {err}");
        assert!(
            !err.contains("internal error") && !err.contains("error:"),
            "{args:?}: {err}"
        );
    }
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("Linux's /dev/full, a disk that is always full");
    let o = command(&["info", &s]).stdout(full).output().unwrap();
    assert_error(&o, "standard output");
}

#[test]
fn metadata_that_read_refuses_is_a_check_finding() {
    let dir = scratch("metadata");
    let store = fixture_copy(&dir, "v3_int8");
    let s = store.to_string_lossy().into_owned();
    // Inner chunks of another rank than the array: zarrbuf's reads refuse the array.
    let meta = std::fs::read_to_string(store.join("zarr.json")).unwrap();
    let mut doc: serde_json::Value = serde_json::from_str(&meta).unwrap();
    doc["codecs"] = serde_json::json!([{
        "name": "sharding_indexed",
        "configuration": {
            "chunk_shape": [2],
            "codecs": [{"name": "bytes"}],
            "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}]
        }
    }]);
    std::fs::write(store.join("zarr.json"), doc.to_string()).unwrap();
    let read = zarrbuf(&["read", &s]);
    assert_eq!(read.status.code(), Some(1), "{}", text(&read));
    let (ok, findings) = check_json(&s, false);
    assert!(
        !ok && has(&findings, "zarr.json", "metadata"),
        "{findings:?}"
    );
}

#[test]
fn a_fifo_alone_and_a_dangling_link_at_chunk_keys_are_errors_on_every_read_route() {
    let dir = scratch("fifo-alone");
    let store = fixture_copy(&dir, "v3_int8");
    std::fs::remove_file(store.join("c/0/0")).unwrap();
    nix::unistd::mkfifo(&store.join("c/0/0"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    // The async route sizes a chunk before it fetches it: that must not open the FIFO
    // blocking either.
    for args in read_routes(&store) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_error(&zarrbuf(&args), "FIFO");
    }
    let dir = scratch("dangling");
    let store = fixture_copy(&dir, "v3_int8");
    let s = store.to_string_lossy().into_owned();
    std::fs::remove_file(store.join("c/0/0")).unwrap();
    std::os::unix::fs::symlink(dir.join("gone"), store.join("c/0/0")).unwrap();
    for args in read_routes(&store) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_error(&zarrbuf(&args), "does not exist");
    }
    let (ok, findings) = check_json(&s, false);
    assert!(!ok, "check exits 1 on a dangling link: {findings:?}");
}
