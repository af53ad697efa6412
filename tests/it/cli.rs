//! The `zarrbuf` command line, run as a user runs it: outputs, `.npy` contents, and one-line
//! errors with a non-zero exit status.

use crate::common::{fixtures, root};
use std::process::{Command, Output};

fn zarrbuf(args: &[&str]) -> Output {
    zarrbuf_with_env(args, &[])
}

/// `zarrbuf args` with `vars` set in its environment.
fn zarrbuf_with_env(args: &[&str], vars: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_zarrbuf"))
        .args(args)
        .env_remove("ZARRBUF_DEVICE")
        .envs(vars.iter().copied())
        .output()
        .expect("the zarrbuf binary runs")
}

/// Asserts a read of the demo array that succeeded and printed generate.py's checksum.
fn assert_read_the_demo_array(o: &Output, demo: &crate::common::Demo, context: &str) {
    assert!(o.status.success(), "{context}: {o:?}");
    let text = stdout(o);
    assert!(
        text.contains(&format!("crc32 {:08x}", demo.crc32)),
        "{context}: checksum should be {:08x}: {text}",
        demo.crc32
    );
}

fn store(name: &str) -> String {
    root()
        .join("data")
        .join(format!("{name}.zarr"))
        .to_string_lossy()
        .into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Asserts a failure: non-zero status, exactly one stderr line starting with `error: `.
fn assert_one_line_error(o: &Output, must_contain: &str) {
    assert!(
        !o.status.success(),
        "expected failure, got success: {}",
        stdout(o)
    );
    let err = String::from_utf8_lossy(&o.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "stderr should be one line: {err:?}");
    assert!(lines[0].starts_with("error: "), "{err}");
    assert!(
        lines[0].contains(must_contain),
        "{:?} should mention {must_contain:?}",
        lines[0]
    );
    assert!(
        !err.contains("panicked") && !err.contains("backtrace"),
        "{err}"
    );
}

#[test]
fn info_describes_shards_codecs_and_fill() {
    let o = zarrbuf(&["info", &store("v3_shard_end")]);
    assert!(o.status.success(), "{o:?}");
    let text = stdout(&o);
    for want in [
        "shape:      [23, 30]",
        "shards:     [10, 16]",
        "chunks:     [5, 8]",
        "data type:  int32",
        "sharding_indexed",
        "fill value: -1",
    ] {
        assert!(text.contains(want), "info output lacks {want:?}:\n{text}");
    }
    let o = zarrbuf(&["info", &store("v3_nested_group"), "--path", "a/b/c"]);
    assert!(o.status.success() && stdout(&o).contains("[6, 8]"), "{o:?}");
}

#[test]
fn read_out_writes_the_expected_npy_for_every_fixture() {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cli-npy");
    std::fs::create_dir_all(&dir).unwrap();
    for f in fixtures() {
        let out = dir.join(format!("{}.npy", f.name));
        let o = zarrbuf(&[
            "read",
            &f.store_path(),
            "--path",
            &f.path,
            "--out",
            out.to_str().unwrap(),
        ]);
        assert!(
            o.status.success(),
            "{}: {}",
            f.name,
            String::from_utf8_lossy(&o.stderr)
        );
        let got = zarrbuf::npy::read(&out).unwrap();
        let want = zarrbuf::npy::read(&f.npy_path()).unwrap();
        assert!(
            got.array_equal(&want, true).unwrap()
                && got.to_native_bytes().unwrap() == want.to_native_bytes().unwrap(),
            "{}",
            f.name
        );
        let header = std::fs::read(&out).unwrap();
        let header = String::from_utf8_lossy(&header[..128.min(header.len())]).into_owned();
        assert!(
            !header.contains("'>"),
            "{}: .npy must be little-endian: {header}",
            f.name
        );
        if f.name == "v3_bool" {
            assert!(header.contains("'|b1'"), "{header}");
        }
        if f.name == "v3_complex64_fill" {
            assert!(header.contains("'<c8'"), "{header}");
        }
    }
}

#[test]
fn read_subset_and_summary() {
    let out = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cli-subset.npy");
    let o = zarrbuf(&[
        "read",
        &store("v3_large_3d"),
        "--subset",
        "2:5,0:32,7:9",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{o:?}");
    let got = zarrbuf::npy::read(&out).unwrap();
    let want = zarrbuf::npy::read(&root().join("data/v3_large_3d.npy")).unwrap();
    let part = want.get(&[2..5, 0..32, 7..9]).unwrap();
    assert!(got.array_equal(&part, true).unwrap());

    let o = zarrbuf(&["read", &store("v3_large_3d"), "--device", "cpu"]);
    assert!(o.status.success(), "{o:?}");
    let text = stdout(&o);
    let crc = crc32fast::hash(&want.to_native_bytes().unwrap());
    assert!(
        text.contains("shape:      [24, 32, 20]") && text.contains("dtype:      float32"),
        "{text}"
    );
    assert!(
        text.contains(&format!("crc32 {crc:08x}")),
        "checksum should be {crc:08x}: {text}"
    );
    assert!(text.contains("GB/s"), "{text}");
}

/// README's quick start command, on the array it names: the printed checksum is the one
/// generate.py computed from zarr-python's data.
#[test]
fn quick_start_read_of_the_demo_array() {
    let demo = crate::common::demo();
    let o = zarrbuf(&["read", &demo.store, "--device", "auto"]);
    assert_read_the_demo_array(&o, &demo, "the quick start");
    let text = stdout(&o);
    assert!(text.contains("shape:      [256, 512, 512]"), "{text}");
    assert!(text.contains("GB/s"), "{text}");
}

#[test]
fn bench_prints_a_median() {
    let o = zarrbuf(&["bench", &store("v3_large_3d"), "--reps", "3"]);
    assert!(o.status.success(), "{o:?}");
    assert!(
        stdout(&o).contains("median") && stdout(&o).contains("GB/s"),
        "{}",
        stdout(&o)
    );
    // The checksum of what it read, as `read` prints it.
    let demo = crate::common::demo();
    let o = zarrbuf(&["bench", &demo.store, "--reps", "1"]);
    assert_read_the_demo_array(&o, &demo, "bench");
}

#[test]
fn bench_reads_listed_subsets_one_at_a_time() {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cli-bench-subsets");
    std::fs::create_dir_all(&dir).unwrap();
    let list = dir.join("subsets.txt");
    std::fs::write(&list, "0:1,0:4,0:4\n\n1:2,2:5,0:3\n").unwrap();
    let list = list.to_str().unwrap();
    let o = zarrbuf(&[
        "bench",
        &store("v3_large_3d"),
        "--subsets",
        list,
        "--reps",
        "2",
    ]);
    assert!(o.status.success(), "{o:?}");
    let text = stdout(&o);
    assert!(
        text.contains("2 subsets read one at a time") && text.contains("median read"),
        "{text}"
    );
    // Two rates, one per repetition.
    let rates = text
        .split("reads/s ")
        .nth(1)
        .unwrap()
        .split(';')
        .next()
        .unwrap();
    assert_eq!(rates.split_whitespace().count(), 2, "{text}");
    // The same reads decoding only the needed prefix of each chunk.
    let o = zarrbuf(&[
        "bench",
        &store("v3_large_3d"),
        "--subsets",
        list,
        "--reps",
        "1",
        "--prefix-decode",
    ]);
    assert!(o.status.success(), "{o:?}");
    assert!(stdout(&o).contains("2 subsets read one at a time"), "{o:?}");
    std::fs::write(dir.join("bad.txt"), "0:1,0:999,0:1\n").unwrap();
    assert_one_line_error(
        &zarrbuf(&[
            "bench",
            &store("v3_large_3d"),
            "--subsets",
            dir.join("bad.txt").to_str().unwrap(),
        ]),
        "dimension 1",
    );
}

#[test]
fn bench_codec_limit_decodes_the_same_chunks_on_one_thread() {
    let o = zarrbuf(&[
        "bench",
        &store("ts_v3_zstd_nan"),
        "--reps",
        "2",
        "--codec-limit",
    ]);
    assert!(o.status.success(), "{o:?}");
    let text = stdout(&o);
    assert!(
        text.contains("codec limit: ")
            && text.contains("(zstd) decoded one after another on one thread")
            && text.contains("over 2 passes")
            && text.contains("this read ÷ the limit"),
        "{text}"
    );
    // Chains other than bytes + zstd (here a transpose inside shards) are refused.
    assert_one_line_error(
        &zarrbuf(&[
            "bench",
            &store("ts_v3_shard_start_transpose"),
            "--codec-limit",
        ]),
        "--codec-limit",
    );
}

#[test]
fn failures_are_one_line_errors() {
    assert_one_line_error(
        &zarrbuf(&["read", "/no/such/store.zarr"]),
        "no such directory",
    );
    assert_one_line_error(
        &zarrbuf(&["read", &store("v3_large_3d"), "--subset", "0:3"]),
        "3 dimensions",
    );
    assert_one_line_error(
        &zarrbuf(&["read", &store("v3_large_3d"), "--subset", "0:99,0:1,0:1"]),
        "dimension 0",
    );
    assert_one_line_error(
        &zarrbuf(&["read", &store("v3_large_3d"), "--subset", "a:b,0:1,0:1"]),
        "not a non-negative integer",
    );
    assert_one_line_error(
        &zarrbuf(&["read", &store("v3_large_3d"), "--device", "tpu"]),
        "--device",
    );
    assert_one_line_error(
        &zarrbuf(&["info", &store("v3_large_3d"), "--path", "nope"]),
        "no array metadata",
    );
    assert_one_line_error(
        &zarrbuf(&["bench", &store("v3_large_3d"), "--reps", "0"]),
        "--reps",
    );
    if !zarrbuf::Device::Cuda(0).is_available() {
        assert_one_line_error(
            &zarrbuf(&["read", &store("v3_large_3d"), "--device", "cuda"]),
            "device unavailable",
        );
    }
    let out = zarrbuf(&["read", &store("v3_large_3d"), "--out", "/no/such/dir/x.npy"]);
    assert_one_line_error(&out, "/no/such/dir/x.npy");
}

/// `ZARRBUF_HUGE_PAGES` chooses the page size of the CLI's memory: `on` and `off` read the
/// same bytes, anything else is a one-line error naming the variable and what it takes.
#[test]
fn huge_page_choice_reads_the_same_and_bad_values_are_errors() {
    let demo = crate::common::demo();
    for choice in ["on", "off", "auto"] {
        let o = zarrbuf_with_env(&["read", &demo.store], &[("ZARRBUF_HUGE_PAGES", choice)]);
        assert_read_the_demo_array(&o, &demo, choice);
    }
    let o = zarrbuf_with_env(
        &["read", &demo.store],
        &[("ZARRBUF_HUGE_PAGES", "sometimes")],
    );
    assert_one_line_error(
        &o,
        "ZARRBUF_HUGE_PAGES=\"sometimes\" is not a setting: use on, off or auto",
    );
    assert_eq!(o.status.code(), Some(2));
}

fn copy_dir(name: &str) -> std::path::PathBuf {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("cli-{name}"));
    if dir.is_dir() {
        std::fs::remove_dir_all(&dir).unwrap();
    } else if dir.exists() {
        std::fs::remove_file(&dir).unwrap();
    }
    dir
}

#[test]
fn copy_rechunks_recompresses_and_reads_back() {
    let dst = copy_dir("copy.zarr");
    let d = dst.to_str().unwrap();
    let o = zarrbuf(&[
        "copy",
        &store("v3_shard_end"),
        d,
        "--chunks",
        "4,4",
        "--shards",
        "8,8",
        "--codec",
        "blosc:zstd:3:bitshuffle",
        "--subset",
        "1:21,2:30",
        "--memory",
        "1KiB",
        "--device",
        "cpu",
    ]);
    assert!(o.status.success(), "{o:?}");
    let msg = String::from_utf8_lossy(&o.stderr);
    assert!(msg.contains("copied") && msg.contains("[20, 28]"), "{msg}");
    let info = stdout(&zarrbuf(&["info", d]));
    assert!(
        info.contains("shards:     [8, 8]") && info.contains("chunks:     [4, 4]"),
        "{info}"
    );
    assert!(info.contains("blosc"), "{info}");
    let npy = copy_dir("copy.npy");
    let o = zarrbuf(&["read", d, "--out", npy.to_str().unwrap()]);
    assert!(o.status.success(), "{o:?}");
    let back = zarrbuf::npy::read(&npy).unwrap();
    let want = zarrbuf::npy::read(&root().join("data/v3_shard_end.npy")).unwrap();
    let want = want.get(&[1..21, 2..30]).unwrap().copy().unwrap();
    assert_eq!(
        back.to_native_bytes().unwrap(),
        want.to_native_bytes().unwrap()
    );
    // A second copy to the same place is refused, and --overwrite replaces it.
    let again = zarrbuf(&["copy", &store("v3_shard_end"), d]);
    assert_one_line_error(&again, "--overwrite");
    let o = zarrbuf(&[
        "copy",
        &store("v3_shard_end"),
        d,
        "--overwrite",
        "--codec",
        "none",
    ]);
    assert!(o.status.success(), "{o:?}");
    assert!(stdout(&zarrbuf(&["info", d])).contains("shape:      [23, 30]"));
}

#[test]
fn copy_failures_are_one_line_errors() {
    let src = store("v3_int8");
    let dst = copy_dir("copy-bad.zarr");
    let d = dst.to_str().unwrap();
    let cases: [(&[&str], &str); 9] = [
        (&["--codec", "lzma"], "unknown codec"),
        (&["--codec", "zstd:99"], "-7..=22"),
        (&["--chunks", "4"], "one size per dimension"),
        (&["--chunks", "4,x"], "not a positive integer"),
        (&["--chunks", "4,0"], "zero size"),
        (
            &["--shards", "6,6", "--chunks", "4,4"],
            "multiple of the chunks",
        ),
        (&["--zarr-format", "2"], "v3"),
        (&["--memory", "lots"], "--memory"),
        (&["--subset", "0:99,0:1"], "outside"),
    ];
    for (extra, want) in cases {
        let mut args = vec!["copy", src.as_str(), d];
        args.extend_from_slice(extra);
        assert_one_line_error(&zarrbuf(&args), want);
        assert!(
            !dst.join("zarr.json").exists(),
            "{extra:?} created the destination"
        );
    }
    // Onto itself: refused before anything is deleted.
    assert_one_line_error(&zarrbuf(&["copy", &src, &src, "--overwrite"]), "overlaps");
    assert!(std::path::Path::new(&src).join("zarr.json").exists());
    assert_one_line_error(
        &zarrbuf(&["copy", "/no/such/store", d]),
        "no such directory",
    );
}

#[test]
fn compress_choice_on_copy_and_bench_write() {
    // copy takes --compress; an unknown choice is refused, naming the valid ones.
    let dst = copy_dir("copy-compress.zarr");
    let d = dst.to_str().unwrap();
    let o = zarrbuf(&[
        "copy",
        &store("v3_large_3d"),
        d,
        "--codec",
        "gzip:3+crc32c",
        "--compress",
        "gpu",
        "--overwrite",
    ]);
    assert!(o.status.success(), "{o:?}");
    let o = zarrbuf(&["copy", &store("v3_large_3d"), d, "--compress", "tpu"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("cpu, gpu or auto"), "{err}");
    // bench-write's staged column compresses with the device's host twin here.
    let dir = copy_dir("bench-write-gpu");
    let o = zarrbuf(&[
        "bench-write",
        dir.to_str().unwrap(),
        "--mib",
        "1",
        "--reps",
        "1",
        "--codecs",
        "zstd:1+crc32c,gzip:1",
        "--compress",
        "gpu",
    ]);
    assert!(o.status.success(), "{o:?}");
    let out = stdout(&o);
    assert!(
        out.contains("compress Gpu") && out.contains("| gzip:1 |"),
        "{out}"
    );
}
