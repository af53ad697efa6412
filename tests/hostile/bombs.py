"""Decompression bombs: small payloads that inflate to far more than their chunk holds.

Each builder returns the encoded bytes of one chunk that decodes (validly, checksums and
all) to `size` zero bytes, or whose header claims a size it does not hold. Large ones are
built without compressing `size` bytes where the format allows (zstd RLE blocks, repeated
deflate pieces) and cached on disk, so the suite regenerates in seconds.
"""

from __future__ import annotations

import bz2
import hashlib
import lzma
import struct
import zlib
from pathlib import Path

PIECE = 16 << 20  # bytes of zeros per repeated piece


class Cache:
    """Payloads by name, kept in a directory across runs."""

    def __init__(self, root: Path):
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def get(self, name: str, build) -> bytes:
        path = self.root / f"{name}.bin"
        if path.exists():
            return path.read_bytes()
        data = build()
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(data)
        tmp.rename(path)
        return data


# ---- zstd: frames of RLE blocks, written by hand -------------------------------------------

ZSTD_MAGIC = struct.pack("<I", 0xFD2FB528)
ZSTD_BLOCK = 128 << 10


def zstd_frame(size: int, content_size: int | None) -> bytes:
    """A zstd frame of `size` zero bytes as RLE blocks; the frame header declares
    `content_size` (8-byte field) or no content size at all (None)."""
    if content_size is None:
        header = bytes([0x00, 7 << 3])  # no content size, 128 KiB window
    else:
        header = bytes([0xC0, 7 << 3]) + struct.pack("<Q", content_size)
    blocks = []
    left = size
    while left > 0:
        n = min(left, ZSTD_BLOCK)
        left -= n
        last = 1 if left == 0 else 0
        blocks.append(struct.pack("<I", (n << 3) | (1 << 1) | last)[:3] + b"\x00")
    if not blocks:
        blocks.append(struct.pack("<I", 1)[:3])  # one empty raw last block
    return ZSTD_MAGIC + header + b"".join(blocks)


# ---- deflate: one self-contained piece repeated ---------------------------------------------


def _deflate_pieces(size: int) -> tuple[bytes, bytes, int]:
    """(raw deflate of PIECE zeros ending in a full flush, the final empty block, count)."""
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    piece = c.compress(bytes(PIECE)) + c.flush(zlib.Z_FULL_FLUSH)
    tail = c.flush(zlib.Z_FINISH)
    return piece, tail, size // PIECE


def _zero_checksums(size: int) -> tuple[int, int]:
    zeros = bytes(PIECE)
    a, c = 1, 0
    for _ in range(size // PIECE):
        a = zlib.adler32(zeros, a)
        c = zlib.crc32(zeros, c)
    return a, c


def zlib_stream(size: int) -> bytes:
    piece, tail, count = _deflate_pieces(size)
    adler, _ = _zero_checksums(size)
    return b"\x78\xda" + piece * count + tail + struct.pack(">I", adler)


def gzip_stream(size: int) -> bytes:
    piece, tail, count = _deflate_pieces(size)
    _, crc = _zero_checksums(size)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"
    return header + piece * count + tail + struct.pack("<II", crc, size & 0xFFFFFFFF)


def deflate_pieces(size: int):
    """`size` zeros as pieces to stream into a deflated zip entry."""
    zeros = bytes(PIECE)
    for _ in range(size // PIECE):
        yield zeros


# ---- codecs that must compress the zeros ----------------------------------------------------


def bz2_stream(size: int) -> bytes:
    c = bz2.BZ2Compressor(9)
    zeros = bytes(PIECE)
    out = [c.compress(zeros) for _ in range(size // PIECE)]
    return b"".join(out) + c.flush()


def lzma_stream(size: int) -> bytes:
    """numcodecs' LZMA default: the .xz format."""
    c = lzma.LZMACompressor(format=lzma.FORMAT_XZ, preset=0)
    zeros = bytes(PIECE)
    out = [c.compress(zeros) for _ in range(size // PIECE)]
    return b"".join(out) + c.flush()


def lz4_block(size: int) -> bytes:
    """numcodecs' LZ4: a 4-byte little-endian decoded size, then one LZ4 block."""
    import numcodecs
    import numpy as np

    return bytes(numcodecs.LZ4().encode(np.zeros(size, dtype="u1")))


def lz4_claim(claimed: int, real: bytes) -> bytes:
    """An LZ4 chunk whose size header claims `claimed` bytes over `real`'s block."""
    return struct.pack("<i", claimed) + real[4:]


def blosc_frame(size: int, cname: str) -> bytes:
    import numcodecs
    import numpy as np

    codec = numcodecs.Blosc(cname=cname, clevel=5, shuffle=0)
    return bytes(codec.encode(np.zeros(size, dtype="u1")))


def blosc_claim(claimed: int, real: bytes) -> bytes:
    """A blosc frame whose header claims `claimed` decoded bytes."""
    return real[:4] + struct.pack("<I", claimed) + real[8:]


def cached(cache: Cache, kind: str, size: int) -> bytes:
    """A cached bomb of `kind` inflating to `size` bytes."""
    builders = {
        "zstd-size": lambda: zstd_frame(size, size),
        "zstd-nosize": lambda: zstd_frame(size, None),
        "gzip": lambda: gzip_stream(size),
        "zlib": lambda: zlib_stream(size),
        "bz2": lambda: bz2_stream(size),
        "lzma": lambda: lzma_stream(size),
        "lz4": lambda: lz4_block(size),
        "blosc-lz4": lambda: blosc_frame(size, "lz4"),
        "blosc-zstd": lambda: blosc_frame(size, "zstd"),
        "blosc-zlib": lambda: blosc_frame(size, "zlib"),
    }
    tag = hashlib.sha256(f"{kind}:{size}:1".encode()).hexdigest()[:12]
    return cache.get(f"{kind}-{size >> 20}MiB-{tag}", builders[kind])
