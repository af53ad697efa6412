"""Chunks that decode to one byte too few or too many (799 or 801 bytes where 800 belong),
uncompressed and under every compressor, in plain and sharded arrays: every route must
refuse them, the small-read route (a subset inside the chunk) included, and check must
report what read refuses."""

from __future__ import annotations

import numpy as np

from case import BOUNDED_DECODE, ERROR, Case
from stores import chunk_path, dense_1d, encode, put, sharded_1d, write_shard

CLS = "wrong-size"


def commands(name: str, store: str):
    c = dict(cls=CLS, fixer=BOUNDED_DECODE, chunk_bytes=800, agree=f"{CLS}/{name}")
    return [
        Case(f"{CLS}/{name}/read", args=["read", store, "--out", "{out}"], expect={ERROR}, **c),
        Case(f"{CLS}/{name}/read-subset", args=["read", store, "--subset", "300:303", "--out", "{out}"], expect={ERROR}, **c),
        Case(f"{CLS}/{name}/check", args=["check", store], expect={ERROR}, kind="check", **c),
    ]


def resized(data: np.ndarray, delta: int) -> bytes:
    raw = data[300:400].tobytes()
    return raw[:delta] if delta < 0 else raw + b"\x07" * delta


def cases(ctx):
    out = []
    plans = [(2, "none"), (3, "none"), (2, "zstd"), (3, "zstd"), (2, "gzip"), (2, "zlib"), (2, "blosc-lz4"), (2, "lz4"), (2, "bz2"), (2, "lzma")]
    for version, compressor in plans:
        for delta in (-1, 1):
            name = f"v{version}-{compressor}-{'short' if delta < 0 else 'long'}"
            root = ctx.store(f"size-{name}")
            data = dense_1d(root, version, compressor)
            put(chunk_path(root, version, 3), encode(compressor, resized(data, delta)))
            out += commands(name, str(root))
    for compressor in (None, "zstd"):
        for delta in (-1, 1):
            name = f"shard-inner-{compressor or 'none'}-{'short' if delta < 0 else 'long'}"
            root = ctx.store(f"size-{name}")
            data, shards = sharded_1d(root, inner_compressor=compressor)
            blobs = list(shards[0])
            blobs[3] = encode(compressor or "none", resized(data, delta))
            write_shard(chunk_path(root, 3, 0), blobs)
            out += commands(name, str(root))
    return out
