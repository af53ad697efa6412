#!/usr/bin/env bash
# Whole-array writes in one run: zarrs, zarrbuf (direct and staged) via `zarrbuf bench-write`,
# then tensorstore and zarr-python via benches/write_peers.py, on the same float32 array
# (MiB×512×512, 64³ chunks, zarr v3) with zstd 1 and uncompressed, each also sharded (256³
# shards of the 64³ chunks).
# The writers take turns: ROUNDS rounds (default 3); in each, for each codec, zarrbuf's
# benchmark (zarrs and zarrbuf, rotating which goes first in each repetition) and then the
# peers' write the codec's two arrays, REPS timed writes each after a warm-up (median). A
# row's figure is the median of its rounds' medians, and each ratio to tensorstore is taken
# round by round (zarrbuf and tensorstore written minutes apart at most, so the machine's
# drift between rounds cancels) and its median printed, with the lowest round beside it.
#   scripts/bench-write.sh [MiB] [reps] [rounds] [dir]
# ZARRBUF_BIN overrides the zarrbuf binary (default: a fresh release build's).
set -euo pipefail
cd "$(dirname "$0")/.."
mib=${1:-256}
reps=${2:-5}
rounds=${3:-3}
dir=${4:-target/bench-write}
bash scripts/setup-python-env.sh >/dev/null
if [ -z "${ZARRBUF_BIN:-}" ]; then
    cargo build --release --bin zarrbuf >/dev/null 2>&1
    ZARRBUF_BIN="${CARGO_TARGET_DIR:-target}/release/zarrbuf"
fi
codecs="zstd:1 none"
echo "write benchmark: $mib MiB float32 (${mib}×512×512), 64³ chunks, each codec also in 256³ shards; $rounds rounds of $reps writes per writer, $(nproc) cores, median GB/s"
echo "($(uptime | sed 's/.*load/load/'))"
results=$(mktemp)
trap 'rm -f "$results"; rm -rf "$dir"' EXIT
# The figures of a Markdown table's rows: "variant<TAB>writer<TAB>round<TAB>GB/s" lines, the
# first number of each cell (zarrbuf's cells carry a ratio to zarrs after it).
rows() {
    local round=$1
    shift
    .venv/bin/python -c '
import re, sys
round, writers = sys.argv[1], sys.argv[2:]
for line in sys.stdin:
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if len(cells) != len(writers) + 1 or not re.match(r"[0-9.]+", cells[1]):
        continue
    for writer, cell in zip(writers, cells[1:]):
        value = re.match(r"[0-9.]+", cell).group(0)
        print(f"{cells[0]}\t{writer}\t{round}\t{value}")
' "$round" "$@"
}
for round in $(seq "$rounds"); do
    for codec in $codecs; do
        "$ZARRBUF_BIN" bench-write "$dir" --mib "$mib" --reps "$reps" --codecs "$codec" --shards 256 |
            rows "$round" zarrs write_all staged >>"$results"
        .venv/bin/python benches/write_peers.py "$dir" --reps "$reps" --codecs "$codec" --shards 256 |
            rows "$round" tensorstore zarr-python >>"$results"
    done
done
echo "($(uptime | sed 's/.*load/load/'))"
.venv/bin/python - "$results" <<'PY'
import statistics, sys
from collections import defaultdict
runs = defaultdict(dict)  # (variant, writer) -> {round: GB/s}
variants = []
for line in open(sys.argv[1]):
    v, writer, rnd, value = line.rstrip("\n").split("\t")
    runs[(v, writer)][int(rnd)] = float(value)
    if v not in variants:
        variants.append(v)
writers = ["zarrs", "write_all", "staged", "tensorstore", "zarr-python"]
def med(v, w):
    r = runs.get((v, w))
    return f"{statistics.median(r.values()):.3f}" if r else "—"
def ratios(v, a, b):
    ra, rb = runs.get((v, a)), runs.get((v, b))
    if not ra or not rb:
        return "—"
    each = [ra[k] / rb[k] for k in ra if k in rb]
    return f"{statistics.median(each):.2f}× (lowest {min(each):.2f}×)"
print("| codec | zarrs | zarrbuf write_all | zarrbuf staged | tensorstore | zarr-python | write_all / tensorstore | write_all / zarrs |")
print("|---|---|---|---|---|---|---|---|")
for v in variants:
    cells = " | ".join(med(v, w) for w in writers)
    print(f"| {v} | {cells} | {ratios(v, 'write_all', 'tensorstore')} | {ratios(v, 'write_all', 'zarrs')} |")
PY
