//! CUDA kernels against the host implementations, byte for byte.
//!
//! Without a CUDA device these tests skip: each writes a `SKIPPED: <test>: <what> (<why>)`
//! line straight to stderr (past libtest's capture, so it shows in plain `cargo test`
//! output) and appends it to `$ZARRBUF_SKIP_LOG` when that is set, with the skip helper of
//! zarrbuf's own tests (`zarrbuf-test-support`, tests/support/). Under
//! `ZARRBUF_REQUIRE_GPU=1` every skip is a failure instead: that is how they run on a GPU
//! machine.

use cudarc::driver::{CudaContext, DevicePtr, DevicePtrMut};
use std::sync::Arc;
use zarrbuf_codecs::cuda::{self, CudaKernels};
use zarrbuf_codecs::{CodecError, ScalarKind, Strided};
use zarrbuf_test_support::{Need, own_test, run_own_test, skip, skip_outcome};

/// The device context, or `None` (after a visible skip) when the tests must be skipped.
fn context() -> Option<Arc<CudaContext>> {
    if !cuda::cuda_available() {
        skip(
            Need::Gpu,
            "CUDA kernel test",
            "no usable CUDA device: libcuda/libnvrtc missing or no device present",
        );
        return None;
    }
    Some(CudaContext::new(0).expect("cuCtxCreate on device 0"))
}

#[test]
fn self_test_matches_host() {
    let Some(ctx) = context() else { return };
    let report = cuda::self_test(&ctx).unwrap_or_else(|e| panic!("{e}"));
    println!("{report}");
}

#[test]
fn kernels_are_cached_per_context() {
    let Some(ctx) = context() else { return };
    let a = CudaKernels::for_context(&ctx).unwrap();
    let b = CudaKernels::for_context(&ctx).unwrap();
    assert!(Arc::ptr_eq(&a, &b));
    println!("PTX arch: {}", a.arch());
}

#[test]
fn bad_layouts_are_rejected_before_launch() {
    let Some(ctx) = context() else { return };
    let k = CudaKernels::for_context(&ctx).unwrap();
    let stream = ctx.default_stream();
    let src = stream.clone_htod(&[0u8; 16]).unwrap();
    let mut dst = stream.alloc_zeros::<u8>(16).unwrap();
    let (s, _g1) = src.device_ptr(&stream);
    let (d, _g2) = dst.device_ptr_mut(&stream);
    let ok = Strided {
        offset: 0,
        strides: &[4],
    };
    let far = Strided {
        offset: 4,
        strides: &[4],
    };
    // SAFETY: both allocations are 16 bytes and live; every call below must fail validation.
    unsafe {
        let e = k.strided_copy(&stream, s, 16, far, d, 16, ok, &[4], 4, 0);
        assert!(matches!(e, Err(CodecError::InvalidLayout(_))), "{e:?}");
        let e = k.strided_copy(&stream, s, 16, ok, d, 16, ok, &[4], 4, 3);
        assert!(matches!(e, Err(CodecError::InvalidLayout(_))), "{e:?}");
        let e = k.fill(&stream, d, 16, far, &[4], &[1, 2, 3, 4]);
        assert!(matches!(e, Err(CodecError::InvalidLayout(_))), "{e:?}");
        let e = k.cast(
            &stream,
            s,
            16,
            ok,
            ScalarKind::F32,
            d,
            8,
            ok,
            ScalarKind::F64,
            &[4],
        );
        assert!(matches!(e, Err(CodecError::InvalidLayout(_))), "{e:?}");
        let e = k.byte_swap(&stream, d, 6, 4);
        assert!(matches!(e, Err(CodecError::InvalidLayout(_))), "{e:?}");
        let e = k.permute(&stream, s, 16, d, 16, &[2, 3], &[1, 0], 4);
        assert!(matches!(e, Err(CodecError::InvalidLayout(_))), "{e:?}");
        // zero elements: nothing to do, even with null pointers
        k.strided_copy(&stream, 0, 0, ok, 0, 0, ok, &[0], 4, 0)
            .unwrap();
    }
}

#[test]
fn stream_of_another_context_is_rejected() {
    let Some(ctx) = context() else { return };
    let k = CudaKernels::for_context(&ctx).unwrap();
    // A second context can be refused (e.g. exclusive-process compute mode): that is a skip
    // of this test, never a silent pass, and a failure under ZARRBUF_REQUIRE_GPU=1.
    let other = match CudaContext::new_non_primary(0, 0) {
        Ok(other) => other,
        Err(e) => {
            skip(
                Need::Gpu,
                "a kernel launch on another context's stream",
                &format!("cuCtxCreate: {e:?}"),
            );
            return;
        }
    };
    let stream = other.default_stream();
    let v = Strided {
        offset: 0,
        strides: &[1],
    };
    // SAFETY: fails the context check before using the (null) pointers.
    let e = unsafe { k.fill(&stream, 0, 0, v, &[0], &[0]) };
    assert!(matches!(e, Err(CodecError::Cuda(_))), "{e:?}");
}

#[test]
fn a_skip_is_a_failure_when_a_gpu_is_required() {
    assert_eq!(
        skip_outcome(Need::Gpu, false, "t", "something", "a reason"),
        Ok("SKIPPED: t: something (a reason; ZARRBUF_REQUIRE_GPU=1 makes this a failure)\n".into())
    );
    let m = skip_outcome(Need::Gpu, true, "t", "something", "a reason").unwrap_err();
    assert!(m.contains("ZARRBUF_REQUIRE_GPU=1 requires it"), "{m}");
}

/// Without a GPU, the skip of a kernel test shows in plain `cargo test` output (the test
/// run again in a child process, without `--nocapture`) and fails under ZARRBUF_REQUIRE_GPU=1.
#[test]
fn gpu_skips_show_in_plain_test_output() {
    if cuda::cuda_available() {
        return; // nothing skips here; the GPU tests themselves run
    }
    let test = own_test!("self_test_matches_host");
    let run = |require: bool| {
        let (status, text) = if require {
            run_own_test(&test, &[("ZARRBUF_REQUIRE_GPU", "1")], &[])
        } else {
            run_own_test(&test, &[], &["ZARRBUF_REQUIRE_GPU"])
        };
        (status.success(), text)
    };
    let (ok, out) = run(false);
    assert!(ok, "{out}");
    assert!(
        out.contains(&format!("SKIPPED: {test}: CUDA kernel test (")),
        "no visible skip line in:\n{out}"
    );
    let (ok, out) = run(true);
    assert!(
        !ok,
        "passed without a GPU under ZARRBUF_REQUIRE_GPU=1:\n{out}"
    );
}
