//! The CUDA kernel sources compile with NVRTC for the GPU architectures zarrbuf targets.
//!
//! Needs only NVRTC (no GPU, no driver): CI installs it from its pip wheel and sets
//! `ZARRBUF_REQUIRE_NVRTC=1` (scripts/nvrtc-check.sh), which turns a missing NVRTC into a
//! failure. Without NVRTC and without that variable the test skips visibly (a `SKIPPED:`
//! line, `zarrbuf-test-support`).

use zarrbuf_test_support::{Need, skip};

/// Every kernel the crate loads by name.
const KERNELS: [&str; 21] = [
    "zb_copy_w1",
    "zb_copy_w2",
    "zb_copy_w4",
    "zb_copy_w8",
    "zb_copy_w16",
    "zb_copy_bytes",
    "zb_copy_batch",
    "zb_transpose_w1",
    "zb_transpose_w2",
    "zb_transpose_w4",
    "zb_transpose_w8",
    "zb_transpose_w16",
    "zb_fill_w1",
    "zb_fill_w2",
    "zb_fill_w4",
    "zb_fill_w8",
    "zb_fill_w16",
    "zb_fill_bytes",
    "zb_cast",
    "zb_blosc_unshuffle",
    "zb_adler32_pieces",
];

#[test]
fn kernels_compile_for_every_target_architecture() {
    // Volta (the oldest CUDA 13 supports) through Hopper and Blackwell.
    for arch in ["compute_75", "compute_80", "compute_90", "compute_100"] {
        match zarrbuf_codecs::cuda::compile_kernels(arch) {
            Ok(ptx) => {
                for kernel in KERNELS {
                    assert!(
                        ptx.contains(&format!(".entry {kernel}(")),
                        "{arch}: the PTX lacks kernel {kernel}"
                    );
                }
                eprintln!(
                    "{arch}: {} bytes of PTX, {} kernels",
                    ptx.len(),
                    KERNELS.len()
                );
            }
            Err(e) if e.to_string().contains("not found") => {
                skip(
                    Need::Nvrtc,
                    "CUDA kernels compiled with NVRTC",
                    &format!("NVRTC is not installed here: {e}"),
                );
                return;
            }
            Err(e) => panic!("{arch}: {e}"),
        }
    }
}
