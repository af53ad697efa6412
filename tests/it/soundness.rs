//! Soundness regressions (the cases and their one list are in `zarrbuf-test-cases`,
//! tests/cases/src/soundness.rs), each run on every available prototype:
//! CPU always; pinned and CUDA when a GPU is present (see tests/support/src/lib.rs for how
//! skips show and when they fail instead).

use zarrbuf_test_cases::{Case, soundness as cases};

/// Runs `case` on every prototype of the machine.
fn run(name: &str, case: Case) {
    for (pname, proto) in crate::common::prototypes() {
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

zarrbuf_test_cases::soundness_cases!(one_test_per_case);

/// Defect 5: dropping an async read must not leave its blocking half writing into the
/// caller's buffer. The drop waits until that half has stopped, so the buffer holds still
/// from the moment the future is gone.
#[test]
fn a_dropped_async_read_stops_writing_before_the_drop_returns() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;
    use zarrbuf::{
        ArrayReadAsyncExt, BufferPrototype, DataType, NDBuffer, Order, options::ReadOptions,
    };

    let demo = crate::common::demo();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let chunks = Arc::new(AtomicUsize::new(0));
    let (mut out, after_drop) = rt.block_on(async {
        let array = zarrbuf::open_async(&demo.store, "").await.unwrap();
        let shape: Vec<usize> = demo.shape.iter().map(|&n| n as usize).collect();
        let mut out =
            NDBuffer::zeros(&shape, DataType::Float32, Order::C, &BufferPrototype::cpu()).unwrap();
        let c = chunks.clone();
        let opts = ReadOptions::default()
            .with_concurrency(1)
            .with_progress(move |_| {
                c.fetch_add(1, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(30));
            });
        let all: Vec<std::ops::Range<u64>> = demo.shape.iter().map(|&n| 0..n).collect();
        let cut = tokio::time::timeout(
            Duration::from_millis(100),
            array.read_into_opt_async(&all, &mut out, &opts),
        )
        .await;
        assert!(cut.is_err(), "the read should still have been running");
        (out.clone(), chunks.load(Ordering::SeqCst))
    });
    let snapshot = out.to_native_bytes().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        chunks.load(Ordering::SeqCst),
        after_drop,
        "chunks kept completing after the dropped future's drop returned"
    );
    assert!(
        out.to_native_bytes().unwrap() == snapshot,
        "the caller's buffer changed after the dropped future's drop returned"
    );
    assert!(after_drop < 64, "the read was not cancelled");
    // The buffer is the caller's again: writing it works.
    out.fill_with(1.0f32).unwrap();
    drop(rt);
}
