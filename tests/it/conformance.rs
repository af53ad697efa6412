//! One conformance suite for Buffer / NDBuffer / BufferPrototype, run against every available
//! prototype: CPU always; pinned and CUDA when a GPU is present (otherwise skipped with a
//! visible `SKIPPED:` line, failing when ZARRBUF_REQUIRE_GPU=1: see
//! tests/support/src/lib.rs). The cases and their one list live in `zarrbuf-test-cases`
//! (tests/cases/src/conformance.rs) so the GPU check binary runs the very same code.

use zarrbuf_test_cases::{Case, conformance as cases};

/// Runs `case` on every prototype of the machine.
fn run(name: &str, case: Case) {
    let protos = crate::common::prototypes();
    assert!(!protos.is_empty(), "no prototypes to test");
    for (pname, proto) in protos {
        if let Err(msg) = case(&proto) {
            panic!("{name} on {pname}: {msg}");
        }
    }
}

/// One `#[test]` per case, named after it.
macro_rules! one_test_per_case {
    ($($name:ident),* $(,)?) => {$(
        #[test]
        fn $name() {
            run(stringify!($name), cases::$name);
        }
    )*};
}

zarrbuf_test_cases::conformance_cases!(one_test_per_case);

/// The skip contract of tests/support/src/lib.rs, checked on one case run in a child
/// process: on a machine without a GPU the skip of the pinned and CUDA prototypes shows in plain
/// `cargo test` output (no `--nocapture`), reaches `ZARRBUF_SKIP_LOG`, and fails the test
/// under ZARRBUF_REQUIRE_GPU=1; on a GPU machine nothing is skipped.
#[test]
fn gpu_skips_are_visible_and_fail_when_required() {
    let case = &crate::common::own_test!("zero_length_buffers");
    let log = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("conformance-skip-log-{}.txt", std::process::id()));
    let _ = std::fs::remove_file(&log);
    let log_str = log.to_str().unwrap();
    let (status, out) = crate::common::run_own_test(
        case,
        &[("ZARRBUF_SKIP_LOG", log_str)],
        &["ZARRBUF_REQUIRE_GPU"],
    );
    assert!(
        status.success(),
        "{case} failed without a GPU requirement:\n{out}"
    );
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_file(&log);
    if zarrbuf::Device::Cuda(0).is_available() {
        assert!(
            !out.contains("SKIPPED"),
            "nothing may skip on a GPU machine:\n{out}"
        );
        assert!(logged.is_empty(), "{logged}");
        return;
    }
    let line = format!("SKIPPED: {case}: pinned:0 and cuda:0 prototypes (");
    assert!(out.contains(&line), "no visible skip line in:\n{out}");
    assert!(
        out.contains("ZARRBUF_REQUIRE_GPU=1 makes this a failure"),
        "{out}"
    );
    assert_eq!(logged.matches("SKIPPED: ").count(), 1, "{logged:?}");
    assert!(logged.starts_with(&line), "{logged:?}");

    let (status, out) = crate::common::run_own_test(case, &[("ZARRBUF_REQUIRE_GPU", "1")], &[]);
    assert!(
        !status.success(),
        "{case} passed under ZARRBUF_REQUIRE_GPU=1 without a GPU:\n{out}"
    );
    assert!(out.contains("ZARRBUF_REQUIRE_GPU=1 requires it"), "{out}");
}
