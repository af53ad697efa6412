"""Random 64-row minibatches from a 256 MiB float32 array (65536 x 1024, zstd level 1,
chunks of 1024 x 1024 = 4 MiB): samples (rows) per second of

- zarrbuf ``Array.read_stream`` (prefetch 8),
- a plain loop of zarrbuf ``Array.read`` calls,
- zarr-python indexing (its own codec pipeline),
- zarr-python indexing with zarrs-python's ``ZarrsCodecPipeline`` (if ``pip install zarrs``).

Every reader reads the same minibatches (a fixed random permutation of the 64-row blocks,
the first ``--batches`` of it), each run from the page cache; the readers take turns run by
run, and the table shows the median of ``--runs`` runs.

    .venv/bin/python benches/stream_minibatch.py [--store /tmp/zarrbuf-stream-bench.zarr] [--runs 5] [--batches 256]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np
import zarr
import zarrbuf

ROWS, COLS, CHUNK_ROWS, BATCH = 65536, 1024, 1024, 64


def make(store: Path) -> None:
    if (store / "zarr.json").exists():
        return
    print(f"writing {store} (256 MiB float32, zstd 1, 4 MiB chunks)...", flush=True)
    z = zarr.create_array(
        store,
        shape=(ROWS, COLS),
        chunks=(CHUNK_ROWS, COLS),
        dtype="f4",
        compressors=zarr.codecs.ZstdCodec(level=1),
    )
    rng = np.random.default_rng(0)
    for r in range(0, ROWS, CHUNK_ROWS):
        # Smooth values plus noise in the low bits: compresses, but not to nothing.
        base = np.sin(np.arange(r, r + CHUNK_ROWS, dtype="f4")[:, None] / 97.0)
        noise = rng.standard_normal((CHUNK_ROWS, COLS), dtype="f4") * 1e-3
        z[r : r + CHUNK_ROWS] = (base + noise).astype("f4")


def run_stream(a, starts):
    n = 0
    for x in a.read_stream(((slice(s, s + BATCH), slice(None)) for s in starts), prefetch=8):
        n += np.asarray(x).shape[0]
    return n


def run_read_loop(a, starts):
    n = 0
    for s in starts:
        n += np.asarray(a.read((slice(s, s + BATCH), slice(None)))).shape[0]
    return n


def run_zarr(z, starts):
    n = 0
    for s in starts:
        n += z[s : s + BATCH].shape[0]
    return n


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--store", default="/tmp/zarrbuf-stream-bench.zarr")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--batches", type=int, default=256)
    args = p.parse_args()
    store = Path(args.store)
    make(store)
    order = np.random.default_rng(1).permutation(ROWS // BATCH)[: args.batches]
    starts = [int(b) * BATCH for b in order]

    a = zarrbuf.open(str(store))
    readers = {
        "zarrbuf read_stream (prefetch 8)": lambda: run_stream(a, starts),
        "zarrbuf read loop": lambda: run_read_loop(a, starts),
    }
    z_default = zarr.open_array(store, mode="r")
    readers["zarr-python"] = lambda: run_zarr(z_default, starts)
    try:
        import zarrs  # noqa: F401

        def zarrs_python():
            with zarr.config.set({"codec_pipeline.path": "zarrs.ZarrsCodecPipeline"}):
                z = zarr.open_array(store, mode="r")
                return run_zarr(z, starts)

        readers["zarr-python + zarrs-python pipeline"] = zarrs_python
    except ImportError:
        print("zarrs-python is not installed (pip install zarrs): skipping it")

    for f in readers.values():  # warm-up: page cache, thread pools
        f()
    rates: dict[str, list[float]] = {k: [] for k in readers}
    for _ in range(args.runs):
        for name, f in readers.items():
            t = time.perf_counter()
            n = f()
            rates[name].append(n / (time.perf_counter() - t))
    base = statistics.median(rates["zarrbuf read loop"])
    print(f"\n{args.batches} random {BATCH}-row minibatches, median of {args.runs} runs\n")
    print("| reader | samples/s (median) | min–max | × zarrbuf read loop |")
    print("|---|---|---|---|")
    for name, r in rates.items():
        m = statistics.median(r)
        print(f"| {name} | {m:,.0f} | {min(r):,.0f}–{max(r):,.0f} | {m / base:.2f}× |")


if __name__ == "__main__":
    main()
