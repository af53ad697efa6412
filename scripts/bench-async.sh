#!/usr/bin/env bash
# Sync vs async whole-array reads, and the hand-written limit, in one run. Four float32
# arrays (256 MiB by default, 64³ chunks): uncompressed, zstd 1, blosc lz4 + shuffle, and
# zstd 1 sharded 256³/64³, written by zarr-python. Each is read by `zarrbuf bench`:
#   - sync, filesystem:   the sync reader on the directory (CPU: zarrs' decode-into);
#   - sync, staged:       the same through the staged pipeline (`--staged`: decode into
#                         staging slots, scatter on the decoding threads), as async reads do;
#   - async, filesystem:  the async reader (`--async`: object_store `file://`);
#   - async, local S3:    the async reader on a local S3 server (moto, 127.0.0.1).
# Then the hand-written limit for zstd 1 and blosc lz4 (`benches/limit.rs`): one thread
# reads each chunk file, decodes it into a reused buffer with the codec library zarrbuf
# uses (zstd crate; c-blosc through blosc-src) and copies it into its place in a large
# output; that single-thread rate times the cores is the limit (the same loop on that many
# threads at once is printed beside it). The load averages before and after show how busy
# the machine was.
#   scripts/bench-async.sh [MiB] [reps]
# ZARRBUF_BIN overrides the zarrbuf binary (default: a fresh release build's).
set -euo pipefail
cd "$(dirname "$0")/.."
mib=${1:-256}
reps=${2:-5}
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
echo "zarrbuf bench --reps $reps, $mib MiB float32 arrays, 64³ chunks, $cores cores, median GB/s"
echo "($(uptime | sed 's/.*load/load/'))"
for v in $variants; do
    store="$dir/$v-${mib}MiB.zarr"
    echo "$v, sync, filesystem:   $("$ZARRBUF_BIN" bench "$store" --reps "$reps")"
    echo "$v, sync, staged:       $("$ZARRBUF_BIN" bench "$store" --reps "$reps" --staged)"
    echo "$v, async, filesystem:  $("$ZARRBUF_BIN" bench "$store" --reps "$reps" --async)"
    echo "$v, async, local S3:    $("$ZARRBUF_BIN" bench "s3://bench/$v.zarr" --reps "$reps")"
    case $v in
    zstd1 | blosc-lz4-shuffle)
        echo "$v, hand-written limit: $("$limit_bin" "$store" --reps "$reps" --cores "$cores")"
        ;;
    esac
done
echo "($(uptime | sed 's/.*load/load/'))"
