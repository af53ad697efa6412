"""Variable-length (string) chunks that lie: bytes after the last value, a last value cut
short, a count the chunk does not hold, and a 100-byte zstd chunk whose values are followed
by 1 GiB of zeros. Read and check must refuse each (and agree), within the memory bound,
without a panic: a read under `--memory 100MiB` stops at 100 MiB; check, which has no
memory option, may decode the chunk as far as the memory the process may take."""

from __future__ import annotations

import struct

import numpy as np

from bombs import cached
from case import ERROR, ZIP_VLEN, Case
from stores import put, write_json

CLS = "strings"
N, CHUNK = 40, 10


def string_array(root, zstd: bool) -> np.ndarray:
    """A v3 `string` array of 40 values in chunks of 10 (vlen-utf8, optionally zstd)."""
    codecs = [{"name": "vlen-utf8"}]
    if zstd:
        codecs.append({"name": "zstd", "configuration": {"level": 1, "checksum": False}})
    write_json(
        root / "zarr.json",
        {
            "zarr_format": 3,
            "node_type": "array",
            "shape": [N],
            "data_type": "string",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [CHUNK]}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
            "fill_value": "",
            "codecs": codecs,
            "attributes": {},
        },
    )
    values = np.array([f"value {i}" for i in range(N)], dtype=object)
    for i in range(N // CHUNK):
        put(root / "c" / str(i), vlen(values[i * CHUNK : (i + 1) * CHUNK]))
    return values


def vlen(values) -> bytes:
    """numcodecs' VLenUTF8 layout: a count, then each value's length and bytes."""
    out = struct.pack("<I", len(values))
    for v in values:
        b = v.encode()
        out += struct.pack("<I", len(b)) + b
    return out


def commands(name, root, extra=(), chunk_bytes=200, check_chunk_bytes=200, check_timeout=10):
    """A read (with `extra` arguments, its largest legitimate chunk `chunk_bytes`) and a
    check (which has no memory option: a chunk may decode to what the process may take,
    `check_chunk_bytes`)."""
    s = str(root)
    c = dict(cls=CLS, fixer=ZIP_VLEN, agree=f"{CLS}/{name}")
    return [
        Case(f"{CLS}/{name}/read", args=["read", s, *extra], expect={ERROR}, chunk_bytes=chunk_bytes, timeout=10, **c),
        Case(
            f"{CLS}/{name}/check",
            args=["check", s],
            expect={ERROR},
            kind="check",
            chunk_bytes=check_chunk_bytes,
            timeout=check_timeout,
            **c,
        ),
    ]


def cases(ctx):
    out = []
    damage = {
        "trailing-bytes": lambda b: b + b"\x00\x00\x00",
        "cut-last-value": lambda b: b[:-2],
        "count-too-large": lambda b: struct.pack("<I", CHUNK + 1) + b[4:],
    }
    for name, spoil in damage.items():
        root = ctx.store(f"strings-{name}")
        values = string_array(root, zstd=False)
        put(root / "c" / "2", spoil(vlen(values[20:30])))
        out += commands(name, root)
    # Chunk 2: its ten values, then 1 GiB of zeros, as two zstd frames (the second of RLE
    # blocks). Under --memory 100MiB the read stops at the limit.
    import numcodecs

    root = ctx.store("strings-zstd-trailing-bomb")
    values = string_array(root, zstd=True)
    zstd = numcodecs.Zstd(level=1)
    for i in range(N // CHUNK):
        put(root / "c" / str(i), bytes(zstd.encode(vlen(values[i * CHUNK : (i + 1) * CHUNK]))))
    bomb = bytes(zstd.encode(vlen(values[20:30]))) + cached(ctx.cache, "zstd-nosize", ctx.bomb)
    put(root / "c" / "2", bomb)
    out += commands(
        "zstd-trailing-bomb", root, extra=["--memory", "100MiB"], chunk_bytes=100 << 20, check_chunk_bytes=ctx.bomb,
        check_timeout=60,
    )
    return out
