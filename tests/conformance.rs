//! One conformance suite for Buffer / NDBuffer / BufferPrototype, run against every available
//! prototype: CPU always; pinned and CUDA when a GPU is present (skipped with a printed line
//! otherwise, failing when ZARRBUF_REQUIRE_GPU=1). The cases live in `conformance/cases.rs`
//! so the GPU check binary runs the very same code.

#[path = "conformance/cases.rs"]
mod cases;
mod common;

fn run(name: &str) {
    let case = cases::all()
        .into_iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("no case {name}"))
        .1;
    let protos = common::prototypes();
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
);
