#!/usr/bin/env bash
# Whole-array writes in one run: zarrs, zarrbuf (direct and staged) via `zarrbuf bench-write`,
# then tensorstore and zarr-python via benches/write_peers.py, on the same float32 array
# (MiB×512×512, 64³ chunks, zarr v3) with zstd 1 and uncompressed, each also sharded (256³
# shards of the 64³ chunks).
#   scripts/bench-write.sh [MiB] [reps] [dir]
set -euo pipefail
cd "$(dirname "$0")/.."
mib=${1:-256}
reps=${2:-5}
dir=${3:-target/bench-write}
cargo build --release --bin zarrbuf >/dev/null 2>&1
bin="${CARGO_TARGET_DIR:-target}/release/zarrbuf"
"$bin" bench-write "$dir" --mib "$mib" --reps "$reps" --codecs zstd:1,none --shards 256
.venv/bin/python benches/write_peers.py "$dir" --reps "$reps" --codecs zstd:1,none --shards 256
rm -rf "$dir"
