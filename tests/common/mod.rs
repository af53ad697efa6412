//! Shared test helpers: the fixture manifest, the prototypes available on this machine, and
//! how a test says it could not run.
//!
//! # Skips fail closed
//!
//! Some tests need what a machine may lack: a CUDA device (the pinned and CUDA prototypes),
//! the local S3/HTTP test servers (`source <(bash scripts/start-test-servers.sh)`, which also
//! provides the `moto_server` of `.venv` that the fault tests start privately), or nvCOMP's
//! library (`ZARRBUF_NVCOMP=$(bash scripts/fetch-nvcomp.sh)`). Such a test,
//! or such a part of a test, calls [`skip`] and nothing else decides to skip:
//!
//! - under `ZARRBUF_REQUIRE_GPU=1` (for [`Need::Gpu`]), `ZARRBUF_REQUIRE_SERVERS=1` (for
//!   [`Need::Servers`]) or `ZARRBUF_REQUIRE_NVCOMP=1` (for [`Need::Nvcomp`]) the skip is a
//!   panic, so the test fails;
//! - otherwise it writes one line, `SKIPPED: <test>: <what> (<why>)`, straight to the
//!   process's stderr. libtest captures only `print!`/`eprint!`, not writes to the stderr
//!   handle, so the line shows in plain `cargo test` output beside the test's `... ok`
//!   (without `--nocapture`), once per test and skipped concern;
//! - and when `ZARRBUF_SKIP_LOG` names a file, it appends the same line there, so a CI script
//!   can list and count every skip of a whole `cargo test` run at its end.
//!
//! libtest has no way for a test to declare itself ignored at run time, and whether a GPU or
//! the servers are present is known only at run time, so these tests report `ok` when they
//! skip: the `SKIPPED:` lines (and the log) are the record of what did not run. Tests that
//! check this contract re-run one test of their own binary in a child process:
//! `conformance::gpu_skips_are_visible_and_fail_when_required`,
//! `remote::server_skips_are_visible_and_fail_when_required`.
#![allow(dead_code)]

pub mod s3;

use std::io::Write;
use std::path::PathBuf;
use zarrbuf::{BufferPrototype, Device};

/// What a skipping test lacks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    /// A CUDA device; `ZARRBUF_REQUIRE_GPU=1` turns the skip into a failure.
    Gpu,
    /// The local test servers (or `.venv`'s moto_server); `ZARRBUF_REQUIRE_SERVERS=1` turns
    /// the skip into a failure.
    Servers,
    /// nvCOMP's library named by `ZARRBUF_NVCOMP` (`scripts/fetch-nvcomp.sh`);
    /// `ZARRBUF_REQUIRE_NVCOMP=1` turns the skip into a failure.
    Nvcomp,
}

impl Need {
    /// The environment variable that makes a skip for this need fail.
    pub fn require_var(self) -> &'static str {
        match self {
            Need::Gpu => "ZARRBUF_REQUIRE_GPU",
            Need::Servers => "ZARRBUF_REQUIRE_SERVERS",
            Need::Nvcomp => "ZARRBUF_REQUIRE_NVCOMP",
        }
    }

    /// Whether the variable is set to 1.
    pub fn required(self) -> bool {
        std::env::var(self.require_var()).is_ok_and(|v| v == "1")
    }
}

/// Records that `what` did not run because `why` (see the module docs): panics when `need`
/// is required, otherwise prints a visible `SKIPPED:` line and appends it to
/// `$ZARRBUF_SKIP_LOG`.
pub fn skip(need: Need, what: &str, why: &str) {
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("<unnamed thread>");
    if need.required() {
        panic!(
            "{test}: {what} cannot run ({why}) but {}=1 requires it",
            need.require_var()
        );
    }
    let line = format!(
        "SKIPPED: {test}: {what} ({why}; {}=1 makes this a failure)\n",
        need.require_var()
    );
    // Once per test and concern: a test that asks for the prototypes in a loop skips once.
    static REPORTED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    {
        let mut reported = REPORTED.lock().unwrap_or_else(|e| e.into_inner());
        let key = format!("{test}\0{what}");
        if reported.contains(&key) {
            return;
        }
        reported.push(key);
    }
    // Straight to the stderr handle: libtest's capture does not see it.
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
    if let Some(log) = std::env::var_os("ZARRBUF_SKIP_LOG") {
        let appended = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .and_then(|mut f| f.write_all(line.as_bytes()));
        if let Err(e) = appended {
            panic!(
                "cannot append to ZARRBUF_SKIP_LOG={}: {e}",
                log.to_string_lossy()
            );
        }
    }
}

/// Runs the test `name` of this very test binary in a child process (libtest's `--exact`),
/// with `env` set and `remove` unset (plus `ZARRBUF_SKIP_LOG`, unless `env` sets it), and
/// returns its exit status and its stdout + stderr.
pub fn run_own_test(
    name: &str,
    env: &[(&str, &str)],
    remove: &[&str],
) -> (std::process::ExitStatus, String) {
    let mut cmd = std::process::Command::new(std::env::current_exe().expect("the test binary"));
    cmd.args([name, "--exact", "--test-threads", "1"]);
    cmd.env_remove("ZARRBUF_SKIP_LOG");
    for var in remove {
        cmd.env_remove(var);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("the test binary runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status, text)
}

/// One entry of fixtures/manifest.json.
pub struct Fixture {
    pub name: String,
    pub store: String,
    pub path: String,
    pub npy: String,
}

impl Fixture {
    pub fn store_path(&self) -> String {
        root().join(&self.store).to_string_lossy().into_owned()
    }
    pub fn npy_path(&self) -> PathBuf {
        root().join(&self.npy)
    }
}

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

/// Reads the manifest with a tiny field extractor (the manifest is written by generate.py).
pub fn fixtures() -> Vec<Fixture> {
    let text =
        std::fs::read_to_string(root().join("manifest.json")).expect("fixtures/manifest.json");
    let value: serde_json::Value = serde_json::from_str(&text).expect("manifest is JSON");
    let list = value
        .as_array()
        .cloned()
        .or_else(|| value.get("fixtures").and_then(|v| v.as_array()).cloned())
        .expect("a list of fixtures");
    list.iter()
        .map(|e| Fixture {
            name: e["name"].as_str().unwrap().to_string(),
            store: e["store"].as_str().unwrap().to_string(),
            path: e["path"].as_str().unwrap_or("").to_string(),
            npy: e["npy"].as_str().unwrap().to_string(),
        })
        .collect()
}

/// The README quick start's array (fixtures/data/demo_layers.zarr, 256 MiB decoded), as
/// fixtures/data/demo_layers.json describes it.
pub struct Demo {
    pub store: String,
    pub shape: Vec<u64>,
    pub plane_values: Vec<f32>,
    pub crc32: u32,
}

pub fn demo() -> Demo {
    let text = std::fs::read_to_string(root().join("data/demo_layers.json"))
        .expect("fixtures/data/demo_layers.json");
    let v: serde_json::Value = serde_json::from_str(&text).expect("demo description is JSON");
    Demo {
        store: root()
            .join(v["store"].as_str().unwrap())
            .to_string_lossy()
            .into_owned(),
        shape: v["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_u64().unwrap())
            .collect(),
        // Each value is a float32 written exactly as a JSON double.
        plane_values: v["plane_values"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap() as f32)
            .collect(),
        crc32: v["crc32"].as_u64().unwrap() as u32,
    }
}

/// Whether GPU tests must run (ZARRBUF_REQUIRE_GPU=1).
pub fn gpu_required() -> bool {
    Need::Gpu.required()
}

/// CPU always; pinned and CUDA when a GPU is present. Without one it [`skip`]s them: a
/// visible `SKIPPED:` line, or a panic under ZARRBUF_REQUIRE_GPU=1.
pub fn prototypes() -> Vec<(String, BufferPrototype)> {
    let mut protos = vec![("cpu".to_string(), BufferPrototype::cpu())];
    if Device::Cuda(0).is_available() {
        protos.push(("pinned:0".into(), BufferPrototype::pinned(0)));
        protos.push(("cuda:0".into(), BufferPrototype::cuda(0)));
    } else {
        let why = match zarrbuf::cuda_device_count() {
            // The error's first clause says what is missing; the rest is advice.
            Err(e) => format!(
                "no CUDA device: {}",
                e.to_string().split(';').next().unwrap_or("")
            ),
            Ok(n) => format!("no usable CUDA device ({n} reported)"),
        };
        skip(Need::Gpu, "pinned:0 and cuda:0 prototypes", &why);
    }
    protos
}

/// Every file under `dir`, in sorted order.
pub fn walk(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    let mut out = Vec::new();
    for p in entries {
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}
