#!/usr/bin/env bash
# Sync vs async whole-array reads, and the hand-written limit, in one run. Four float32
# arrays (256 MiB by default, 64³ chunks): uncompressed, zstd 1, blosc lz4 + shuffle, and
# zstd 1 sharded 256³/64³, written by zarr-python. Each is read by `zarrbuf bench`:
#   - sync, zarrs:        the sync reader with zarrs' decode-into (`--direct`), the route
#                         reads of fewer than 8 chunks take;
#   - sync:               the sync reader as it reads whole arrays (`PipelineMode::Auto`: the
#                         staged pipeline, decoding on worker threads into place or into
#                         staging slots they scatter from);
#   - async, filesystem:  the async reader (`--async`: object_store `file://`);
#   - async, local S3:    the async reader on a local S3 server (moto, 127.0.0.1).
# Then the hand-written limit for zstd 1 and blosc lz4 (`benches/limit.rs`): one thread
# reads each chunk file, decodes it into a reused buffer with the codec library zarrbuf
# uses (zstd crate; c-blosc through blosc-src) and copies it into its place in a large
# output; that single-thread rate times the cores is the limit (the same loop on that many
# threads at once is printed beside it).
# The readers take turns: ROUNDS rounds (default 3), each running every reader once
# (`--reps REPS` reads after a warm-up, median); a row's figure is the median of its rounds'
# medians, and each ratio is taken round by round (so the machine's drift between rounds
# cancels) and its median printed. The load averages before and after show how busy the
# machine was.
#   scripts/bench-async.sh [MiB] [reps] [rounds]
# ZARRBUF_BIN overrides the zarrbuf binary (default: a fresh release build's).
set -euo pipefail
cd "$(dirname "$0")/.."
mib=${1:-256}
reps=${2:-5}
rounds=${3:-3}
target=${CARGO_TARGET_DIR:-target}
bash scripts/setup-python-env.sh >/dev/null
if [ -z "${ZARRBUF_BIN:-}" ]; then
    cargo build --release --bin zarrbuf >/dev/null 2>&1
    ZARRBUF_BIN="$target/release/zarrbuf"
fi
limit_bin=$(cargo bench --bench limit --no-run --message-format=json 2>/dev/null |
    .venv/bin/python -c 'import sys, json
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("target", {}).get("name") == "limit" and m.get("executable"):
        print(m["executable"])')
dir=target/bench-async
mkdir -p "$dir"
variants="uncompressed zstd1 blosc-lz4-shuffle zstd1-sharded"
for v in $variants; do
    store="$dir/$v-${mib}MiB.zarr"
    [ -f "$store/zarr.json" ] && continue
    .venv/bin/python - "$store" "$mib" "$v" <<'PY'
import sys, numpy as np, zarr
from zarr.codecs import BloscCodec, ZstdCodec
store, mib, variant = sys.argv[1], int(sys.argv[2]), sys.argv[3]
n = mib * 2**20 // 4
shape = (n // (256 * 256), 256, 256)
z, y, x = np.meshgrid(np.arange(shape[0]), np.arange(256), np.arange(256), indexing="ij", sparse=True)
rng = np.random.default_rng(0)
data = ((np.sin(z * 0.05) + np.cos(y * 0.03) + x * 1e-3) * 100 + rng.random(shape)).astype("float32")
kw = dict(shape=shape, chunks=(64, 64, 64), dtype="float32", fill_value=0.0)
if variant == "uncompressed":
    kw["compressors"] = None
elif variant == "zstd1":
    kw["compressors"] = ZstdCodec(level=1)
elif variant == "blosc-lz4-shuffle":
    kw["compressors"] = BloscCodec(cname="lz4", clevel=5, shuffle="shuffle", typesize=4)
else:
    kw.update(shards=(256, 256, 256), compressors=ZstdCodec(level=1))
a = zarr.create_array(store, **kw)
a[...] = data
PY
done
source <(bash scripts/start-test-servers.sh)
# A server left running would take CPU from every later measurement.
trap 'kill $ZARRBUF_TEST_SERVER_PIDS 2>/dev/null || true' EXIT
.venv/bin/python - "$ZARRBUF_TEST_S3_ENDPOINT" "$dir" "$mib" $variants <<'PY'
import os, sys, boto3
endpoint, root, mib, variants = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1")
s3.create_bucket(Bucket="bench")
for v in variants:
    store = os.path.join(root, f"{v}-{mib}MiB.zarr")
    for base, _, files in os.walk(store):
        for f in files:
            path = os.path.join(base, f)
            s3.upload_file(path, "bench", f"{v}.zarr/" + os.path.relpath(path, store))
PY
export AWS_ENDPOINT_URL="$ZARRBUF_TEST_S3_ENDPOINT"
cores=$(nproc)
echo "zarrbuf bench --reps $reps, $rounds rounds, $mib MiB float32 arrays, 64³ chunks, $cores cores, median GB/s"
echo "($(uptime | sed 's/.*load/load/'))"
results=$(mktemp)
# One reader's median GB/s: `bench` (or the limit's × cores figure) prints it.
gbps() { sed -n 's/.*median \([0-9.]*\) GB\/s.*= \([0-9.]*\) GB\/s.*/\2/p; t; s/.*median \([0-9.]*\) GB\/s.*/\1/p'; }
# The S3 server (Python) goes on using CPU for a while after a reader is done with it: wait
# until its CPU time stops growing (at most 30 s), so it does not slow the next reader.
s3_pid=${ZARRBUF_TEST_SERVER_PIDS%% *}
server_settles() {
    local before after
    for _ in $(seq 60); do
        before=$(awk '{print $14 + $15}' "/proc/$s3_pid/stat" 2>/dev/null || echo 0)
        sleep 0.5
        after=$(awk '{print $14 + $15}' "/proc/$s3_pid/stat" 2>/dev/null || echo 0)
        [ "$before" = "$after" ] && return 0
    done
}
server_settles  # after the uploads
for round in $(seq "$rounds"); do
    for v in $variants; do
        store="$dir/$v-${mib}MiB.zarr"
        echo "$v sync-zarrs $round $("$ZARRBUF_BIN" bench "$store" --reps "$reps" --direct | gbps)" >>"$results"
        echo "$v sync $round $("$ZARRBUF_BIN" bench "$store" --reps "$reps" | gbps)" >>"$results"
        echo "$v async-file $round $("$ZARRBUF_BIN" bench "$store" --reps "$reps" --async | gbps)" >>"$results"
        echo "$v async-s3 $round $("$ZARRBUF_BIN" bench "s3://bench/$v.zarr" --reps "$reps" | gbps)" >>"$results"
        server_settles
        case $v in
        zstd1 | blosc-lz4-shuffle)
            echo "$v limit $round $("$limit_bin" "$store" --reps "$reps" --cores "$cores" | gbps)" >>"$results"
            ;;
        esac
    done
done
echo "($(uptime | sed 's/.*load/load/'))"
.venv/bin/python - "$results" $variants <<'PY'
import statistics, sys
from collections import defaultdict
path, variants = sys.argv[1], sys.argv[2:]
runs = defaultdict(dict)  # (variant, reader) -> {round: GB/s}
for line in open(path):
    v, reader, rnd, value = line.split()
    runs[(v, reader)][int(rnd)] = float(value)
def med(v, reader):
    r = runs.get((v, reader))
    return statistics.median(r.values()) if r else None
def ratio(v, a, b):
    ra, rb = runs.get((v, a)), runs.get((v, b))
    if not ra or not rb:
        return "—"
    return f"{statistics.median(ra[k] / rb[k] for k in ra if k in rb):.2f}×"
def fmt(x):
    return "—" if x is None else f"{x:.2f}"
print("| variant | sync, zarrs decode-into | sync | async, filesystem | async, local S3 | limit | sync / zarrs | async / sync | sync / limit |")
print("|---|---|---|---|---|---|---|---|---|")
for v in variants:
    cells = [fmt(med(v, r)) for r in ("sync-zarrs", "sync", "async-file", "async-s3", "limit")]
    print(f"| {v} | " + " | ".join(cells) + f" | {ratio(v, 'sync', 'sync-zarrs')} | {ratio(v, 'async-file', 'sync')} | {ratio(v, 'sync', 'limit')} |")
PY
rm -f "$results"
