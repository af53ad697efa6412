#!/usr/bin/env bash
# Runs zarrbuf's host-side unit tests of the unsafe memory layer, Buffer and NDBuffer under
# Miri (undefined behaviour, out-of-bounds and misaligned accesses, reads of uninitialised
# bytes, aliasing violations, data races, leaks), and exits non-zero on any failure.
#
# What runs: the library's unit tests whose names start with the filters below — the tests
# in src/memory/ (borrow flags, host allocations, the block cache, and miri_tests.rs, which
# drives Buffer and NDBuffer through the memory layer), src/buffer/, the staging-slot tests in
# src/pipeline/ and the codec-plan test; and in the codecs crate, the batched strided copy's
# host twin (raw-pointer writes from a batch of items). Integration tests and doctests are not run: they
# touch files, sockets and thread pools that Miri does not model, or take far too long.
#
# Miri cannot call foreign code, so under cfg(miri) huge-page advice (madvise) is skipped
# and the CUDA probe reports the driver absent (Error::DeviceUnavailable); no check is relaxed.
#
# Environment:
#   MIRI_TOOLCHAIN  the nightly to use (default: nightly); pin one, e.g. nightly-2026-10-29,
#                   when a new nightly breaks the build
#   MIRIFLAGS       passed to Miri as usual (e.g. -Zmiri-tree-borrows, -Zmiri-seed=N)
#
# The first run builds the dependencies for Miri into target/miri (a few minutes); later runs
# reuse them.
set -euo pipefail

cd "$(dirname "$0")/.."
toolchain="${MIRI_TOOLCHAIN:-nightly}"

# Install the toolchain with Miri (and rust-src, which Miri's sysroot is built from) only
# when missing.
if ! rustup run "$toolchain" cargo miri --version >/dev/null 2>&1; then
    echo "miri.sh: installing $toolchain with the miri component" >&2
    rustup toolchain install "$toolchain" --profile minimal --component miri --component rust-src
fi
if ! rustup component list --toolchain "$toolchain" --installed 2>/dev/null | grep -q '^rust-src'; then
    rustup component add --toolchain "$toolchain" rust-src
fi

# Builds Miri's standard library once (cached under ~/.cache/miri).
cargo +"$toolchain" miri setup

# --no-default-features: the CLI and the object-store backends are not needed by these tests
# and only lengthen the build.
cargo +"$toolchain" miri test --lib --no-default-features -- \
    memory:: buffer:: pipeline::slot zarr::plan::codec_plan

# A batch item names its source by address (`CopyItem::src: u64`, the form a device pointer
# takes too), so the host twin turns integers back into pointers: exposed provenance by
# design, which permissive provenance checks without a warning per test.
MIRIFLAGS="${MIRIFLAGS:-} -Zmiri-permissive-provenance" \
    cargo +"$toolchain" miri test -p zarrbuf-codecs --lib --no-default-features -- host::copy_batch
