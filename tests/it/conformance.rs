//! One conformance suite for Buffer / NDBuffer / BufferPrototype, run against every available
//! prototype: CPU always; pinned and CUDA when a GPU is present (otherwise skipped with a
//! visible `SKIPPED:` line, failing when ZARRBUF_REQUIRE_GPU=1: see
//! tests/support/src/lib.rs). The cases live in `conformance/cases.rs` so the GPU check
//! binary runs the very same code.

mod cases;

fn run(name: &str) {
    let case = cases::all()
        .into_iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("no case {name}"))
        .1;
    let protos = crate::common::prototypes();
    assert!(!protos.is_empty(), "no prototypes to test");
    for (pname, proto) in protos {
        if let Err(msg) = case(&proto) {
            panic!("{name} on {pname}: {msg}");
        }
    }
}

macro_rules! conformance {
    ($($name:ident),* $(,)?) => {$(
        #[test]
        fn $name() {
            run(stringify!($name));
        }
    )*
        #[test]
        fn every_case_has_a_test() {
            let listed: Vec<&str> = cases::all().iter().map(|(n, _)| *n).collect();
            let tested = [$(stringify!($name)),*];
            assert_eq!(listed, tested);
        }
    };
}

conformance!(
    zero_length_buffers,
    empty_shapes_dtypes_orders,
    create_and_as_scalar,
    integer_indexing_gives_views,
    all_equal_matches_a_full_scan,
    array_equal_matches_a_full_scan,
    zero_copy_promotion,
    slices_and_bounds,
    concat_and_combine,
    copies_between_memories,
    host_access_rules,
    borrow_rules,
    read_only_bytes,
    fill_and_fill_with,
    set_subsets_from_host,
    transpose_views_and_copies,
    reshape_and_squeeze,
    astype_matches_rust_casts,
    with_type_views,
    byte_order_round_trips,
    ndarray_round_trips,
    item_of_every_type,
    lazy_allocation,
    memory_resource,
);

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
