"""Random patches, one read at a time, as a training loop's data loader reads them: reads per
second of every reader over the same patches, epoch 1 (cold) and epoch 2 (warm caches).

A float32 array of ``--mib`` MiB (``mib × 512 × 512``; 256 by default), 64³ chunks, written
twice: plain and sharded (256³ shards of 64³ inner chunks). ``--codec`` picks the codec:
``zstd1`` (zstd level 1, the default) or ``blosc-lz4`` (blosc with lz4, clevel 5, byte
shuffle, typesize 4, blocksize 0 so that c-blosc picks it: zarr v3's
``BloscCodec(cname="lz4", clevel=5, shuffle="shuffle", typesize=4)``, as in
``benches/python_read.py``); each codec's arrays have names of their own. ``--reads``
random 1×64×64 patches (seeded, origins anywhere, so most patches touch 2-4 chunks) are read
one at a time, in one order in epoch 1 and in another in epoch 2, by

- ``zarrbuf.open(...).read(...)``, without a cache and (when ``zarrbuf.open`` takes
  ``cache_bytes``) with a 1 GiB decoded-chunk cache, and (when it takes ``prefix_decode``)
  without a cache, decoding every chunk whole (``prefix_decode=False``; the default decodes
  only the part of each chunk a patch needs: a zstd chunk up to its last element, a blosc
  chunk the blocks that hold its elements),
- tensorstore (``zarr3`` driver) without a cache and with a 1 GiB ``cache_pool``
  (``recheck_cached_data: False``, so that epoch 2 reads from it),
- zarr-python through zarrbuf's codec pipeline (also with
  ``codec_pipeline.zarrbuf_prefix_decode`` set False, when the pipeline has it) and through
  zarrs-python's.

Each reader opens the array once and reads both epochs. The table gives reads/s, the ratio
to tensorstore with the same caching (a cached reader against tensorstore's ``cache_pool``,
the others against tensorstore without a cache) and the median latency of one read.
``--rounds N`` runs everything N times, readers taking turns, and reports the medians.
Then a torch DataLoader over ``zarrbuf.torch.ZarrDataset`` (map-style, batches of
``--batch``) and over ``ZarrIterableDataset`` (prefetching) reads the same patches from the
plain array: batches/s.

    .venv/bin/python benches/loader.py [--dir DIR] [--mib 256] [--codec zstd1|blosc-lz4]
        [--reads 300] [--rounds 1] [--skip NAME] [--no-loader] [--json]
"""

from __future__ import annotations

import argparse
import inspect
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import zarr
import zarrbuf

GIB = 2**30
CHUNK, SHARD, PLANE = 64, 256, 512
PATCH = (1, 64, 64)
# --codec: (compressor, label, suffix of the arrays' directory names)
CODECS = {
    "zstd1": (lambda: zarr.codecs.ZstdCodec(level=1), "zstd 1", ""),
    "blosc-lz4": (
        lambda: zarr.codecs.BloscCodec(cname="lz4", clevel=5, shuffle="shuffle", typesize=4),
        "blosc lz4 + shuffle",
        "-blosc-lz4",
    ),
}


def make(path: Path, depth: int, sharded: bool, codec: str) -> None:
    marker = path / ".complete"
    if marker.exists():
        return
    kind = "sharded 256³/64³" if sharded else "plain 64³"
    compressor, label, _ = CODECS[codec]
    print(f"writing {path} ({depth * 512 * 512 * 4 / 2**20:.0f} MiB float32, {label}, {kind})",
          file=sys.stderr, flush=True)
    z = zarr.create_array(
        path,
        shape=(depth, PLANE, PLANE),
        chunks=(CHUNK,) * 3,
        shards=(SHARD,) * 3 if sharded else None,
        dtype="f4",
        compressors=compressor(),
        overwrite=True,
    )
    del z
    a = zarrbuf.open(str(path))
    rng = np.random.default_rng(0)
    step = SHARD if sharded else CHUNK
    for d in range(0, depth, step):
        n = min(step, depth - d)
        # Smooth values plus noise in the low bits: compresses, but not to nothing.
        base = np.sin(np.arange(d, d + n, dtype="f4") / 7.0)[:, None, None]
        plane = np.cos(np.arange(PLANE, dtype="f4") / 31.0)
        noise = rng.standard_normal((n, PLANE, PLANE), dtype="f4") * 1e-3
        a.write((slice(d, d + n), ...), (base * plane[None, :, None] + noise).astype("f4"))
    marker.touch()


def patches(depth: int, reads: int, seed: int) -> list[tuple[slice, ...]]:
    rng = np.random.default_rng(seed)
    high = np.array([depth, PLANE, PLANE]) - np.array(PATCH) + 1
    origins = rng.integers(0, high, size=(reads, 3))
    return [tuple(slice(int(o), int(o) + p) for o, p in zip(row, PATCH, strict=True))
            for row in origins]


# --- readers: each `open(path)` returns read(selection) -> numpy array -----------------------

def zarrbuf_open(cache_bytes: int | None, **kw) -> Callable[[str], Callable]:
    def open_(path: str) -> Callable:
        a = zarrbuf.open(path, **kw) if cache_bytes is None else zarrbuf.open(path, cache_bytes=cache_bytes)
        return lambda sel: np.asarray(a.read(sel))
    return open_


def tensorstore_open(cache: bool) -> Callable[[str], Callable]:
    import tensorstore as ts

    def open_(path: str) -> Callable:
        spec: dict = {"driver": "zarr3", "kvstore": {"driver": "file", "path": path}}
        ctx = None
        if cache:
            spec["recheck_cached_data"] = False
            ctx = ts.Context({"cache_pool": {"total_bytes_limit": GIB}})
        t = ts.open(spec, read=True, context=ctx).result()
        return lambda sel: t[sel].read().result()
    return open_


def zarr_open(pipeline: str, read_config: dict | None = None) -> Callable[[str], Callable]:
    def open_(path: str) -> Callable:
        with zarr.config.set({"codec_pipeline.path": pipeline}):
            z = zarr.open_array(path, mode="r")
        # zarr-python reads the configuration when the array is opened (its pipeline);
        # `read_config` is read by the pipeline at each read: set while this reader reads
        # (until its `close`).
        if read_config is None:
            return lambda sel: z[sel]
        return _WithConfig(lambda sel: z[sel], read_config)
    return open_


class _WithConfig:
    """A reader whose reads see `config`, from its opening until `close()`."""

    def __init__(self, read: Callable, config: dict) -> None:
        self._read = read
        self._set = zarr.config.set(config)  # applied now, undone by close()

    def __call__(self, sel: tuple[slice, ...]):
        return self._read(sel)

    def close(self) -> None:
        self._set.__exit__(None, None, None)


def readers(skip: set[str]) -> dict[str, tuple[Callable, bool]]:
    """name -> (open, cached)."""
    out: dict[str, tuple[Callable, bool]] = {"zarrbuf.open": (zarrbuf_open(None), False)}
    if "cache_bytes" in inspect.signature(zarrbuf.open).parameters:
        out["zarrbuf.open, cache_bytes=1 GiB"] = (zarrbuf_open(GIB), True)
    else:
        print("zarrbuf.open takes no cache_bytes here: its cached row is left out", file=sys.stderr)
    if "prefix_decode" in inspect.signature(zarrbuf.open).parameters:
        # Prefix decoding is the default: this row decodes every chunk whole.
        out["zarrbuf.open, prefix_decode=False"] = (zarrbuf_open(None, prefix_decode=False), False)
    try:
        import tensorstore  # noqa: F401

        out["tensorstore"] = (tensorstore_open(False), False)
        out["tensorstore, cache_pool 1 GiB"] = (tensorstore_open(True), True)
    except ImportError:
        print("no tensorstore: its rows and the ratios are left out", file=sys.stderr)
    out["zarr-python + zarrbuf pipeline"] = (zarr_open("zarrbuf.ZarrbufCodecPipeline"), False)
    from zarrbuf import pipeline as zpipeline

    if hasattr(zpipeline, "PREFIX_DECODE_CONFIG_KEY"):
        out["zarr-python + zarrbuf pipeline, prefix_decode off"] = (
            zarr_open("zarrbuf.ZarrbufCodecPipeline", {zpipeline.PREFIX_DECODE_CONFIG_KEY: False}),
            False,
        )
    try:
        import zarrs  # noqa: F401

        out["zarr-python + zarrs-python pipeline"] = (zarr_open("zarrs.ZarrsCodecPipeline"), False)
    except ImportError:
        print("no zarrs-python: its row is left out", file=sys.stderr)
    return {k: v for k, v in out.items() if not any(s in k for s in skip)}


def one_epoch(read: Callable, sels: list[tuple[slice, ...]], check: dict | None) -> tuple[float, float]:
    """(reads/s, median latency in ms); `check` maps a few selections to their values."""
    lat = []
    t0 = time.perf_counter()
    for sel in sels:
        t = time.perf_counter()
        x = read(sel)
        lat.append(time.perf_counter() - t)
        if check is not None and sel in check and not np.array_equal(np.asarray(x), check[sel]):
            raise SystemExit(f"wrong values at {sel}")
    return len(sels) / (time.perf_counter() - t0), statistics.median(lat) * 1e3


def loader_rates(path: str, depth: int, sels: list, batch: int, cache: bool) -> dict[str, float]:
    """batches/s of a torch DataLoader over the patches: map-style and iterable, 2 epochs."""
    import torch
    import zarrbuf.torch as zt

    origins = np.array([[s.start for s in sel] for sel in sels])
    sampler = zt.PatchSampler((depth, PLANE, PLANE), PATCH, origins=origins, seed=1)
    kw = {"cache_bytes": GIB} if cache else {}
    out = {}
    ds = zt.ZarrDataset(path, PATCH, sampler, **kw)
    loader = torch.utils.data.DataLoader(ds, batch_size=batch, sampler=sampler)
    it = zt.ZarrIterableDataset(path, PATCH, sampler, batch_size=batch, prefetch=8, **kw)
    for name, dl, epoch_of in [
        ("DataLoader(ZarrDataset), num_workers=0", loader, sampler.set_epoch),
        ("DataLoader(ZarrIterableDataset, prefetch 8), num_workers=0",
         torch.utils.data.DataLoader(it, batch_size=None), it.set_epoch),
    ]:
        for epoch in (1, 2):
            epoch_of(epoch)
            t0 = time.perf_counter()
            n = sum(1 for b in dl if b.shape[1:] == PATCH)
            out[f"{name}, epoch {epoch}"] = n / (time.perf_counter() - t0)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dir", help="where the arrays are (written once; default: a temp dir)")
    p.add_argument("--mib", type=int, default=256, help="array size in MiB (mib × 512 × 512 float32)")
    p.add_argument("--codec", choices=sorted(CODECS), default="zstd1",
                   help="zstd1: zstd level 1 (default); blosc-lz4: blosc lz4, clevel 5, byte shuffle")
    p.add_argument("--reads", type=int, default=300, help="patches per epoch")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rounds", type=int, default=1, help="runs of every reader (medians reported)")
    p.add_argument("--batch", type=int, default=32, help="DataLoader batch size")
    p.add_argument("--skip", action="append", default=[], help="leave out readers whose name contains this")
    p.add_argument("--no-loader", action="store_true", help="leave out the DataLoader timing")
    p.add_argument("--json", action="store_true", help="print JSON instead of the tables")
    args = p.parse_args()

    tmp = None
    if args.dir:
        root = Path(args.dir)
        root.mkdir(parents=True, exist_ok=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="zarrbuf-loader-")
        root = Path(tmp.name)
    depth = args.mib
    suffix = CODECS[args.codec][2]
    arrays = {"plain": root / f"plain-{depth}{suffix}.zarr", "sharded": root / f"sharded-{depth}{suffix}.zarr"}
    for name, path in arrays.items():
        make(path, depth, name == "sharded", args.codec)

    sels = patches(depth, args.reads, args.seed)
    order2 = np.random.default_rng(args.seed + 1).permutation(len(sels))
    epochs = {1: sels, 2: [sels[i] for i in order2]}
    rs = readers(set(args.skip))
    rates: dict[tuple[str, str, int], list[float]] = {}
    lats: dict[tuple[str, str, int], list[float]] = {}
    for _ in range(args.rounds):
        for array, path in arrays.items():
            ref = zarrbuf.open(str(path))
            check = {s: np.asarray(ref.read(s)) for s in sels[:: max(1, len(sels) // 10)]}
            for name, (open_, _cached) in rs.items():
                read = open_(str(path))
                for epoch, order in epochs.items():
                    r, lat = one_epoch(read, order, check)
                    rates.setdefault((name, array, epoch), []).append(r)
                    lats.setdefault((name, array, epoch), []).append(lat)
                getattr(read, "close", lambda: None)()
                del read

    rows = []
    for (name, array, epoch), rr in rates.items():
        cached = rs[name][1]
        base = rates.get(("tensorstore, cache_pool 1 GiB" if cached else "tensorstore", array, epoch))
        rate = statistics.median(rr)
        rows.append({
            "reader": name, "array": array, "epoch": epoch, "reads_per_s": rate,
            "median_latency_ms": statistics.median(lats[(name, array, epoch)]),
            "ratio_to_tensorstore": rate / statistics.median(base) if base else None,
        })
    loader = {}
    if not args.no_loader:
        try:
            loader = loader_rates(str(arrays["plain"]), depth, sels, args.batch,
                                  "cache_bytes" in inspect.signature(zarrbuf.open).parameters)
        except ImportError as e:
            print(f"no torch ({e}): the DataLoader timing is left out", file=sys.stderr)
    result = {
        "mib": args.mib, "codec": args.codec, "reads": args.reads, "seed": args.seed, "rounds": args.rounds,
        "patch": PATCH, "batch": args.batch, "rows": rows, "dataloader_batches_per_s": loader,
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"{args.mib} MiB float32, {CODECS[args.codec][1]}, 64³ chunks (sharded: 256³ shards); {args.reads} "
              f"random {'×'.join(map(str, PATCH))} patches, one read at a time; median of "
              f"{args.rounds} round(s)\n")
        print("| reader | array | epoch | reads/s | × tensorstore | median latency (ms) |")
        print("|---|---|---|---|---|---|")
        for r in sorted(rows, key=lambda r: (r["array"], r["epoch"])):
            ratio = f"{r['ratio_to_tensorstore']:.2f}×" if r["ratio_to_tensorstore"] else "—"
            print(f"| {r['reader']} | {r['array']} | {r['epoch']} | {r['reads_per_s']:,.0f} | "
                  f"{ratio} | {r['median_latency_ms']:.2f} |")
        if loader:
            cached = ", cache_bytes=1 GiB" if "cache_bytes" in inspect.signature(zarrbuf.open).parameters else ""
            print(f"\ntorch DataLoader, plain array, batches of {args.batch} of the same patches"
                  f"{cached}:\n")
            print("| loader | batches/s | patches/s |")
            print("|---|---|---|")
            for k, v in loader.items():
                print(f"| {k} | {v:,.1f} | {v * args.batch:,.0f} |")
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
