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
    for (pname, proto) in common::prototypes() {
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
    zero_copy_promotion,
    slices_and_bounds,
    concat_and_combine,
    copies_between_memories,
    host_access_rules,
    fill_and_set_subsets,
    transpose_views_and_copies,
    reshape_and_squeeze,
    astype_matches_rust_casts,
    with_type_and_byte_order,
    ndarray_round_trips,
);
