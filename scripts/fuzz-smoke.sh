#!/usr/bin/env bash
# Fuzz smoke test: builds the cargo-fuzz targets in tests/fuzz once, then runs every target
# for FUZZ_SECONDS (default 30) starting from its committed seed corpus. Exits non-zero if
# any target finds a crash, a panic, a timeout or an out-of-memory input (the input is left
# under tests/fuzz/artifacts/<target>/; replay it with
#   cargo +nightly fuzz run --fuzz-dir tests/fuzz <target> <input>).
#
# Installs what it needs when missing: the nightly toolchain (minimal profile) and
# cargo-fuzz. The build is release with debug assertions (overflow checks), at opt-level 1
# with 16 codegen units and no sanitizer, to keep a cold build short on 2 cores (about 4 min
# here; AddressSanitizer adds about 1.5 min: FUZZ_SANITIZER=address); all targets share one
# target dir (tests/fuzz/target).
#
# Environment: FUZZ_SECONDS (per target), FUZZ_TARGETS (space-separated subset),
# FUZZ_RSS_MB (default 2048), FUZZ_TIMEOUT (seconds per input, default 10),
# FUZZ_SANITIZER (none, address, ...; default none).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

seconds=${FUZZ_SECONDS:-30}
targets=(${FUZZ_TARGETS:-metadata chunk_decode shard_index npy_read subset_parser check_walk bounded_decode vlen_decode zip_directory prefix_decode})
rss_mb=${FUZZ_RSS_MB:-2048}
per_input=${FUZZ_TIMEOUT:-10}

if ! rustup toolchain list | grep -q '^nightly'; then
    echo "fuzz-smoke: installing the nightly toolchain"
    rustup toolchain install nightly --profile minimal
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz-smoke: installing cargo-fuzz"
    cargo install cargo-fuzz --locked
fi

# The fuzz crate resolves dependencies like the main workspace does: start from its lock.
if [ ! -f tests/fuzz/Cargo.lock ] && [ -f Cargo.lock ]; then
    cp Cargo.lock tests/fuzz/Cargo.lock
fi

export CARGO_PROFILE_RELEASE_OPT_LEVEL=1
# Line tables are enough for a crash's backtrace; full debug info made each target ~110 MB.
export CARGO_PROFILE_RELEASE_DEBUG=line-tables-only
build_flags=(--fuzz-dir tests/fuzz --release --debug-assertions --codegen-units 16
    --sanitizer "${FUZZ_SANITIZER:-none}")

start=$(date +%s)
echo "fuzz-smoke: building ${targets[*]}"
cargo +nightly fuzz build "${build_flags[@]}"
echo "fuzz-smoke: built in $(( $(date +%s) - start )) s"

# LeakSanitizer: ignore the one-time thread-local destructor registration of pool threads.
export LSAN_OPTIONS="suppressions=$root/tests/fuzz/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"

# Scratch files of the targets (one temp store per input) on tmpfs when there is one.
if [ -d /dev/shm ] && [ -w /dev/shm ]; then
    export TMPDIR=/dev/shm
fi

work=tests/fuzz/target/smoke-corpus
failed=()
for t in "${targets[@]}"; do
    rm -rf "${work:?}/$t"
    mkdir -p "$work/$t" "tests/fuzz/artifacts/$t"
    extra=()
    if [ -f "tests/fuzz/dict/$t.dict" ]; then
        extra+=("-dict=tests/fuzz/dict/$t.dict")
    fi
    echo "fuzz-smoke: $t for ${seconds} s"
    # The new corpus entries go to the scratch directory; the committed corpus is only read.
    if timeout $((seconds + 300)) cargo +nightly fuzz run "${build_flags[@]}" "$t" \
        "$work/$t" "tests/fuzz/corpus/$t" -- \
        -max_total_time="$seconds" -rss_limit_mb="$rss_mb" -timeout="$per_input" \
        -print_final_stats=1 "${extra[@]}" >"$work/$t.log" 2>&1; then
        grep -E '^#[0-9]+[[:space:]]+DONE' "$work/$t.log" | tail -1 || true
    else
        echo "fuzz-smoke: $t FAILED; the end of its log ($work/$t.log):"
        tail -40 "$work/$t.log"
        failed+=("$t")
    fi
done

echo "fuzz-smoke: done in $(( $(date +%s) - start )) s"
if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzz-smoke: crashes in: ${failed[*]} (inputs under tests/fuzz/artifacts/)"
    exit 1
fi
