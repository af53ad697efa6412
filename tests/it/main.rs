//! zarrbuf's integration tests: one test binary, `it`, one module per concern. One binary
//! links the dependency tree once instead of once per file; a test is named by its module
//! (`copy::subset_copy_holds_exactly_the_subset`). How to run one module or one test:
//! docs/testing.md, "Running one module or one test".
//!
//! The tests share one process. None of them changes process-wide state that another reads
//! (the environment, the current directory, the default prototype); a test that needs the
//! process to itself — to change its environment, to measure its peak RSS, to read what it
//! writes to stderr, or to survive an abort — re-runs itself in a child process
//! (`common::run_own_test`, `remote::sixty_four_concurrent_reads_are_exact_and_bounded`,
//! `fuzz_regressions::fuzz_crash_inputs_fail_cleanly`). Helpers shared by the modules are in
//! `common`; how a test says it could not run is in `zarrbuf-test-support` (tests/support/).

mod common;

mod array_facts;
mod blosc_device;
mod cache_identity;
mod check_remote;
mod chunk_cache;
mod cli;
mod conformance;
mod copy;
mod copy_overlap;
mod copy_sparse;
mod coverage;
mod crash;
mod damaged_codecs;
mod device_chunk_cache;
mod device_compress;
mod device_decode;
mod errors;
mod fixtures;
mod fuzz_regressions;
mod hostile_decode;
mod hostile_keys;
mod hostile_local;
#[cfg(feature = "icechunk")]
mod icechunk;
mod import_cycles;
mod ipc;
mod multi_device;
mod nvcomp_library;
mod prefix_decode;
mod ranged_reads;
mod read_output;
mod read_stream;
mod realign;
mod regressions;
mod remote;
mod remote_latency;
mod s3_faults;
mod s3_requests;
mod shard_encode;
mod shard_index_cache;
mod shard_repair;
mod shared_fetch;
mod soundness;
mod store_conformance;
mod stores;
mod string_fixtures;
mod varlen_check;
mod varlen_cli;
mod varlen_copy;
mod varlen_crash;
mod varlen_read;
mod varlen_stream;
mod varlen_write;
mod write;
mod zarrs_decoded;
mod zip_integrity;
