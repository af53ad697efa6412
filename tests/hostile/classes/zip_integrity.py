"""Zip files whose bytes lie: a flipped byte in a stored chunk entry (its CRC-32 no longer
matches), a central directory entry pointing at another entry's bytes, a local header naming
another key, and bzip2 and deflate entries whose declared sizes are smaller than what they
inflate to. Read, check and copy must each refuse them (and agree); none may hang."""

from __future__ import annotations

import bz2
import struct
import zipfile
import zlib

from case import ERROR, ZIP_VLEN, Case
from stores import dense_1d, zip_store

CLS = "zip-integrity"


def central_headers(data: bytes) -> dict:
    """The offset of each entry's central directory header, by name."""
    out = {}
    at = data.find(b"PK\x01\x02")
    while at >= 0:
        name_len = struct.unpack_from("<H", data, at + 28)[0]
        out[data[at + 46 : at + 46 + name_len].decode()] = at
        at = data.find(b"PK\x01\x02", at + 46 + name_len)
    return out


def local_offset(data: bytes, name: str) -> int:
    return struct.unpack_from("<I", data, central_headers(data)[name] + 42)[0]


def data_offset(data: bytes, name: str) -> int:
    at = local_offset(data, name)
    n, e = struct.unpack_from("<HH", data, at + 26)
    return at + 30 + n + e


def base_zip(ctx, name: str) -> tuple:
    src = ctx.store(f"zipint-{name}-src")
    data = dense_1d(src, 3, "none")
    path = ctx.store(f"zipint-{name}").with_suffix(".zip")
    zip_store(src, path)
    return path, bytearray(path.read_bytes()), data


def lie_about_size(raw: bytearray, name: str, method: int, payload: bytes, declared: int, crc: int) -> bytes:
    """Rebuilds the zip with entry `name`'s data replaced by `payload` (compressed with
    `method`), both headers declaring `declared` bytes and `crc`."""
    at = local_offset(raw, name)
    start = data_offset(raw, name)
    old_len = struct.unpack_from("<I", raw, at + 18)[0]
    out = bytearray(raw[:start]) + payload + raw[start + old_len :]
    shift = len(payload) - old_len
    # Local header: method, crc, sizes.
    struct.pack_into("<HxxxxIII", out, at + 8, method, crc, len(payload), declared)
    # Central directory: entries after `at` move by `shift`, and so does the directory.
    for key, c in central_headers(out).items():
        off = struct.unpack_from("<I", out, c + 42)[0]
        if off > at:
            struct.pack_into("<I", out, c + 42, off + shift)
        if key == name:
            struct.pack_into("<HxxxxIII", out, c + 10, method, crc, len(payload), declared)
    eocd = out.rfind(b"PK\x05\x06")
    cd = struct.unpack_from("<I", out, eocd + 16)[0]
    struct.pack_into("<I", out, eocd + 16, cd + shift)
    return bytes(out)


def commands(name: str, path, ctx) -> list:
    s = str(path)
    c = dict(cls=CLS, fixer=ZIP_VLEN, chunk_bytes=800, timeout=10, agree=f"{CLS}/{name}")
    return [
        Case(f"{CLS}/{name}/read", args=["read", s, "--out", "{out}"], expect={ERROR}, **c),
        Case(f"{CLS}/{name}/read-subset", args=["read", s, "--subset", "300:303", "--out", "{out}"], expect={ERROR}, **c),
        Case(f"{CLS}/{name}/check", args=["check", s], expect={ERROR}, kind="check", **c),
        Case(f"{CLS}/{name}/copy", args=["copy", s, str(ctx.dst(f"zipint-{name}"))], expect={ERROR}, kind="other", **{**c, "agree": None}),
    ]


def cases(ctx):
    out = []
    # A flipped byte in chunk 3's stored bytes.
    path, raw, _ = base_zip(ctx, "crc")
    raw[data_offset(raw, "c/3") + 5] ^= 0x40
    path.write_bytes(raw)
    out += commands("crc", path, ctx)
    # Chunk 4's central entry points at chunk 3's local header.
    path, raw, _ = base_zip(ctx, "overlap")
    heads = central_headers(raw)
    struct.pack_into("<I", raw, heads["c/4"] + 42, local_offset(raw, "c/3"))
    path.write_bytes(raw)
    out += commands("overlap", path, ctx)
    # Chunk 3's local header names chunk 9.
    path, raw, _ = base_zip(ctx, "local-name")
    at = local_offset(raw, "c/3")
    raw[at + 30 + 2] = ord("9")
    path.write_bytes(raw)
    out += commands("local-name", path, ctx)
    # bzip2 and deflate entries of 16 MiB of zeros declaring the chunk's 800 bytes.
    zeros = bytes(16 << 20)
    for kind, method, payload in (
        ("bzip2-lie", zipfile.ZIP_BZIP2, bz2.compress(zeros, 1)),
        ("deflate-lie", zipfile.ZIP_DEFLATED, zlib.compress(zeros, 1)[2:-4]),
    ):
        path, raw, _ = base_zip(ctx, kind)
        path.write_bytes(lie_about_size(raw, "c/3", method, payload, 800, zlib.crc32(bytes(800))))
        out += commands(kind, path, ctx)
    # A bzip2 entry with bytes after its stream that its compressed size counts.
    path, raw, _ = base_zip(ctx, "bzip2-trailing")
    real = bytes(800)
    payload = bz2.compress(real) + b"\x55" * 300_000
    path.write_bytes(lie_about_size(raw, "c/3", zipfile.ZIP_BZIP2, payload, 800, zlib.crc32(real)))
    out += commands("bzip2-trailing", path, ctx)
    return out
