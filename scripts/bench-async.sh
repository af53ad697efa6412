#!/usr/bin/env bash
# Async vs sync whole-array reads in one run: a float32 array (256 MiB by default, 64³
# chunks, zstd 1) read from the filesystem by the sync path, from the filesystem by the
# async (object_store) path, and from a local S3 server (moto) by the async path.
#   scripts/bench-async.sh [MiB] [reps]
set -euo pipefail
cd "$(dirname "$0")/.."
mib=${1:-256}
reps=${2:-5}
bash scripts/setup-python-env.sh >/dev/null
cargo build --release --bin zarrbuf >/dev/null 2>&1
dir=target/bench-async
store="$dir/zstd1-${mib}MiB.zarr"
mkdir -p "$dir"
if [ ! -f "$store/zarr.json" ]; then
    .venv/bin/python - "$store" "$mib" <<'PY'
import sys, numpy as np, zarr
from zarr.codecs import ZstdCodec
store, mib = sys.argv[1], int(sys.argv[2])
n = mib * 2**20 // 4
shape = (n // (256 * 256), 256, 256)
z, y, x = np.meshgrid(np.arange(shape[0]), np.arange(256), np.arange(256), indexing="ij", sparse=True)
rng = np.random.default_rng(0)
data = ((np.sin(z * 0.05) + np.cos(y * 0.03) + x * 1e-3) * 100 + rng.random(shape)).astype("float32")
a = zarr.create_array(store, shape=shape, chunks=(64, 64, 64), dtype="float32", compressors=ZstdCodec(level=1), fill_value=0.0)
a[...] = data
PY
fi
source <(bash scripts/start-test-servers.sh)
.venv/bin/python - "$store" "$ZARRBUF_TEST_S3_ENDPOINT" <<'PY'
import os, sys, boto3
store, endpoint = sys.argv[1], sys.argv[2]
s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1")
s3.create_bucket(Bucket="bench")
for root, _, files in os.walk(store):
    for f in files:
        path = os.path.join(root, f)
        s3.upload_file(path, "bench", "data.zarr/" + os.path.relpath(path, store))
PY
export AWS_ENDPOINT_URL="$ZARRBUF_TEST_S3_ENDPOINT"
echo "sync, filesystem:   $(target/release/zarrbuf bench "$store" --reps "$reps")"
echo "async, filesystem:  $(target/release/zarrbuf bench "$store" --reps "$reps" --async)"
echo "async, local S3:    $(target/release/zarrbuf bench s3://bench/data.zarr --reps "$reps")"
