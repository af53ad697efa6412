//! The `zarrbuf-gpucheck` binary as `scripts/gpu-test` runs it: its command line, checked on
//! the built binary (no GPU needed; the parser's own cases are unit tests in `src/main.rs`).

use std::process::Command;

/// The GPU verification binary must not pass by doing nothing: a mistyped subcommand or flag
/// exits non-zero before any check runs.
#[test]
fn gpucheck_rejects_mistyped_subcommands_and_flags() {
    let gpucheck = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_zarrbuf-gpucheck"))
            .args(args)
            .output()
            .expect("the zarrbuf-gpucheck binary runs")
    };
    for args in [
        &["bogus"][..],
        &["al", "--root", "."],
        &["all", "--root", ".", "--bogus"],
        &["all", "--reps", "zero"],
        &["bench", "--device", "gpu"],
    ] {
        let out = gpucheck(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).starts_with("error: "),
            "{args:?}: {out:?}"
        );
        assert!(out.stdout.is_empty(), "{args:?}: no check may run: {out:?}");
    }
    let help = gpucheck(&["--help"]);
    assert!(help.status.success());
    let help = String::from_utf8_lossy(&help.stdout);
    for word in [
        "kernels",
        "conformance",
        "fixtures",
        "bench",
        "--root",
        "--bench-bytes",
        "--reps",
        "--quick",
        "--device",
    ] {
        assert!(help.contains(word), "--help lacks {word}: {help}");
    }
}
