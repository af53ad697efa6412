"""Whole-array reads (``arr[:]`` into NumPy) from Python: the four arrays of the Rust read
benchmark (``benches/read.rs``, ``tests/cases/src/variants.rs``) — float32, 64³ chunks,
uncompressed, zstd 1, blosc lz4 + shuffle, zstd 1 sharded (256³ shards of 64³ inner
chunks) — written by zarr-python, read by

- zarr-python with its default codec pipeline,
- zarr-python with zarrs-python's pipeline (``zarrs.ZarrsCodecPipeline``),
- zarr-python with zarrbuf's pipeline (``zarrbuf.ZarrbufCodecPipeline``),
- tensorstore (``zarr3`` driver, ``.read().result()``),
- ``np.asarray(zarrbuf.open(...).read())``.

Every reader's result is first checked against the data written (exactly, bit for bit);
then the readers take turns, round-robin, ``--reps`` times per variant (after one warm-up
round), data in the page cache. The table shows decoded GB/s (median and min–max) and the
ratio of medians to zarrs-python's pipeline; the load average is printed before and after
each variant.

``--store obstore`` opens the arrays for zarr-python through obstore
(``zarr.storage.ObjectStore`` over ``obstore.store.LocalStore``) instead of ``LocalStore``,
and reads with the three pipelines only (zarrbuf's pipeline must take every batch itself:
the run stops if one went to its fallback).

    .venv/bin/python benches/python_read.py [--bytes 268435456] [--reps 7] [--dir target/bench-python]
        [--variants zstd1,...] [--readers zarrbuf-pipeline,zarrs-python,...] [--store local|obstore]

``--variants zstd1,zstd1-32,zstd1-16 --readers zarrbuf-read,tensorstore`` reads the same zstd-1
data at 64³, 32³ and 16³ chunks: what each chunk costs beyond its bytes (the 16³ array has
65,536 chunks of 16 KiB).

The arrays are written once into ``--dir`` (default ``target/bench-python`` of the repository;
the data is the Rust benchmark's: smooth values with xorshift noise in the low bits).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import zarr

import zarrbuf

VARIANTS = ("uncompressed", "zstd1", "blosc-lz4-shuffle", "zstd1-sharded")
# The same zstd-1 data in smaller chunks (per-chunk overhead; not in the default run).
SMALL_CHUNK_VARIANTS = ("zstd1-32", "zstd1-16")
LABELS = {
    "uncompressed": "uncompressed",
    "zstd1": "zstd 1",
    "blosc-lz4-shuffle": "blosc lz4 + shuffle",
    "zstd1-sharded": "zstd 1, sharded 256³/64³",
    "zstd1-32": "zstd 1, 32³ chunks",
    "zstd1-16": "zstd 1, 16³ chunks",
}


def shape_for(nbytes: int) -> tuple[int, int, int]:
    """``variants::shape_for``: about ``nbytes`` of float32, multiples of 256."""
    elements = max(nbytes // 4, 256**3)
    shape = [256, 256, 256]
    k = 2
    while shape[0] * shape[1] * shape[2] * 2 <= elements:
        shape[k] *= 2
        k = (k + 2) % 3
    return tuple(shape)  # type: ignore[return-value]


# --- the data: variants::data, vectorised -----------------------------------------------

_M64 = (1 << 64) - 1


def _xorshift(s: int) -> int:
    s ^= (s << 13) & _M64
    s ^= s >> 7
    s ^= (s << 17) & _M64
    return s


def _map_apply(cols: list[int], s: int) -> int:
    """The GF(2)-linear map with columns ``cols`` (images of the 64 bits) applied to ``s``."""
    v = 0
    for bit in range(64):
        if s >> bit & 1:
            v ^= cols[bit]
    return v


def _tables(cols: list[int]) -> np.ndarray:
    """Byte lookup tables of the map with columns ``cols``: ``tables[j][b]`` is the image
    of byte ``b`` at byte position ``j``."""
    tables = np.zeros((8, 256), dtype=np.uint64)
    for j in range(8):
        for b in range(256):
            tables[j, b] = _map_apply(cols, b << (8 * j))
    return tables


def _apply(tables: np.ndarray, x: np.ndarray) -> np.ndarray:
    out = np.zeros_like(x)
    for j in range(8):
        out ^= tables[j][((x >> np.uint64(8 * j)) & np.uint64(0xFF)).astype(np.intp)]
    return out


def _noise(n: int) -> np.ndarray:
    """The xorshift64 states after 1..n steps from the Rust benchmark's seed."""
    first = 4096
    s = 0x9E37_79B9_7F4A_7C15
    head = []
    for _ in range(min(first, n)):
        s = _xorshift(s)
        head.append(s)
    states = np.array(head, dtype=np.uint64)
    # The map "xorshift applied len(states) times", as the images of the 64 bits.
    jump = [1 << bit for bit in range(64)]
    for _ in range(first):
        jump = [_xorshift(c) for c in jump]
    while len(states) < n:
        # The next len(states) states are the current ones advanced len(states) steps.
        states = np.concatenate([states, _apply(_tables(jump), states)])
        jump = [_map_apply(jump, c) for c in jump]  # twice as far
    return states[:n]


def data(shape: tuple[int, int, int]) -> np.ndarray:
    nz, ny, nx = shape
    noise = (_noise(nz * ny * nx) >> np.uint64(40)).astype(np.float32) / np.float32(1 << 24)
    z = np.arange(nz, dtype=np.float32)[:, None, None]
    y = np.arange(ny, dtype=np.float32)[None, :, None]
    x = np.arange(nx, dtype=np.float32)[None, None, :]
    smooth = (np.sin(z * np.float32(0.05)) + np.cos(y * np.float32(0.03)) + x * np.float32(1e-3)) * np.float32(100.0)
    return (smooth + noise.reshape(shape)).astype(np.float32)


def store_path(root: Path, variant: str, shape: tuple[int, ...]) -> Path:
    return root / f"{variant}-{'x'.join(map(str, shape))}.zarr"


def create(path: Path, variant: str, values: np.ndarray) -> None:
    """Writes ``values`` with zarr-python's own pipeline, as the Rust benchmark's array."""
    zstd = zarr.codecs.ZstdCodec(level=1, checksum=False)
    kwargs: dict = {"chunks": (64, 64, 64), "compressors": None}
    if variant == "zstd1":
        kwargs["compressors"] = zstd
    elif variant == "blosc-lz4-shuffle":
        kwargs["compressors"] = zarr.codecs.BloscCodec(cname="lz4", clevel=5, shuffle="shuffle", typesize=4)
    elif variant == "zstd1-sharded":
        kwargs.update(shards=(256, 256, 256), compressors=zstd)
    elif variant in SMALL_CHUNK_VARIANTS:
        side = int(variant.rsplit("-", 1)[1])
        kwargs.update(chunks=(side, side, side), compressors=zstd)
    with zarr.config.set({"codec_pipeline.path": "zarr.core.codec_pipeline.BatchedCodecPipeline"}):
        z = zarr.create_array(
            zarr.storage.LocalStore(path), shape=values.shape, dtype="float32", fill_value=0.0, zarr_format=3, **kwargs
        )
        z[...] = values


# --- the readers ------------------------------------------------------------------------

PIPELINES = {
    "zarr-python": "zarr.core.codec_pipeline.BatchedCodecPipeline",
    "zarrs-python": "zarrs.ZarrsCodecPipeline",
    "zarrbuf-pipeline": "zarrbuf.ZarrbufCodecPipeline",
}
READERS = ("zarr-python", "zarrs-python", "zarrbuf-pipeline", "tensorstore", "zarrbuf-read")
TITLES = {
    "zarr-python": "zarr-python",
    "zarrs-python": "zarr-python + zarrs-python",
    "zarrbuf-pipeline": "zarr-python + zarrbuf pipeline",
    "tensorstore": "tensorstore",
    "zarrbuf-read": "zarrbuf.open().read()",
}


def open_store(path: Path, kind: str) -> zarr.abc.store.Store:
    if kind == "obstore":
        import obstore.store

        return zarr.storage.ObjectStore(obstore.store.LocalStore(path), read_only=True)
    return zarr.storage.LocalStore(path, read_only=True)


def zarr_reader(path: Path, pipeline: str, store: str = "local") -> Callable[[], np.ndarray]:
    cfg = {"codec_pipeline.path": pipeline}
    with zarr.config.set(cfg):
        z = zarr.open_array(open_store(path, store), mode="r")
    impl = z._async_array.codec_pipeline
    expected = pipeline.rpartition(".")[2]
    got = type(impl).__name__
    if got != expected:
        raise RuntimeError(f"asked for {pipeline}, zarr-python made a {got}")
    if got == "ZarrsCodecPipeline" and getattr(impl, "impl", True) is None:
        raise RuntimeError(f"zarrs-python cannot read {path} through {store}: it would fall back")

    def read() -> np.ndarray:
        with zarr.config.set(cfg):
            out = z[:]
        stats = getattr(impl, "stats", None)
        if stats is not None and stats["fallback"]:
            raise RuntimeError(f"zarrbuf's pipeline sent batches to its fallback: {impl.reasons}")
        return out

    return read


def tensorstore_reader(path: Path) -> Callable[[], np.ndarray]:
    import tensorstore as ts

    t = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": str(path)}}, read=True).result()
    return lambda: t.read().result()


def zarrbuf_reader(path: Path) -> Callable[[], np.ndarray]:
    a = zarrbuf.open(str(path))
    return lambda: np.asarray(a.read())


def make_reader(name: str, path: Path, store: str = "local") -> Callable[[], np.ndarray]:
    if name in PIPELINES:
        return zarr_reader(path, PIPELINES[name], store)
    if name == "tensorstore":
        return tensorstore_reader(path)
    return zarrbuf_reader(path)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bytes", type=int, default=256 << 20)
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--dir", default=str(Path(__file__).resolve().parent.parent / "target" / "bench-python"))
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--readers", default=None, help="default: all; the three pipelines with --store obstore")
    p.add_argument("--store", choices=("local", "obstore"), default="local")
    args = p.parse_args()
    variants = [v for v in args.variants.split(",") if v]
    default_readers = READERS if args.store == "local" else tuple(PIPELINES)
    readers = [r for r in (args.readers or ",".join(default_readers)).split(",") if r]
    for v in variants:
        if v not in VARIANTS + SMALL_CHUNK_VARIANTS:
            p.error(f"unknown variant {v!r} (known: {', '.join(VARIANTS + SMALL_CHUNK_VARIANTS)})")
    for r in readers:
        if r not in READERS:
            p.error(f"unknown reader {r!r} (known: {', '.join(READERS)})")

    shape = shape_for(args.bytes)
    root = Path(args.dir)
    root.mkdir(parents=True, exist_ok=True)
    print(f"generating the data {shape} float32...", flush=True)
    values = data(shape)
    for v in variants:
        path = store_path(root, v, shape)
        if not (path / "zarr.json").exists():
            print(f"writing {path} with zarr-python...", flush=True)
            create(path, v, values)

    nbytes = values.nbytes
    rates: dict[tuple[str, str], list[float]] = {}
    loads: dict[str, tuple[float, float]] = {}
    for v in variants:
        path = store_path(root, v, shape)
        fns = {r: make_reader(r, path, args.store) for r in readers}
        for r, f in fns.items():  # exactness, and the warm-up round
            got = f()
            if got.shape != values.shape or got.dtype != values.dtype or not np.array_equal(
                got.view(np.uint32), values.view(np.uint32)
            ):
                raise SystemExit(f"{TITLES[r]} read {v} wrongly")
            del got
        load_before = os.getloadavg()[0]
        print(f"{v}: every reader's result equals the data written", flush=True)
        for k in range(args.reps):
            # Round-robin, starting with a different reader each round.
            order = readers[k % len(readers) :] + readers[: k % len(readers)]
            for r in order:
                gc.collect()
                t = time.perf_counter()
                out = fns[r]()
                dt = time.perf_counter() - t
                del out
                rates.setdefault((v, r), []).append(nbytes / dt / 1e9)
        del fns
        loads[v] = (load_before, os.getloadavg()[0])
        print(f"{v}: load average {loads[v][0]:.1f} before, {loads[v][1]:.1f} after", flush=True)

    via = "obstore's LocalStore (zarr.storage.ObjectStore)" if args.store == "obstore" else "LocalStore"
    print(
        f"\nWhole-array read (arr[:] into NumPy) of {nbytes / 2**20:.0f} MiB float32 {shape}, 64³ chunks unless the variant says otherwise, "
        f"zarr-python's store: {via}; "
        f"decoded GB/s, median (min–max) of {args.reps} reads per reader, readers round-robin; "
        f"{platform.node()}, {os.cpu_count()} CPUs; load average "
        f"{min(lo for lo, _ in loads.values()):.1f}–{max(max(x) for x in loads.values()):.1f}\n"
    )
    base = "zarrs-python" if "zarrs-python" in readers else readers[0]
    print("| variant | " + " | ".join(TITLES[r] for r in readers) + " |")
    print("|---|" + "---|" * len(readers))
    for v in variants:
        ref = statistics.median(rates[(v, base)])
        cells = []
        for r in readers:
            rs = rates[(v, r)]
            m = statistics.median(rs)
            ratio = "" if r == base else f" **{m / ref:.2f}×**"
            cells.append(f"{m:.2f} ({min(rs):.2f}–{max(rs):.2f}){ratio}")
        print(f"| {LABELS[v]} | " + " | ".join(cells) + " |")
    print(f"\n(ratios: median ÷ {TITLES[base]}'s median)")


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        main()
