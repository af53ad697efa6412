//! zarrbuf-codecs' integration tests: one test binary, `it`, one module per concern (how to
//! run one: docs/testing.md, "Running one module or one test").
//! How a test says it could not run (`SKIPPED:` lines, `ZARRBUF_SKIP_LOG`,
//! `ZARRBUF_REQUIRE_GPU=1`) is `zarrbuf-test-support` (tests/support/), shared with zarrbuf's
//! own tests.

mod cuda_vs_host;
mod host_vs_reference;
mod nvrtc_compile;
