#![allow(clippy::single_range_in_vec_init)] // a 1-d subset: one range, on purpose
//! A `zarrbuf copy` of a string array killed with SIGKILL at spread-out moments: after every
//! kill `zarrbuf check` of the destination finds nothing (each chunk is absent or whole,
//! never torn: the directory store renames each complete chunk into place), and
//! `copy --resume` then finishes the copy exactly.

use crate::varlen_write::strings;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use zarrbuf::{ArrayWriteVarLenExt, VarLenBuffer};
use zarrs::array::ArraySubset;

/// Kills (each one a fresh copy killed at its own moment).
const KILLS: u64 = 10;
/// Strings in the source (chunks of 2,000).
const N: u64 = 60_000;

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("crash")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn zarrbuf() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_zarrbuf"));
    c.env_remove("ZARRBUF_DEVICE")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// The zarr.json of a zstd-compressed v3 `string` array of `N` elements in chunks of 2,000.
fn meta() -> String {
    format!(
        r#"{{"zarr_format": 3, "node_type": "array", "shape": [{N}], "data_type": "string",
        "chunk_grid": {{"name": "regular", "configuration": {{"chunk_shape": [2000]}}}},
        "chunk_key_encoding": {{"name": "default", "configuration": {{"separator": "/"}}}},
        "fill_value": "", "codecs": [{{"name": "vlen-utf8", "configuration": {{}}}},
        {{"name": "zstd", "configuration": {{"level": 1, "checksum": false}}}}]}}"#
    )
}

fn assert_check_clean(dst: &str, when: &str) {
    let out = zarrbuf().args(["check", dst, "--json"]).output().unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    assert!(
        out.status.success() && report["findings"].as_array().is_some_and(Vec::is_empty),
        "check of {dst} {when}: {report} {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn killed_string_copies_leave_whole_chunks_and_resume_exactly() {
    let dir = scratch("varlen");
    let src = dir.join("src.zarr");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("zarr.json"), meta()).unwrap();
    let want = strings(N as usize, 21);
    let a = zarrbuf::open(src.to_str().unwrap(), "").unwrap();
    a.write_varlen_all(&VarLenBuffer::from_strings(vec![N], &want).unwrap())
        .unwrap();
    let dst = dir.join("dst.zarr").to_string_lossy().into_owned();
    let src = src.to_string_lossy().into_owned();
    let args = |extra: &'static str| {
        let mut v = vec!["copy", src.as_str(), dst.as_str(), "--chunks", "1500"];
        v.extend(["--codec", "zstd:3", "--memory", "1MiB", extra]);
        v
    };
    // The shorter of two whole runs: kills are spread over its first 80%, so that a run
    // faster than the measured ones is still caught mid-copy.
    let full = (0..2)
        .map(|_| {
            let start = Instant::now();
            let out = zarrbuf().args(args("--overwrite")).output().unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            start.elapsed()
        })
        .min()
        .unwrap_or_default()
        .mul_f64(0.8);
    let mut killed = 0;
    for k in 0..KILLS {
        let _ = std::fs::remove_dir_all(&dst);
        let delay = full.mul_f64((k as f64 + 0.5) / KILLS as f64);
        let mut child = zarrbuf().args(args("--overwrite")).spawn().unwrap();
        let t = Instant::now();
        let mut done = false;
        while t.elapsed() < delay {
            if child.try_wait().unwrap().is_some() {
                done = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        if !done {
            child.kill().unwrap();
            killed += 1;
        }
        let _ = child.wait();
        if !Path::new(&dst).join("zarr.json").exists() {
            continue; // killed before the destination was created
        }
        assert_check_clean(&dst, &format!("after a kill at {delay:?}"));
        let resumed = zarrbuf().args(args("--resume")).output().unwrap();
        assert!(
            resumed.status.success(),
            "{}",
            String::from_utf8_lossy(&resumed.stderr)
        );
        let back: Vec<String> = zarrbuf::open(&dst, "")
            .unwrap()
            .retrieve_array_subset(&ArraySubset::new_with_ranges(&[0..N]))
            .unwrap();
        assert!(
            back == want,
            "the resumed copy after a kill at {delay:?} differs"
        );
    }
    // Copies that finished before their moment prove nothing but do no harm; at least one
    // must have been killed for the test to have tested anything.
    assert!(
        killed >= 1,
        "none of {KILLS} copies was killed (each finished first)"
    );
}
