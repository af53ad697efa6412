//! zarrbuf-codecs' integration tests: one test binary (`cargo test -p zarrbuf-codecs --test
//! it`), one module per concern (`cargo test -p zarrbuf-codecs --test it nvrtc_compile::`).
//! How a test says it could not run (`SKIPPED:` lines, `ZARRBUF_SKIP_LOG`,
//! `ZARRBUF_REQUIRE_GPU=1`) is `zarrbuf-test-support` (tests/support/), shared with zarrbuf's
//! own tests.

mod cuda_vs_host;
mod host_vs_reference;
mod nvrtc_compile;
