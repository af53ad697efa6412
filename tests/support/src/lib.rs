//! How the integration tests of zarrbuf (`tests/it/`) and zarrbuf-codecs (`codecs/tests/it/`)
//! say that they could not run, and how a test re-runs one test of its own binary in a child
//! process. One copy for both crates: the line format and the environment variables below are
//! what `.ci/run` counts and sets.
//!
//! # Skips fail closed
//!
//! Some tests need what a machine may lack: a CUDA device (the pinned and CUDA prototypes,
//! the kernels), the local S3/HTTP test servers (`source <(bash scripts/start-test-servers.sh)`,
//! which also provides the `moto_server` of `.venv` that the fault tests start privately),
//! nvCOMP's library (`ZARRBUF_NVCOMP=$(bash scripts/fetch-nvcomp.sh)`) or NVRTC
//! (`scripts/nvrtc-check.sh`). Such a test, or such a part of a test, calls [`skip`] and
//! nothing else decides to skip:
//!
//! - under `ZARRBUF_REQUIRE_GPU=1` (for [`Need::Gpu`]), `ZARRBUF_REQUIRE_SERVERS=1` (for
//!   [`Need::Servers`]), `ZARRBUF_REQUIRE_NVCOMP=1` (for [`Need::Nvcomp`]) or
//!   `ZARRBUF_REQUIRE_NVRTC=1` (for [`Need::Nvrtc`]) the skip is a panic, so the test fails;
//! - otherwise it writes one line, `SKIPPED: <test>: <what> (<why>)`, straight to the
//!   process's stderr, where `<test>` is the test's libtest name (`module::test`, what
//!   `cargo test --test it` takes as a filter). libtest captures only `print!`/`eprint!`,
//!   not writes to the stderr handle, so the line shows in plain `cargo test` output beside
//!   the test's `... ok` (without `--nocapture`), once per test and skipped concern;
//! - and when `ZARRBUF_SKIP_LOG` names a file, it appends the same line there, so a CI script
//!   can list and count every skip of a whole `cargo test` run at its end.
//!
//! libtest has no way for a test to declare itself ignored at run time, and whether a GPU or
//! the servers are present is known only at run time, so these tests report `ok` when they
//! skip: the `SKIPPED:` lines (and the log) are the record of what did not run. Tests that
//! check this contract re-run one test of their own binary in a child process
//! ([`run_own_test`]): `conformance::gpu_skips_are_visible_and_fail_when_required` and
//! `remote::server_skips_are_visible_and_fail_when_required` in zarrbuf's tests,
//! `cuda_vs_host::gpu_skips_show_in_plain_test_output` in zarrbuf-codecs'.

use std::io::Write;
use std::process::{Command, ExitStatus};

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
    /// NVRTC, the CUDA run-time compiler (a plain library: `scripts/nvrtc-check.sh` fetches
    /// it); `ZARRBUF_REQUIRE_NVRTC=1` turns the skip into a failure.
    Nvrtc,
    /// A user whom file permissions bind (root reads a file whatever its mode);
    /// `ZARRBUF_REQUIRE_UNPRIVILEGED=1` turns the skip into a failure.
    Unprivileged,
    /// Bind mounts in a private mount namespace (`unshare -m` and `mount --bind`: root, or
    /// a user namespace); `ZARRBUF_REQUIRE_MOUNTS=1` (set by scripts/test when it runs as
    /// root, as CI does) turns the skip into a failure.
    Mounts,
}

impl Need {
    /// The environment variable that makes a skip for this need fail.
    pub fn require_var(self) -> &'static str {
        match self {
            Need::Gpu => "ZARRBUF_REQUIRE_GPU",
            Need::Servers => "ZARRBUF_REQUIRE_SERVERS",
            Need::Nvcomp => "ZARRBUF_REQUIRE_NVCOMP",
            Need::Nvrtc => "ZARRBUF_REQUIRE_NVRTC",
            Need::Unprivileged => "ZARRBUF_REQUIRE_UNPRIVILEGED",
            Need::Mounts => "ZARRBUF_REQUIRE_MOUNTS",
        }
    }

    /// Whether the variable is set to 1.
    pub fn required(self) -> bool {
        std::env::var(self.require_var()).is_ok_and(|v| v == "1")
    }
}

/// What a skip of `what` (because `why`) in test `test` amounts to: `Err(the panic message)`
/// when `required`, otherwise `Ok(the SKIPPED line)`, newline included.
pub fn skip_outcome(
    need: Need,
    required: bool,
    test: &str,
    what: &str,
    why: &str,
) -> Result<String, String> {
    let var = need.require_var();
    if required {
        Err(format!(
            "{test}: {what} cannot run ({why}) but {var}=1 requires it"
        ))
    } else {
        Ok(format!(
            "SKIPPED: {test}: {what} ({why}; {var}=1 makes this a failure)\n"
        ))
    }
}

/// The running test's libtest name (`module::test`): the name of the thread libtest runs it
/// on.
pub fn current_test() -> String {
    std::thread::current()
        .name()
        .unwrap_or("<unnamed thread>")
        .to_string()
}

/// Records that `what` did not run because `why` (see the crate docs): panics when `need`
/// is required, otherwise prints a visible `SKIPPED:` line and appends it to
/// `$ZARRBUF_SKIP_LOG`. The panic names the caller's line.
#[track_caller]
pub fn skip(need: Need, what: &str, why: &str) {
    let test = current_test();
    let line = match skip_outcome(need, need.required(), &test, what, why) {
        Ok(line) => line,
        Err(message) => panic!("{message}"),
    };
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

/// The libtest name of test `name` declared in the module whose `module_path!()` is
/// `module`: the module path without the crate's name (`it::remote` and `x` give
/// `remote::x`). See [`own_test!`].
pub fn test_name(module: &str, name: &str) -> String {
    match module.split_once("::") {
        Some((_crate, path)) => format!("{path}::{name}"),
        None => name.to_string(),
    }
}

/// The libtest name of the test `$name` declared in the calling module, for
/// [`run_own_test`]: `own_test!("ipc_child")` in `tests/it/ipc.rs` is `"ipc::ipc_child"`.
#[macro_export]
macro_rules! own_test {
    ($name:expr) => {
        $crate::test_name(module_path!(), $name)
    };
}

/// Runs the test `name` (its full libtest name, see [`own_test!`]) of this very test binary
/// in a child process (libtest's `--exact`), with `env` set and `remove` unset (plus
/// `ZARRBUF_SKIP_LOG`, unless `env` sets it), and returns its exit status and its
/// stdout + stderr.
pub fn run_own_test(name: &str, env: &[(&str, &str)], remove: &[&str]) -> (ExitStatus, String) {
    let mut cmd = Command::new(std::env::current_exe().expect("the test binary"));
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
    assert_ran_one_test(name, &text);
    (out.status, text)
}

/// Panics unless `output` (a child test run's stdout + stderr) shows that libtest ran
/// exactly one test: `--exact` with a name that matches nothing runs none and succeeds,
/// which would let a renamed test pass unseen.
pub fn assert_ran_one_test(name: &str, output: &str) {
    assert!(
        output.contains("running 1 test"),
        "the child process ran no test named {name:?} (a test binary's test names are \
         `module::test`):\n{output}"
    );
}
