//! Async reads and writes against real servers on 127.0.0.1: an S3-protocol server
//! (moto_server) and a plain HTTP server over fixtures/data, both started by
//! scripts/start-test-servers.sh (CI does it and sets ZARRBUF_REQUIRE_SERVERS=1, so these
//! tests cannot skip there). Without the servers they skip visibly (a `SKIPPED:` line in
//! plain `cargo test` output, see tests/support/src/lib.rs), failing under
//! ZARRBUF_REQUIRE_SERVERS=1.

use crate::common::s3::{create_bucket, opts_ref};
use crate::common::{Fixture, Need, fixtures, prototypes, root, s3, skip, walk};
use object_store::ObjectStoreExt;
use std::io::Read;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use zarrbuf::{
    ArrayReadAsyncExt, ArrayWriteAsyncExt, BufferPrototype, NDBuffer, options::ReadOptions,
};

struct Servers {
    s3: String,
    http: String,
}

fn servers() -> Option<Servers> {
    match (
        std::env::var("ZARRBUF_TEST_S3_ENDPOINT"),
        std::env::var("ZARRBUF_TEST_HTTP_URL"),
    ) {
        (Ok(s3), Ok(http)) => Some(Servers { s3, http }),
        _ => {
            skip(
                Need::Servers,
                "reads and writes against the local S3 and HTTP servers",
                "ZARRBUF_TEST_S3_ENDPOINT / ZARRBUF_TEST_HTTP_URL are not set: \
                 source <(bash scripts/start-test-servers.sh)",
            );
            None
        }
    }
}

fn runtime() -> tokio::runtime::Runtime {
    s3::runtime(4)
}

fn s3_options(endpoint: &str) -> Vec<(&'static str, String)> {
    s3::options(endpoint, "10s")
}

/// Uploads every fixture store under `s3://bucket/`.
async fn upload_fixtures(endpoint: &str, bucket: &str) {
    let o = s3_options(endpoint);
    let store =
        zarrbuf::store::object_store_for_url(&format!("s3://{bucket}"), &opts_ref(&o)).unwrap();
    let data = root().join("data");
    for path in walk(&data) {
        let key = path
            .strip_prefix(&data)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let bytes = std::fs::read(&path).unwrap();
        store
            .put(&object_store::path::Path::from(key), bytes.into())
            .await
            .unwrap();
    }
}

fn store_name(f: &Fixture) -> String {
    f.store.trim_start_matches("data/").to_string()
}

fn same(what: &str, got: &NDBuffer, want: &NDBuffer) {
    assert_eq!(got.shape(), want.shape(), "{what}");
    assert!(
        got.to_native_bytes().unwrap() == want.to_native_bytes().unwrap(),
        "{what}: contents differ"
    );
}

#[test]
fn every_fixture_reads_exactly_over_s3_and_http() {
    let Some(sv) = servers() else { return };
    let rt = runtime();
    create_bucket(&sv.s3, "fixtures");
    rt.block_on(upload_fixtures(&sv.s3, "fixtures"));
    let o = s3_options(&sv.s3);
    rt.block_on(async {
        for f in fixtures() {
            let want = zarrbuf::npy::read(&f.npy_path()).unwrap();
            let urls = [
                format!("s3://fixtures/{}", store_name(&f)),
                format!("{}/{}", sv.http, store_name(&f)),
            ];
            for url in urls {
                let options = if url.starts_with("s3://") {
                    opts_ref(&o)
                } else {
                    Vec::new()
                };
                let array = zarrbuf::open_opt_async(
                    &url,
                    &f.path,
                    &zarrbuf::options::OpenOptions::default()
                        .with_store_options(options.iter().copied()),
                )
                .await
                .unwrap_or_else(|e| panic!("{url}: {e}"));
                for (pname, proto) in prototypes() {
                    let got = array
                        .read_all_async(&proto)
                        .await
                        .unwrap_or_else(|e| panic!("{url} on {pname}: {e}"));
                    assert_eq!(got.memory(), proto.memory());
                    same(&format!("{url} on {pname}"), &got, &want);
                }
            }
        }
    });
}

#[test]
fn writes_through_s3_read_back_exactly() {
    let Some(sv) = servers() else { return };
    let rt = runtime();
    create_bucket(&sv.s3, "written");
    let o = s3_options(&sv.s3);
    let python = root().join("../.venv/bin/python");
    for name in [
        "v3_transpose_3d",
        "v3_uint32_be_zstd_crc32c",
        "v2_i4_be_gzip_F",
        "v3_shard_end",
        "v3_float32_nan_fill",
    ] {
        let f = fixtures().into_iter().find(|f| f.name == name).unwrap();
        let want = zarrbuf::npy::read(&f.npy_path()).unwrap();
        rt.block_on(async {
            // Only the metadata: the chunks come from zarrbuf.
            let store =
                zarrbuf::store::object_store_for_url("s3://written", &opts_ref(&o)).unwrap();
            let src = root().join(&f.store);
            for path in walk(&src) {
                let file = path.file_name().unwrap().to_string_lossy().into_owned();
                if matches!(
                    file.as_str(),
                    "zarr.json" | ".zarray" | ".zattrs" | ".zgroup"
                ) {
                    let key = format!(
                        "{name}.zarr/{}",
                        path.strip_prefix(&src).unwrap().to_string_lossy()
                    );
                    store
                        .put(
                            &object_store::path::Path::from(key),
                            std::fs::read(&path).unwrap().into(),
                        )
                        .await
                        .unwrap();
                }
            }
            let url = format!("s3://written/{name}.zarr");
            let array = zarrbuf::open_opt_async(
                &url,
                &f.path,
                &zarrbuf::options::OpenOptions::default().with_store_options(opts_ref(&o)),
            )
            .await
            .unwrap();
            for (pname, proto) in prototypes() {
                let data = want.to_prototype(&proto).unwrap();
                let all: Vec<Range<u64>> = array.shape().iter().map(|&n| 0..n).collect();
                array
                    .write_async(&all, &data)
                    .await
                    .unwrap_or_else(|e| panic!("{url} from {pname}: {e}"));
                let back = array.read_all_async(&BufferPrototype::cpu()).await.unwrap();
                same(&format!("{url} written from {pname}"), &back, &want);
            }
        });
        if python.exists() {
            let out = std::process::Command::new(&python)
                .arg(root().join("../scripts/zarr_readback.py"))
                .args([
                    &format!("s3://written/{name}.zarr"),
                    &f.path,
                    f.npy_path().to_str().unwrap(),
                ])
                .args(["--endpoint-url", &sv.s3])
                .env("AWS_ACCESS_KEY_ID", "testing")
                .env("AWS_SECRET_ACCESS_KEY", "testing")
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "zarr-python reading s3://written/{name}.zarr: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

fn peak_rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Set in the child process that runs a measured test body alone (see
/// [`sixty_four_concurrent_reads_are_exact_and_bounded`]).
const MEASURED_BODY: &str = "ZARRBUF_TEST_MEASURED_BODY";

/// The line the measured child prints its figures on.
const MEASURED_LINE: &str = "MEASURED peak RSS bytes:";

/// Peak RSS is a per-process figure and the other tests of this binary run in parallel
/// threads, so the measured reads run in a child process of their own: this test re-runs
/// itself (`--exact`) with [`MEASURED_BODY`] set, the child does the work and prints its own
/// VmHWM before and after the reads, and the parent reaps it with `wait4`, whose rusage is
/// that child's alone.
#[test]
fn sixty_four_concurrent_reads_are_exact_and_bounded() {
    let Some(sv) = servers() else { return };
    if std::env::var(MEASURED_BODY).as_deref() == Ok("sixty_four_concurrent_reads") {
        sixty_four_concurrent_reads(&sv);
        return;
    }
    let name = crate::common::own_test!("sixty_four_concurrent_reads_are_exact_and_bounded");
    let (status, maxrss, out) = run_measured_child(&name, "sixty_four_concurrent_reads");
    assert!(
        status == 0,
        "the measured child failed (wait status {status}):\n{out}"
    );
    let figures = out
        .lines()
        .find_map(|l| l.split_once(MEASURED_LINE).map(|(_, figures)| figures))
        .unwrap_or_else(|| panic!("the child printed no '{MEASURED_LINE}' line:\n{out}"));
    let (before, after) = figures
        .trim()
        .split_once(' ')
        .and_then(|(a, b)| Some((a.parse::<u64>().ok()?, b.parse::<u64>().ok()?)))
        .unwrap_or_else(|| panic!("bad figures {figures:?}"));
    assert!(before > 0 && after >= before, "VmHWM {before} -> {after}");
    // The child's own peak, from the kernel: at least what it saw itself.
    assert!(
        maxrss >= after,
        "wait4 reports a peak of {maxrss} bytes, the child saw {after}"
    );
    let growth = after - before;
    println!(
        "the reads' own process: peak RSS {} KiB before 64 concurrent reads, {} KiB after (+{} KiB); rusage maxrss {} KiB",
        before / 1024,
        after / 1024,
        growth / 1024,
        maxrss / 1024
    );
    assert!(growth < 512 << 20, "peak RSS grew by {growth} bytes");
}

/// Runs test `name` of this binary alone in a child process with [`MEASURED_BODY`]=`body`;
/// returns its wait status, its peak RSS in bytes (`wait4`'s rusage: this child only, unlike
/// `RUSAGE_CHILDREN`, which other tests' children would share) and its output.
// The child is reaped by `wait4` (which also gives its rusage), not by `Child::wait`.
#[allow(clippy::zombie_processes)]
fn run_measured_child(name: &str, body: &str) -> (i32, u64, String) {
    use std::process::{Command, Stdio};
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads", "1"])
        .env(MEASURED_BODY, body)
        .env_remove("ZARRBUF_SKIP_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = r.read_to_string(&mut text);
            text
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    let pid = child.id() as libc::pid_t;
    let mut status: libc::c_int = 0;
    // SAFETY: an all-zero rusage is a valid value of this plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our own child, not yet reaped (std's `Child` is never waited on
    // here); `status` and `usage` are valid for writes.
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(reaped, pid, "wait4: {}", std::io::Error::last_os_error());
    let out = format!("{}{}", stdout.join().unwrap(), stderr.join().unwrap());
    crate::common::assert_ran_one_test(name, &out);
    // ru_maxrss is in KiB on Linux.
    (status, usage.ru_maxrss as u64 * 1024, out)
}

/// The measured body: 64 concurrent subset reads of v3_large_3d over S3, each exact, no task
/// left behind; prints the process's VmHWM just before and just after the reads.
fn sixty_four_concurrent_reads(sv: &Servers) {
    let rt = runtime();
    create_bucket(&sv.s3, "load");
    rt.block_on(upload_fixtures(&sv.s3, "load"));
    let f = fixtures()
        .into_iter()
        .find(|f| f.name == "v3_large_3d")
        .unwrap();
    let want = Arc::new(zarrbuf::npy::read(&f.npy_path()).unwrap());
    let o = s3_options(&sv.s3);
    let before = peak_rss_bytes();
    rt.block_on(async {
        let array = Arc::new(
            zarrbuf::open_opt_async(
                "s3://load/v3_large_3d.zarr",
                "",
                &zarrbuf::options::OpenOptions::default().with_store_options(opts_ref(&o)),
            )
            .await
            .unwrap(),
        );
        let shape = array.shape().to_vec();
        // Connection-pool tasks of the HTTP client exist once a request was made.
        array.read_all_async(&BufferPrototype::cpu()).await.unwrap();
        let baseline = tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks();
        let mut tasks = Vec::new();
        for i in 0..64u64 {
            let (array, want) = (array.clone(), want.clone());
            let subset: Vec<Range<u64>> = shape
                .iter()
                .enumerate()
                .map(|(k, &n)| {
                    let a = (i * (k as u64 + 3)) % n;
                    let b = (a + 1 + (i * 7 + k as u64) % (n - a)).min(n);
                    a..b
                })
                .collect();
            tasks.push(tokio::spawn(async move {
                let opts = ReadOptions::default()
                    .with_concurrency(4)
                    .with_staging_bytes(1 << 20);
                let got = array
                    .read_opt_async(&subset, &BufferPrototype::cpu(), &opts)
                    .await
                    .unwrap();
                let r: Vec<Range<usize>> = subset
                    .iter()
                    .map(|r| r.start as usize..r.end as usize)
                    .collect();
                same(&format!("subset {subset:?}"), &got, &want.get(&r).unwrap());
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        let alive = tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks();
        assert!(
            alive <= baseline,
            "{alive} tasks alive after the reads, {baseline} before them"
        );
    });
    println!("{MEASURED_LINE} {before} {}", peak_rss_bytes());
}

#[test]
fn missing_chunk_reads_as_fill_value() {
    let Some(sv) = servers() else { return };
    let rt = runtime();
    create_bucket(&sv.s3, "holes");
    rt.block_on(upload_fixtures(&sv.s3, "holes"));
    let o = s3_options(&sv.s3);
    rt.block_on(async {
        let store = zarrbuf::store::object_store_for_url("s3://holes", &opts_ref(&o)).unwrap();
        store
            .delete(&object_store::path::Path::from("v3_int16_be.zarr/c/0/0"))
            .await
            .ok();
        let array = zarrbuf::open_opt_async(
            "s3://holes/v3_int16_be.zarr",
            "",
            &zarrbuf::options::OpenOptions::default().with_store_options(opts_ref(&o)),
        )
        .await
        .unwrap();
        let got = array.read_all_async(&BufferPrototype::cpu()).await.unwrap();
        let sync =
            zarrbuf::open(root().join("data/v3_int16_be.zarr").to_str().unwrap(), "").unwrap();
        let chunk: Vec<usize> = zarrbuf::describe(&sync)
            .unwrap()
            .chunks
            .iter()
            .map(|&c| c as usize)
            .collect();
        let region: Vec<Range<usize>> = chunk
            .iter()
            .zip(got.shape())
            .map(|(&c, &n)| 0..c.min(n))
            .collect();
        let hole = got.get(&region).unwrap();
        assert!(
            hole.all_equal(&(-7i16).to_ne_bytes(), false).unwrap(),
            "a deleted chunk must read as the fill value -7"
        );
    });
}

/// Needs no test server: the silent server is a listener of this test, the stopped one a
/// port nobody listens on.
#[test]
fn stopped_and_silent_servers_give_clear_errors_without_hanging() {
    let rt = runtime();
    // A server that accepts connections and never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_addr = silent.local_addr().unwrap();
    let held = Arc::new(std::sync::Mutex::new(Vec::new()));
    let h = held.clone();
    std::thread::spawn(move || {
        for s in silent.incoming().flatten() {
            h.lock().unwrap().push(s);
        }
    });
    // A port nobody listens on (a stopped server).
    let stopped = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    rt.block_on(async {
        for (what, endpoint) in [
            ("silent", format!("http://{silent_addr}")),
            ("stopped", format!("http://{stopped}")),
        ] {
            let mut o = s3_options(&endpoint);
            o.retain(|(k, _)| *k != "timeout");
            o.push(("timeout", "2s".into()));
            o.push(("connect_timeout", "2s".into()));
            let opened = tokio::time::timeout(
                Duration::from_secs(120),
                zarrbuf::open_opt_async(
                    "s3://bucket/data.zarr",
                    "",
                    &zarrbuf::options::OpenOptions::default().with_store_options(opts_ref(&o)),
                ),
            )
            .await
            .unwrap_or_else(|_| panic!("{what} server: open hung"));
            let err = opened
                .err()
                .unwrap_or_else(|| panic!("{what} server: open succeeded"));
            let msg = err.to_string();
            assert!(
                msg.contains("s3://bucket/data.zarr"),
                "{what}: error should name the store: {msg}"
            );
        }
    });
}

#[test]
fn dropping_a_read_cancels_it() {
    let Some(sv) = servers() else { return };
    let rt = runtime();
    create_bucket(&sv.s3, "cancel");
    rt.block_on(upload_fixtures(&sv.s3, "cancel"));
    let o = s3_options(&sv.s3);
    let calls = Arc::new(AtomicUsize::new(0));
    rt.block_on(async {
        let array = zarrbuf::open_opt_async(
            "s3://cancel/v3_large_3d.zarr",
            "",
            &zarrbuf::options::OpenOptions::default().with_store_options(opts_ref(&o)),
        )
        .await
        .unwrap();
        let c = calls.clone();
        let opts = ReadOptions::default()
            .with_concurrency(1)
            .with_staging_bytes(1)
            .with_progress(move |_| {
                c.fetch_add(1, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(50));
            });
        let all: Vec<Range<u64>> = array.shape().iter().map(|&n| 0..n).collect();
        let cut = tokio::time::timeout(
            Duration::from_millis(60),
            array.read_opt_async(&all, &BufferPrototype::cpu(), &opts),
        )
        .await;
        assert!(cut.is_err(), "the read should still have been running");
    });
    // The blocking half notices the cancellation at its next chunk and stops.
    std::thread::sleep(Duration::from_millis(600));
    let settled = calls.load(Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(
        calls.load(Ordering::SeqCst),
        settled,
        "chunks kept being read after the future was dropped"
    );
    assert!(
        settled < 18,
        "all 18 chunks were read: the read was not cancelled"
    );
    drop(rt);
}

/// The skip contract of tests/support/src/lib.rs for the servers, on one test run in a child
/// process without the server variables: the skip shows in plain `cargo test` output and
/// reaches `ZARRBUF_SKIP_LOG`; under ZARRBUF_REQUIRE_SERVERS=1 the same run fails.
#[test]
fn server_skips_are_visible_and_fail_when_required() {
    let test = &crate::common::own_test!("missing_chunk_reads_as_fill_value");
    let unset = [
        "ZARRBUF_TEST_S3_ENDPOINT",
        "ZARRBUF_TEST_HTTP_URL",
        "ZARRBUF_REQUIRE_SERVERS",
    ];
    let log = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("remote-skip-log-{}.txt", std::process::id()));
    let _ = std::fs::remove_file(&log);
    let (status, out) =
        crate::common::run_own_test(test, &[("ZARRBUF_SKIP_LOG", log.to_str().unwrap())], &unset);
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_file(&log);
    assert!(status.success(), "{out}");
    let line = format!("SKIPPED: {test}: reads and writes against the local S3 and HTTP servers (");
    assert!(out.contains(&line), "no visible skip line in:\n{out}");
    assert!(
        out.contains("ZARRBUF_REQUIRE_SERVERS=1 makes this a failure"),
        "{out}"
    );
    assert_eq!(logged.matches("SKIPPED: ").count(), 1, "{logged:?}");
    assert!(logged.starts_with(&line), "{logged:?}");

    let (status, out) =
        crate::common::run_own_test(test, &[("ZARRBUF_REQUIRE_SERVERS", "1")], &unset[..2]);
    assert!(
        !status.success(),
        "passed without servers under ZARRBUF_REQUIRE_SERVERS=1:\n{out}"
    );
    assert!(
        out.contains("ZARRBUF_REQUIRE_SERVERS=1 requires it"),
        "{out}"
    );
}

/// `zarrbuf copy` between any two stores: a directory into S3 (sharded, zstd), S3 into S3,
/// S3 back into a directory, `--resume` against S3 (into a new array, and over a finished one), and `check` of the copy in S3;
/// every copy reads back exactly.
#[test]
fn copies_between_directories_and_s3() {
    let Some(sv) = servers() else { return };
    // A bucket of this run's own: the copies write fixed keys without --overwrite, and the
    // server may outlive a run.
    let bucket = format!("copies-{}", std::process::id());
    create_bucket(&sv.s3, &bucket);
    let at = |name: &str| format!("s3://{bucket}/{name}");
    let (a, b, c) = (at("a.zarr"), at("b.zarr"), at("c.zarr"));
    let f = fixtures()
        .into_iter()
        .find(|f| f.name == "v3_large_3d")
        .unwrap();
    let want = zarrbuf::npy::read(&f.npy_path()).unwrap();
    let zarrbuf_cli = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_zarrbuf"))
            .args(args)
            .env("AWS_ENDPOINT", &sv.s3)
            .env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", "testing")
            .env("AWS_REGION", "us-east-1")
            .env("AWS_ALLOW_HTTP", "true")
            .env_remove("ZARRBUF_DEVICE")
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("copies-back.zarr");
    let _ = std::fs::remove_dir_all(&dir);
    let back_dir = dir.to_string_lossy().into_owned();
    let src = f.store_path();
    let steps: [&[&str]; 4] = [
        &[
            "copy",
            &src,
            a.as_str(),
            "--chunks",
            "8,8,8",
            "--shards",
            "16,16,16",
            "--codec",
            "zstd:1",
        ],
        &["copy", a.as_str(), b.as_str(), "--chunks", "5,5,5"],
        &["copy", b.as_str(), c.as_str(), "--resume"],
        &["copy", b.as_str(), &back_dir, "--codec", "gzip:1"],
    ];
    for args in steps {
        let (ok, err) = zarrbuf_cli(args);
        assert!(ok, "{args:?}: {err}");
    }
    // Resuming a finished copy into S3 writes nothing and keeps it exact.
    let (ok, err) = zarrbuf_cli(&[
        "copy",
        a.as_str(),
        b.as_str(),
        "--chunks",
        "5,5,5",
        "--resume",
    ]);
    assert!(ok, "resume: {err}");
    let urls = [a.as_str(), b.as_str(), back_dir.as_str()];
    for (n, url) in urls.into_iter().enumerate() {
        let npy = dir.with_file_name(format!("copies-{n}.npy"));
        let (ok, err) = zarrbuf_cli(&["read", url, "--out", npy.to_str().unwrap()]);
        assert!(ok, "read {url}: {err}");
        same(url, &zarrbuf::npy::read(&npy).unwrap(), &want);
    }
    // The copy in S3 checks clean through the bucket's listing.
    let (ok, err) = zarrbuf_cli(&["check", a.as_str()]);
    assert!(ok && err.contains("0 damaged"), "{err}");
}
