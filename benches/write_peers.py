#!/usr/bin/env python3
"""The write benchmark's Python peers: tensorstore and zarr-python writing the same array as
`zarrbuf bench-write` (float32, shape MiB×512×512, 64³ chunks, zarr v3) with the same codecs,
median of REPS writes after a warm-up, each into a fresh store.

    zarrbuf bench-write DIR --mib 256 --reps 5           # writes DIR/data.npy too
    .venv/bin/python benches/write_peers.py DIR --reps 5 [--codecs zstd:1,none] [--shards 256]

The data is DIR/data.npy, the array zarrbuf's benchmark wrote, so every writer compresses the
same bytes. With --shards N, each codec is also written sharded: N³ shards of the 64³ chunks,
the codecs inside the shard (as `zarrbuf bench-write --shards N`). Prints a Markdown table in
GB/s of array data.
"""
import argparse
import shutil
import statistics
import time
from pathlib import Path

import numpy as np
import tensorstore as ts
import zarr
from zarr.codecs import BytesCodec, ZstdCodec


def fresh(path: Path) -> str:
    if path.exists():
        shutil.rmtree(path)
    return str(path)


def ts_codecs(codec: str):
    chain = [{"name": "bytes", "configuration": {"endian": "little"}}]
    if codec.startswith("zstd"):
        chain.append({"name": "zstd", "configuration": {"level": int(codec.split(":")[1]), "checksum": False}})
    elif codec != "none":
        raise SystemExit(f"unsupported codec {codec!r}: zstd:LEVEL or none")
    return chain


def write_tensorstore(path: Path, data: np.ndarray, codec: str, shards: int | None) -> None:
    chunks, codecs = [64, 64, 64], ts_codecs(codec)
    if shards:
        index = [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}]
        codecs = [{"name": "sharding_indexed", "configuration": {"chunk_shape": chunks, "codecs": codecs, "index_codecs": index}}]
        chunks = [shards] * 3
    spec = {
        "driver": "zarr3",
        "kvstore": {"driver": "file", "path": fresh(path)},
        "metadata": {
            "shape": list(data.shape),
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunks}},
            "data_type": "float32",
            "codecs": codecs,
            "fill_value": 0,
        },
        "create": True,
        "delete_existing": True,
    }
    t = ts.open(spec).result()
    t.write(data).result()


def write_zarr_python(path: Path, data: np.ndarray, codec: str, shards: int | None) -> None:
    compressors = None if codec == "none" else ZstdCodec(level=int(codec.split(":")[1]))
    a = zarr.create_array(
        fresh(path),
        shape=data.shape,
        chunks=(64, 64, 64),
        shards=(shards,) * 3 if shards else None,
        dtype="float32",
        serializer=BytesCodec(),
        compressors=compressors,
        fill_value=0.0,
        zarr_format=3,
    )
    a[...] = data


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("dir", type=Path)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--codecs", default="zstd:1,none")
    p.add_argument("--shards", type=int, default=None, help="also write N³ shards of the 64³ chunks")
    args = p.parse_args()
    data = np.load(args.dir / "data.npy")
    nbytes = data.nbytes
    writers = {"tensorstore": write_tensorstore, "zarr-python": write_zarr_python}
    print(f"write peers: float32 {list(data.shape)} ({nbytes} bytes), 64³ chunks, median of {args.reps} writes, GB/s")
    print("| codec | " + " | ".join(writers) + " |")
    print("|---|" + "---|" * len(writers))
    variants = [(c, s) for c in args.codecs.split(",") for s in [None] + ([args.shards] if args.shards else [])]
    for codec, shards in variants:
        rates = {name: [] for name in writers}
        for rep in range(args.reps + 1):
            for name, write in writers.items():
                path = args.dir / f"peer-{name}.zarr"
                fresh(path)
                start = time.perf_counter()
                write(path, data, codec, shards)
                s = time.perf_counter() - start
                if rep > 0:
                    rates[name].append(nbytes / s / 1e9)
        name = f"{codec}, sharded {shards}³/64³" if shards else codec
        print(f"| {name} | " + " | ".join(f"{statistics.median(rates[n]):.3f}" for n in writers) + " |")


if __name__ == "__main__":
    main()
