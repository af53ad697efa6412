"""Decompression bombs: one chunk of a 1000-element float64 array (chunks of 100, 800
bytes) replaced by a payload that inflates to `ctx.bomb` bytes, for every codec zarrbuf
reads; headers that claim huge sizes; an inner chunk of a shard; deflated zip entries."""

from __future__ import annotations

import shutil
import struct
import zipfile

import numpy as np

import bombs
from case import BOUNDED_DECODE, CORRECT, ERROR, Case
from stores import chunk_path, dense_1d, put, sharded_1d, write_shard, zip_store

CLS = "bombs"
CHUNK = 800  # decoded bytes of one chunk


def commands(ctx, name: str, store: str, data: np.ndarray, async_ok=True, bench=False):
    """The routes a damaged chunk 3 must be refused on, and a read beside it that must work."""
    c = dict(cls=CLS, fixer=BOUNDED_DECODE, chunk_bytes=CHUNK)
    out = [
        Case(f"{CLS}/{name}/read", args=["read", store, "--out", "{out}"], expect={ERROR}, **c),
        Case(f"{CLS}/{name}/read-subset", args=["read", store, "--subset", "300:303", "--out", "{out}"], expect={ERROR}, **c),
        Case(f"{CLS}/{name}/read-beside", args=["read", store, "--subset", "0:10", "--out", "{out}"], expect={CORRECT}, data=data[0:10], **c),
        Case(f"{CLS}/{name}/check", args=["check", store], expect={ERROR}, kind="check", **c),
        Case(f"{CLS}/{name}/copy", args=["copy", store, str(ctx.dst(f"bomb-{name}"))], expect={ERROR}, **c),
    ]
    if async_ok:
        out.append(Case(f"{CLS}/{name}/read-async", args=["read", store, "--async", "--out", "{out}"], expect={ERROR}, **c))
    if bench:
        out.append(Case(f"{CLS}/{name}/bench-direct", args=["bench", store, "--direct", "--reps", "1"], expect={ERROR}, **c))
        out.append(Case(f"{CLS}/{name}/bench-staged", args=["bench", store, "--staged", "--reps", "1"], expect={ERROR}, **c))
    return out


def cases(ctx):
    size = ctx.bomb
    out = []
    # Every v2 compressor, each chunk 3 inflating to `size` bytes.
    kinds = {
        "zstd-size": "zstd",
        "zstd-nosize": "zstd",
        "gzip": "gzip",
        "zlib": "zlib",
        "bz2": "bz2",
        "lzma": "lzma",
        "lz4": "lz4",
        "blosc-lz4": "blosc-lz4",
        "blosc-zstd": "blosc-zstd",
        "blosc-zlib": "blosc-zlib",
    }
    for kind, compressor in kinds.items():
        root = ctx.store(f"bomb-v2-{kind}")
        data = dense_1d(root, 2, compressor)
        put(chunk_path(root, 2, 3), bombs.cached(ctx.cache, kind, size))
        out += commands(ctx, f"v2-{kind}", str(root), data, bench=kind in ("zstd-nosize", "gzip", "bz2"))
    # v3 chains (zarrs' own zstd and gzip codecs).
    for kind, compressor in {"zstd-nosize": "zstd", "gzip": "gzip", "blosc-lz4": "blosc-lz4"}.items():
        root = ctx.store(f"bomb-v3-{kind}")
        data = dense_1d(root, 3, compressor)
        put(chunk_path(root, 3, 3), bombs.cached(ctx.cache, kind, size))
        out += commands(ctx, f"v3-{kind}", str(root), data, bench=kind == "zstd-nosize")
    # Headers that claim what the data does not hold.
    claims = {
        # zstd: the frame says 1 TiB, the blocks hold 800 bytes.
        "zstd-claims-1tib": ("zstd", bombs.zstd_frame(CHUNK, 1 << 40)),
        # zstd: the frame says 800 bytes, the blocks hold `size`.
        "zstd-lies-small": ("zstd", bombs.zstd_frame(size, CHUNK)),
        # lz4: the size header says 2 GiB over an 800-byte block.
        "lz4-claims-2gib": ("lz4", None),
        # blosc: nbytes says 2 GiB over a frame of 800 bytes.
        "blosc-claims-2gib": ("blosc-lz4", None),
    }
    for name, (compressor, payload) in claims.items():
        root = ctx.store(f"bomb-claim-{name}")
        data = dense_1d(root, 2, compressor)
        real = chunk_path(root, 2, 3).read_bytes()
        if name.startswith("lz4"):
            payload = bombs.lz4_claim(0x7FFFFFFF, real)
        elif name.startswith("blosc"):
            payload = bombs.blosc_claim(0x7FFFFF00, real)
        put(chunk_path(root, 2, 3), payload)
        out += commands(ctx, f"claim-{name}", str(root), data)
    # An inner chunk of a shard (zstd inside sharding_indexed).
    root = ctx.store("bomb-shard-inner")
    data, shards = sharded_1d(root, inner_compressor="zstd")
    blobs = list(shards[0])
    blobs[3] = bombs.cached(ctx.cache, "zstd-nosize", size)
    write_shard(chunk_path(root, 3, 0), blobs)
    out += commands(ctx, "shard-inner-zstd", str(root), data)
    # Zip stores: chunk c/3 a deflated entry inflating to `size` bytes; and the same with
    # the zip's headers saying 800 bytes.
    src = ctx.store("bomb-zip-src")
    data = dense_1d(src, 3, "none")
    chunk_path(src, 3, 3).unlink()
    cached_zip = ctx.cache.root / f"zip-entry-{size >> 20}MiB-1.zip"
    if not cached_zip.exists():
        tmp = cached_zip.with_suffix(".tmp")
        zip_store(src, tmp, big={"c/3": bombs.deflate_pieces(size)})
        tmp.rename(cached_zip)
    for lying in (False, True):
        name = "zip-entry-lies" if lying else "zip-entry"
        z = ctx.work / "stores" / f"bomb-{name}.zip"
        shutil.copyfile(cached_zip, z)
        if lying:
            patch_zip_sizes(z, "c/3", CHUNK)
        out += commands(ctx, name, str(z), data, async_ok=False)
    return out


def patch_zip_sizes(path, name: str, size: int) -> None:
    """Rewrites entry `name`'s uncompressed size in the zip's local and central headers (and
    its zip64 extra fields) to `size`."""
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo(name)
    raw = bytearray(path.read_bytes())
    enc = name.encode()

    def patch_extra(start: int, length: int, offsets):
        end = start + length
        while start + 4 <= end:
            tag, n = struct.unpack_from("<HH", raw, start)
            if tag == 1:
                for k in offsets:
                    if start + 4 + 8 * (k + 1) <= start + 4 + n:
                        struct.pack_into("<Q", raw, start + 4 + 8 * k, size)
            start += 4 + n

    lh = info.header_offset
    assert raw[lh : lh + 4] == b"PK\x03\x04"
    if struct.unpack_from("<I", raw, lh + 22)[0] != 0xFFFFFFFF:
        struct.pack_into("<I", raw, lh + 22, size)
    nlen, xlen = struct.unpack_from("<HH", raw, lh + 26)
    patch_extra(lh + 30 + nlen, xlen, [0])
    pos = raw.find(b"PK\x01\x02")
    while pos != -1:
        nlen, xlen, clen = struct.unpack_from("<HHH", raw, pos + 28)
        if bytes(raw[pos + 46 : pos + 46 + nlen]) == enc:
            if struct.unpack_from("<I", raw, pos + 24)[0] != 0xFFFFFFFF:
                struct.pack_into("<I", raw, pos + 24, size)
            patch_extra(pos + 46 + nlen, xlen, [0])
        pos = raw.find(b"PK\x01\x02", pos + 4)
    path.write_bytes(bytes(raw))
