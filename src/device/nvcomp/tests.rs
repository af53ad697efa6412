use super::bindings::DECOMPRESS_OPTS;
use super::loader::check_version;
use super::*;
use zarrbuf_test_support::{Need, skip};

/// The library `ZARRBUF_NVCOMP` names (CI sets it: `scripts/fetch-nvcomp.sh`); `None`
/// after a visible `SKIPPED:` line when it is not set, a failure when
/// `ZARRBUF_REQUIRE_NVCOMP=1` (the integration tests' skip helper).
fn real_library(what: &str) -> Option<&'static Nvcomp> {
    if std::env::var_os("ZARRBUF_NVCOMP").is_some() {
        return Some(nvcomp().unwrap_or_else(|e| panic!("{what}: {e}")));
    }
    skip(Need::Nvcomp, what, "ZARRBUF_NVCOMP is not set");
    None
}

/// The real library takes the options every decompression passes (the CUDA backend in
/// their first word) in its temp-size query, which needs no GPU (null stream), and
/// refuses a backend that does not exist: the word is read as the backend.
#[test]
fn the_real_library_takes_the_cuda_backend() {
    let Some(lib) = real_library("nvCOMP's decompression options") else {
        return;
    };
    let stream = std::ptr::null_mut();
    for (name, format) in [
        ("zstd", lib.zstd),
        ("DEFLATE", lib.deflate),
        ("LZ4", lib.lz4),
    ] {
        lib.temp_bytes(format, 64, 1 << 20, 64 << 20, stream)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut no_such_backend = DECOMPRESS_OPTS;
        no_such_backend.words[0] = 7;
        let mut bytes = 0usize;
        // SAFETY: the query's exact signature (nvCOMP 6, checked at load), plain values
        // and a valid out-pointer; the null stream is CUDA's default one.
        let st = unsafe {
            (format.temp_size)(64, 1 << 20, no_such_backend, &mut bytes, 64 << 20, stream)
        };
        assert_ne!(st, 0, "{name} took backend 7");
    }
}

#[test]
fn only_nvcomp_6_is_taken() {
    for version in [6000, 6012, 6999] {
        assert!(check_version(version, "lib").is_ok(), "{version}");
    }
    for (version, shown) in [
        (5001, "5.0.1"),
        (4200, "4.2.0"),
        (2603, "2.6.3"),
        (7000, "7.0.0"),
        (0, "0.0.0"),
    ] {
        let why = check_version(version, "/x/libnvcomp.so").unwrap_err();
        assert!(
            why.contains(&format!("/x/libnvcomp.so is nvCOMP {shown}")),
            "{why}"
        );
        assert!(why.contains("pip install nvidia-libnvcomp-cu13"), "{why}");
    }
}
