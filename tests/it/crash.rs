//! Writes that are killed: `zarrbuf copy` is killed with SIGKILL at random moments (a fresh
//! copy uncompressed, with zstd, and into shards; and an overwrite of an existing array with
//! other data), and after every kill each destination chunk must be absent, wholly the old
//! data or wholly the new — never torn or mixed — and `zarrbuf check` must find nothing, or,
//! in an overwrite, only the complete new file of a key whose replacement the kill caught
//! between naming the file and renaming it over the key (`check --repair` removes it).
//! `copy --resume` then finishes the copy exactly. Planted damage (a truncation, a bit flip,
//! a stray temporary file) is named by `check`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use zarrbuf::{ArrayLayout, ArrayReadExt, ArrayWriteExt, BufferPrototype, DataType, NDBuffer};

/// Kills per scenario (each one a fresh process killed at a random moment).
const KILLS: usize = 16;

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target")
        .join("tmp")
        .join("crash")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn zarrbuf() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_zarrbuf"));
    c.env_remove("ZARRBUF_DEVICE")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    c
}

/// A float32 source array of 32 MiB (1024 × 64 × 128) in 64 chunks of 16 × 64 × 128 (512 KiB
/// each) holding `seed`'s values, stored with `codecs`.
fn source(dir: &Path, name: &str, seed: f32, codecs: &str) -> String {
    let path = dir.join(name);
    let store = zarrbuf::store::open_store(path.to_str().unwrap()).unwrap();
    let template = zarrbuf::open(
        &crate::common::root()
            .join("data/v3_large_3d.zarr")
            .to_string_lossy(),
        "",
    )
    .unwrap();
    let layout = ArrayLayout {
        chunks: Some(vec![16, 64, 128]),
        codecs: Some(codecs.parse().unwrap()),
        ..Default::default()
    };
    let shape = [1024u64, 64, 128];
    let array = zarrbuf::create_like(&template, &shape, store, "", &layout, false).unwrap();
    let n: usize = shape.iter().product::<u64>() as usize;
    let values: Vec<f32> = (0..n).map(|i| seed + (i % 9973) as f32 * 0.5).collect();
    let data = NDBuffer::from_vec(values, &[1024, 64, 128]).unwrap();
    array.write_all(&data).unwrap();
    path.to_string_lossy().into_owned()
}

/// Every chunk of the destination, decoded, as a map from chunk indices to bytes (`None`
/// for a chunk that is not stored). Panics with the chunk's name when one does not decode.
fn stored_chunks(dst: &str) -> Vec<(Vec<u64>, Option<Vec<u8>>)> {
    let array = zarrbuf::open(dst, "").unwrap();
    let grid = array.chunk_grid_shape().to_vec();
    let mut out = Vec::new();
    for i in 0..grid[0] {
        for j in 0..grid[1] {
            for k in 0..grid[2] {
                let idx = vec![i, j, k];
                let got = array
                    .retrieve_chunk_if_exists_opt::<zarrs::array::ArrayBytes<'static>>(
                        &idx,
                        &Default::default(),
                    )
                    .unwrap_or_else(|e| panic!("chunk {idx:?} of {dst} is torn: {e}"));
                out.push((idx, got.map(|b| b.into_fixed().unwrap().to_vec())));
            }
        }
    }
    out
}

/// The decoded bytes of the destination chunk at `idx` as `src` holds them.
fn chunk_of(src: &str, dst: &str, idx: &[u64]) -> Vec<u8> {
    let d = zarrbuf::open(dst, "").unwrap();
    let subset = d.chunk_subset(idx).unwrap();
    let ranges: Vec<std::ops::Range<u64>> = subset.to_ranges();
    let s = zarrbuf::open(src, "").unwrap();
    let data = s.read(&ranges, &BufferPrototype::cpu()).unwrap();
    data.to_vec::<f32>()
        .unwrap()
        .iter()
        .flat_map(|v| v.to_ne_bytes())
        .collect()
}

/// Asserts that every chunk of `dst` is absent, `old`'s or `new`'s; returns (absent, old, new).
///
/// A copy killed before it stored the metadata leaves no array: every chunk is absent.
fn assert_whole(dst: &str, old: Option<&str>, new: &str) -> (usize, usize, usize) {
    let mut counts = (0, 0, 0);
    if !Path::new(dst).join("zarr.json").exists() {
        return counts;
    }
    for (idx, got) in stored_chunks(dst) {
        let Some(got) = got else {
            counts.0 += 1;
            continue;
        };
        if got == chunk_of(new, dst, &idx) {
            counts.2 += 1;
        } else if old.is_some_and(|old| got == chunk_of(old, dst, &idx)) {
            counts.1 += 1;
        } else {
            panic!("chunk {idx:?} of {dst} is neither the old nor the new data (mixed)");
        }
    }
    counts
}

/// `zarrbuf check --json` of `dst`: whether it exited 0, its findings, and the report and
/// stderr as a message for failed assertions.
fn check_json(dst: &str) -> (bool, Vec<serde_json::Value>, String) {
    let out = zarrbuf()
        .args(["check", dst, "--json"])
        .stdout(Stdio::piped())
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    let findings = report["findings"].as_array().cloned().unwrap_or_default();
    let said = format!(
        "check of {dst} after a kill: {report} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), findings, said)
}

/// `zarrbuf check` of `dst` exits 0 and reports no finding.
fn assert_check_clean(dst: &str) {
    let (ok, findings, said) = check_json(dst);
    assert!(ok && findings.is_empty(), "{said}");
}

/// After a kill: `zarrbuf check` of `dst` finds nothing, or — when the killed copy replaced
/// keys that existed (`replacing`) — only the temporary file of a replacement killed in
/// the microseconds between naming the complete new file and renaming it over its key,
/// which `check --repair` then removes. Returns how many such files there were.
fn check_after_kill(dst: &str, replacing: bool) -> usize {
    let (ok, findings, said) = check_json(dst);
    if ok && findings.is_empty() {
        return 0;
    }
    let in_flight = |f: &serde_json::Value| {
        let key = Path::new(f["key"].as_str().unwrap_or(""));
        let name = key.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let replaced = name
            .strip_prefix('.')
            .and_then(|n| n.split_once(".zarrbuf-tmp."))
            .map(|(target, _)| Path::new(dst).join(key.with_file_name(target)));
        f["problem"] == "leftover" && replaced.is_some_and(|t| t.exists())
    };
    assert!(replacing && findings.iter().all(in_flight), "{said}");
    let repaired = zarrbuf().args(["check", dst, "--repair"]).output().unwrap();
    assert!(repaired.status.success(), "check --repair of {dst}");
    assert_check_clean(dst);
    findings.len()
}

/// Runs `args`, killing it after `delay`; returns whether it had finished by then.
fn run_killed(args: &[&str], delay: Duration) -> bool {
    let mut child = zarrbuf().args(args).spawn().unwrap();
    let start = Instant::now();
    while start.elapsed() < delay {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "{args:?} failed before the kill");
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    child.kill().unwrap(); // SIGKILL on Unix: no handler runs, no cleanup
    let _ = child.wait();
    false
}

/// How long a whole, unkilled run of `args` takes.
fn full_run(args: &[&str]) -> Duration {
    let start = Instant::now();
    let out = zarrbuf().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    start.elapsed()
}

/// A deterministic spread of kill moments over `0..full` (a linear congruential sequence,
/// so a failure reproduces).
fn kill_moments(full: Duration, seed: u64) -> Vec<Duration> {
    let mut x = seed;
    (0..KILLS)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            full.mul_f64((x >> 11) as f64 / (1u64 << 53) as f64)
        })
        .collect()
}

/// Kills copies of `src` into `dst` (made `before` each run) at random moments, checks each
/// kill, then resumes and checks the result.
///
/// A killed copy is resumed once (`--resume`), except a killed `--overwrite`: it may have
/// been killed before every old chunk was deleted, and those decode; it is run again with
/// `--overwrite` instead (README says so).
fn kill_copies(
    scenario: &str,
    src: &str,
    old: Option<&str>,
    extra: &[&str],
    before: &dyn Fn(&str),
) {
    let dir = scratch(&format!("{scenario}-dst"));
    let dst = dir.join("d.zarr").to_string_lossy().into_owned();
    let mut args = vec!["copy", src, dst.as_str(), "--memory", "4MiB"];
    args.extend_from_slice(extra);
    before(&dst);
    let full = full_run(&args);
    let (mut finished, mut no_array, mut outcomes, mut in_flight) = (0, 0, (0, 0, 0), 0);
    for (n, delay) in kill_moments(full, 7 + scenario.len() as u64)
        .into_iter()
        .enumerate()
    {
        before(&dst);
        if run_killed(&args, delay) {
            finished += 1;
        }
        let (absent, was_old, was_new) = assert_whole(&dst, old, src);
        outcomes = (
            outcomes.0 + absent,
            outcomes.1 + was_old,
            outcomes.2 + was_new,
        );
        if Path::new(&dst).join("zarr.json").exists() {
            in_flight += check_after_kill(&dst, old.is_some());
        } else {
            no_array += 1;
        }
        if n == 0 {
            // Resuming a killed copy finishes it exactly.
            let mut again = args.clone();
            if old.is_none() {
                again.push("--resume");
            }
            full_run(&again);
            let (absent, _, _) = assert_whole(&dst, None, src);
            assert_eq!(absent, 0, "{scenario}: the resumed copy left chunks out");
        }
    }
    eprintln!(
        "{scenario}: {KILLS} kills over {full:?} ({finished} finished first, {no_array} before the metadata); \
         chunks seen absent {}, old {}, new {}; replacements caught in flight {in_flight}",
        outcomes.0, outcomes.1, outcomes.2
    );
}

#[test]
fn killed_copies_leave_whole_chunks_and_resume() {
    let dir = scratch("sources");
    let raw = source(&dir, "raw.zarr", 1.0, "none");
    let zstd = source(&dir, "zstd.zarr", 2.0, "zstd:1");
    let fresh = |dst: &str| {
        let _ = std::fs::remove_dir_all(dst);
    };
    kill_copies("uncompressed", &raw, None, &[], &fresh);
    kill_copies("zstd", &zstd, None, &[], &fresh);
    kill_copies(
        "sharded",
        &zstd,
        None,
        &["--chunks", "16,32,32", "--shards", "32,64,128"],
        &fresh,
    );
    // An overwrite of an array holding other data, chunk for chunk the same layout.
    let old = source(&dir, "old.zarr", 100.0, "none");
    let prepare = |dst: &str| {
        fresh(dst);
        full_run(&["copy", &old, dst]);
    };
    kill_copies("overwrite", &raw, Some(&old), &["--overwrite"], &prepare);
}

#[test]
fn check_names_planted_damage() {
    let dir = scratch("planted");
    let src = source(&dir, "src.zarr", 3.0, "zstd:1+crc32c");
    let store = src.clone();
    assert_check_clean(&store);
    let root = Path::new(&store);
    let truncate = root.join("c/1/0/0");
    let bytes = std::fs::read(&truncate).unwrap();
    std::fs::write(&truncate, &bytes[..bytes.len() / 2]).unwrap();
    let flip = root.join("c/2/0/0");
    let mut bytes = std::fs::read(&flip).unwrap();
    bytes[40] ^= 0x01;
    std::fs::write(&flip, bytes).unwrap();
    std::fs::write(root.join("c/3/0/.0.zarrbuf-tmp.elsewhere.1.0"), b"torn").unwrap();
    let out = zarrbuf()
        .args(["check", &store])
        .stdout(Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    for want in [
        "c/1/0/0: ",
        "c/2/0/0: checksum",
        "c/3/0/.0.zarrbuf-tmp.elsewhere.1.0: leftover",
    ] {
        assert!(text.contains(want), "{want:?} not in:\n{text}");
    }
    assert_eq!(text.lines().count(), 3, "{text}");
    let repaired = zarrbuf()
        .args(["check", &store, "--repair"])
        .stdout(Stdio::piped())
        .output()
        .unwrap();
    assert!(repaired.status.success());
    assert_check_clean(&store);
}

#[test]
fn durability_sync_writes_the_same_bytes() {
    let dir = scratch("sync");
    let src = source(&dir, "src.zarr", 4.0, "zstd:1");
    let dst = dir.join("d.zarr").to_string_lossy().into_owned();
    full_run(&["copy", &src, &dst, "--sync"]);
    let (absent, _, new) = assert_whole(&dst, None, &src);
    assert_eq!((absent, new), (0, 64));
    let a = zarrbuf::open(&dst, "").unwrap();
    let back = a.read_all(&BufferPrototype::cpu()).unwrap();
    assert_eq!(back.dtype(), DataType::Float32);
}

#[test]
fn check_walks_every_array_of_a_group() {
    let dir = scratch("group");
    let group = dir.join("g.zarr");
    let from = crate::common::root().join("data/v2_group_consolidated.zarr");
    for file in crate::common::walk(&from) {
        let to = group.join(file.strip_prefix(&from).unwrap());
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(&file, &to).unwrap();
    }
    let store = group.to_string_lossy().into_owned();
    let clean = zarrbuf()
        .args(["check", &store, "--json"])
        .stdout(Stdio::piped())
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&clean.stdout).unwrap();
    assert!(clean.status.success(), "{report}");
    assert_eq!(
        report["arrays"].as_array().map(Vec::len),
        Some(2),
        "{report}"
    );
    let chunk = group.join("g/labels/1.2");
    let bytes = std::fs::read(&chunk).unwrap();
    std::fs::write(&chunk, &bytes[..bytes.len() - 3]).unwrap();
    let out = zarrbuf()
        .args(["check", &store])
        .stdout(Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("g/labels/1.2: "), "{text}");
    assert_eq!(text.lines().count(), 1, "{text}");
}

/// What a kill between naming a replacement and renaming it over its key leaves — the new
/// file under its hidden name beside the old key — is accepted after a killed overwrite
/// only, and `check --repair` removes it; a temporary file beside no key is never accepted.
#[test]
fn replacements_caught_in_flight_are_reported_and_repaired() {
    let dir = scratch("in-flight");
    let store = source(&dir, "src.zarr", 4.0, "zstd:1");
    let root = Path::new(&store);
    let metadata = std::fs::read(root.join("zarr.json")).unwrap();
    std::fs::write(root.join(".zarr.json.zarrbuf-tmp.elsewhere.1.0"), &metadata).unwrap();
    let chunk = std::fs::read(root.join("c/1/0/0")).unwrap();
    std::fs::write(root.join("c/1/0/.0.zarrbuf-tmp.elsewhere.1.1"), chunk).unwrap();
    assert_eq!(check_after_kill(&store, true), 2);
    assert!(!root.join(".zarr.json.zarrbuf-tmp.elsewhere.1.0").exists());
    std::fs::write(root.join(".zarr.json.zarrbuf-tmp.elsewhere.1.2"), &metadata).unwrap();
    let fresh_copy = std::panic::catch_unwind(|| check_after_kill(&store, false));
    assert!(
        fresh_copy.is_err(),
        "accepted after a copy that replaced nothing"
    );
    std::fs::write(root.join("c/1/0/.9.zarrbuf-tmp.elsewhere.1.3"), b"torn").unwrap();
    let beside_nothing = std::panic::catch_unwind(|| check_after_kill(&store, true));
    assert!(
        beside_nothing.is_err(),
        "accepted a temporary file beside no key"
    );
}
