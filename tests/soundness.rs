//! Soundness regressions (see `soundness/cases.rs`), each run on every available prototype:
//! CPU always; pinned and CUDA when a GPU is present (see tests/common/mod.rs for how skips
//! show and when they fail instead).

#[path = "soundness/cases.rs"]
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

macro_rules! soundness {
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

soundness!(
    empty_never_shows_old_bytes,
    host_views_block_writers,
    bool_views_check_their_bytes,
    async_copies_are_waited_for,
    released_memory_waits_for_copies,
    close_orders_the_release,
    prototype_streams_order_copies,
);
