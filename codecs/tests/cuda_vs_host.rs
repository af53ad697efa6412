//! CUDA kernels against the host implementations, byte for byte.
//!
//! Without a CUDA device these tests print a line and pass, unless `ZARRBUF_REQUIRE_GPU=1`,
//! in which case they fail: that is how they run on a GPU machine.

use cudarc::driver::{CudaContext, DevicePtr, DevicePtrMut};
use std::sync::Arc;
use zarrbuf_codecs::cuda::{self, CudaKernels};
use zarrbuf_codecs::{CodecError, ScalarKind, Strided};

/// The device context, or `None` (after printing why) when the tests must be skipped.
fn context() -> Option<Arc<CudaContext>> {
    if !cuda::cuda_available() {
        if std::env::var("ZARRBUF_REQUIRE_GPU").as_deref() == Ok("1") {
            panic!(
                "ZARRBUF_REQUIRE_GPU=1 but no usable CUDA device: libcuda/libnvrtc missing or \
                 no device present"
            );
        }
        println!("skipping CUDA kernel tests: no CUDA device");
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
    let Ok(other) = CudaContext::new_non_primary(0, 0) else {
        return;
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
