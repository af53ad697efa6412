"""Two builds of the Python package on every read path, taking turns: whether a change to
the read core or its fronts moved performance (the house issues' "before and after").

Paths, each a median of ``--reps`` in one process, data in the page cache:

- ``whole``: ``zarrbuf.open(...).read()`` of 256 MiB float32 (256x512x512, 64³ chunks, zstd 1);
- ``patches``: 300 random 1x64x64 patches of it, one read at a time;
- ``stream``: 256 random 64-row minibatches of a 65536x1024 float32 array (1024-row chunks,
  zstd 1) through ``read_stream`` (prefetch 8);
- ``strings``: one million short strings (zstd 1, 65,536 per chunk) in 244 random batches of
  4,096 through ``read_stream`` (prefetch 8), and ``strings whole``: all of them in one read.

The builds take turns in ABBA order (``--runs`` processes each): ``--before DIR`` is a
directory holding a ``zarrbuf`` package (e.g. a copy of ``python/zarrbuf`` with the
extension built at the earlier commit), put first on ``PYTHONPATH``; "after" is the package
installed in this venv (``scripts/python-tests.sh`` builds it).

    .venv/bin/python benches/read_paths.py --before /tmp/before-py [--runs 4] [--reps 5] [--dir target/bench-paths]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
PATHS = ["whole", "patches", "stream", "strings", "strings whole"]
UNITS = {"whole": "GB/s", "patches": "reads/s", "stream": "samples/s", "strings": "strings/s",
         "strings whole": "strings/s"}


def write_data(d: Path) -> None:
    import zarr

    d.mkdir(parents=True, exist_ok=True)
    zstd = zarr.codecs.ZstdCodec(level=1)
    if not (d / "whole.zarr" / "zarr.json").exists():
        print("writing whole.zarr (256 MiB float32, 64³ chunks, zstd 1)...", flush=True)
        z = zarr.create_array(d / "whole.zarr", shape=(256, 512, 512), chunks=(64, 64, 64),
                              dtype="f4", compressors=zstd)
        rng = np.random.default_rng(0)
        for k in range(0, 256, 64):
            base = np.sin(np.arange(k, k + 64, dtype="f4"))[:, None, None]
            z[k:k + 64] = (base + rng.standard_normal((64, 512, 512), dtype="f4") * 1e-3).astype("f4")
    if not (d / "stream.zarr" / "zarr.json").exists():
        print("writing stream.zarr (256 MiB float32, 1024-row chunks, zstd 1)...", flush=True)
        z = zarr.create_array(d / "stream.zarr", shape=(65536, 1024), chunks=(1024, 1024),
                              dtype="f4", compressors=zstd)
        rng = np.random.default_rng(1)
        for r in range(0, 65536, 1024):
            base = np.sin(np.arange(r, r + 1024, dtype="f4")[:, None] / 97.0)
            z[r:r + 1024] = (base + rng.standard_normal((1024, 1024), dtype="f4") * 1e-3).astype("f4")
    if not (d / "strings.zarr" / "zarr.json").exists():
        print("writing strings.zarr (1,000,000 strings, zstd 1)...", flush=True)
        n = 1_000_000
        values = np.array([f"s{i}" if i % 5 else f"é{i}東" for i in range(n)], dtype=object)
        z = zarr.create_array(d / "strings.zarr", shape=(n,), chunks=(65536,), dtype=str,
                              compressors=zstd)
        z[:] = values


def median_rate(reps: int, f) -> float:
    f()  # warm-up
    rates = []
    for _ in range(reps):
        t = time.perf_counter()
        n = f()
        rates.append(n / (time.perf_counter() - t))
    return statistics.median(rates)


def child(d: Path, reps: int) -> dict:
    """Every path once, in this process."""
    import zarrbuf

    out = {"package": zarrbuf.__file__}
    a = zarrbuf.open(str(d / "whole.zarr"))
    nbytes = int(np.prod(a.shape)) * 4
    out["whole"] = median_rate(reps, lambda: (a.read(), nbytes)[1]) / 1e9
    rng = np.random.default_rng(0)
    patches = [(int(rng.integers(256)), int(rng.integers(448)), int(rng.integers(448))) for _ in range(300)]

    def read_patches():
        for z, y, x in patches:
            a.read((slice(z, z + 1), slice(y, y + 64), slice(x, x + 64)))
        return len(patches)

    out["patches"] = median_rate(reps, read_patches)
    s = zarrbuf.open(str(d / "stream.zarr"))
    order = np.random.default_rng(1).permutation(65536 // 64)[:256]
    batches = [(slice(int(b) * 64, int(b) * 64 + 64), slice(None)) for b in order]
    out["stream"] = median_rate(reps, lambda: sum(x.shape[0] for x in s.read_stream(iter(batches), prefetch=8)))
    v = zarrbuf.open(str(d / "strings.zarr"))
    n = v.shape[0]
    vorder = np.random.default_rng(2).permutation(n // 4096)
    vbatches = [(slice(int(b) * 4096, int(b) * 4096 + 4096),) for b in vorder]
    out["strings"] = median_rate(reps, lambda: sum(len(x) for x in v.read_stream(iter(vbatches), prefetch=8)))
    out["strings whole"] = median_rate(reps, lambda: len(v.read()))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", required=False, help="a directory holding the earlier zarrbuf package")
    ap.add_argument("--runs", type=int, default=4)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--dir", type=Path, default=ROOT / "target" / "bench-paths")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.dir, args.reps)))
        return
    if not args.before or not (Path(args.before) / "zarrbuf" / "__init__.py").exists():
        sys.exit("--before DIR: a directory holding a zarrbuf package (DIR/zarrbuf/__init__.py)")
    write_data(args.dir)
    results: dict[str, list[dict]] = {"before": [], "after": []}
    order = (["before", "after", "after", "before"] * ((args.runs + 1) // 2))[: 2 * args.runs]
    for k, side in enumerate(order):
        env = dict(os.environ)
        if side == "before":
            env["PYTHONPATH"] = os.pathsep.join([str(Path(args.before).resolve()), env.get("PYTHONPATH", "")])
        cmd = [sys.executable, __file__, "--child", "--dir", str(args.dir), "--reps", str(args.reps)]
        got = json.loads(subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout)
        want = "before" if side == "before" else "after"
        if (side == "before") != got["package"].startswith(str(Path(args.before).resolve())):
            sys.exit(f"run {k} ({want}) imported {got['package']}")
        results[side].append(got)
        print(f"run {k + 1}/{len(order)} {side}: " + ", ".join(f"{p} {got[p]:.3g}" for p in PATHS), flush=True)
    print(f"\n{args.runs} runs each, ABBA order, medians\n")
    print("| path | before | after | after ÷ before |\n|---|---|---|---|")
    for p in PATHS:
        b = statistics.median(r[p] for r in results["before"])
        a = statistics.median(r[p] for r in results["after"])
        print(f"| {p} ({UNITS[p]}) | {b:.4g} | {a:.4g} | {a / b:.2f} |")


if __name__ == "__main__":
    main()
