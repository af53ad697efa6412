#!/usr/bin/env python3
"""Writes the seed corpora under tests/fuzz/corpus/<target>/ from fixtures/data.

Each seed has the input layout its target reads (src/lib.rs):
  metadata       [format byte: 0 = zarr.json, 1 = .zarray] + metadata document
  chunk_decode   [fixture index | flags] + the fixture's first chunk
  shard_index    [fixture index | flags] + 6 subset bytes + a shard
  npy_read       a .npy file
  subset_parser  [ndim] + ndim little-endian u16 lengths + --subset text
  check_walk     [layout] + [0] + a stored chunk, or [layout] + [1] + a store key
  vlen_decode    [layout] + a stored chunk (the shard, for the sharded layout)

Run from anywhere: python3 tests/fuzz/make_corpus.py (stdlib only). The fixture order of
chunk_decode and shard_index must match CHUNK_FIXTURES and SHARD_FIXTURES in src/lib.rs.
"""

import hashlib
import shutil
import struct
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE.parent.parent / "fixtures" / "data"
CORPUS = HERE / "corpus"

# (fixture, chunk 0's key) in CHUNK_FIXTURES order.
CHUNK_FIXTURES = [
    ("v3_uint32_be_zstd_crc32c", "c/0/0"),
    ("ts_v3_gzip_be", "c/0/0"),
    ("ts_v2_blosc", "0.0"),
    ("v3_int32_blosc_lz4", "c/0/0/0"),
    ("ts_v3_transpose_crc32c", "c/0/0"),
    ("v2_i4_be_gzip_F", "0/0"),
    ("v2_u1_blosc_bitshuffle", "0"),
    ("v2_c8_zstd_nested", "0/0"),
    ("v3_shard_end", "c/0/0"),
]

# (fixture, first shard's key, last shard's key or None) in SHARD_FIXTURES order; None as
# the fixture means a synthetic raw array (built below).
SHARD_FIXTURES = [
    ("v3_shard_end", "c/0/0", "c/2/1"),
    ("v3_shard_start", "c/0", "c/3"),
    ("ts_v3_shard_end_gzip", "c/0/0", "c/2/1"),
    ("ts_v3_shard_start_transpose", "c/0/0/0", "c/1/1/1"),
    ("v3_shard_3d_transpose", "c/0/0/0", None),
    (None, "end", None),
    (None, "start", None),
]


def raw_shard(index_at_start: bool, missing: int | None = None) -> bytes:
    """A shard of the raw arrays in src/lib.rs: 2x2 inner chunks of 2x3 uint16 (inner
    chunks little-endian at the end, big-endian at the start), u64 LE index pairs."""
    fmt = ">6H" if index_at_start else "<6H"
    chunks = [struct.pack(fmt, *range(10 * k, 10 * k + 6)) for k in range(4)]
    index_len = 4 * 16
    offset = index_len if index_at_start else 0
    index, body = b"", b""
    for k, c in enumerate(chunks):
        if k == missing:
            index += struct.pack("<QQ", 2**64 - 1, 2**64 - 1)
            continue
        index += struct.pack("<QQ", offset + len(body), len(c))
        body += c
    return index + body if index_at_start else body + index


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli), as zarr's crc32c codec computes it."""
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def with_crc32c(data: bytes) -> bytes:
    return data + struct.pack("<I", crc32c(data))


def zstd_raw_frame(data: bytes) -> bytes:
    """A zstd frame holding `data` in one raw (stored) block: single segment, 1-byte size."""
    assert len(data) < 256
    return struct.pack("<IBB", 0xFD2FB528, 0x20, len(data)) + (1 | (len(data) << 3)).to_bytes(3, "little") + data


def check_walk_chunks() -> list[bytes]:
    """A valid first chunk for each of check_walk's CHECK_LAYOUTS (src/lib.rs), in order."""
    values = struct.pack("<16f", *[i * 0.5 for i in range(16)])  # 4 x 4 float32
    inner = [struct.pack("<4f", *[i + 10 * k for i in range(4)]) for k in range(4)]  # 2 x 2 each
    body, index = b"", b""
    for c in (with_crc32c(zstd_raw_frame(x)) for x in inner):
        index += struct.pack("<QQ", len(body), len(c))
        body += c
    return [
        with_crc32c(zstd_raw_frame(values)),
        values,
        body + with_crc32c(index),
        zlib.compress(values, 1),
    ]


def vlen(items: list[bytes]) -> bytes:
    """numcodecs' vlen encoding: a u32 count, then a u32 length and the bytes of each item."""
    return struct.pack("<I", len(items)) + b"".join(struct.pack("<I", len(x)) + x for x in items)


def vlen_decode_seeds() -> None:
    """vlen_decode: a valid chunk 0 for each of VLEN_LAYOUTS (src/lib.rs), and damaged ones."""
    items = ["", "ab", "\u00df\u2202\U0001F600", "x" * 9]
    utf8 = vlen([s.encode() for s in items])
    binary = vlen([b"\0", b"a\0b", b"", b"\xff\xfe"])
    inner = [vlen([s.encode() for s in items]), vlen([b"q", b"", b"rs", b"\xc3\xa9"])]
    body, index = b"", b""
    for c in inner:
        index += struct.pack("<QQ", len(body), len(c))
        body += c
    shard = body + index
    shard_missing = inner[0] + struct.pack("<QQ", 0, len(inner[0])) + b"\xff" * 16
    valid = [utf8, binary, utf8, binary, zstd_raw_frame(utf8), shard]
    for layout, chunk in enumerate(valid):
        put("vlen_decode", bytes([layout]) + chunk)
    # The malformations, on the plain string layout.
    for bad in [
        utf8[:3],
        struct.pack("<I", 5) + utf8[4:],
        struct.pack("<I", 0xFFFFFFFF) + b"\0" * 6,
        utf8[:-3],
        utf8 + b"tail",
        vlen([b"\xe2\x82"] + [b""] * 3),
    ]:
        put("vlen_decode", bytes([0]) + bad)
    put("vlen_decode", bytes([5]) + shard_missing)


def put(target: str, data: bytes) -> None:
    d = CORPUS / target
    d.mkdir(parents=True, exist_ok=True)
    (d / hashlib.sha1(data).hexdigest()).write_bytes(data)


def main() -> None:
    shutil.rmtree(CORPUS, ignore_errors=True)

    # metadata: every fixture's metadata document.
    for store in sorted(DATA.glob("*.zarr")):
        for p in sorted(store.rglob("zarr.json")):
            if b'"array"' in p.read_bytes():
                put("metadata", b"\x00" + p.read_bytes())
        for p in sorted(store.rglob(".zarray")):
            put("metadata", b"\x01" + p.read_bytes())

    # chunk_decode: each fixture's first chunk as stored, and with "recompute checksums".
    for i, (name, key) in enumerate(CHUNK_FIXTURES):
        chunk = (DATA / f"{name}.zarr" / key).read_bytes()
        put("chunk_decode", bytes([i]) + chunk)
        put("chunk_decode", bytes([i | 0x10]) + chunk)

    # shard_index: first and last shards, a few subsets each.
    subsets = [bytes(6), bytes([0, 255, 0, 255, 0, 255]), bytes([1, 3, 2, 5, 1, 2])]
    for i, (name, first, last) in enumerate(SHARD_FIXTURES):
        if name is None:
            start = first == "start"
            shards = [(0, raw_shard(start)), (0x10, raw_shard(start, missing=1))]
        else:
            shards = [(0, (DATA / f"{name}.zarr" / first).read_bytes())]
            if last:
                shards.append((0x40, (DATA / f"{name}.zarr" / last).read_bytes()))
        for flags, shard in shards:
            for s in subsets:
                put("shard_index", bytes([i | flags]) + s + shard)

    # npy_read: the small .npy files.
    for p in sorted(DATA.glob("*.npy")):
        if p.stat().st_size <= 3000:
            put("npy_read", p.read_bytes())

    # subset_parser: accepted and rejected --subset texts.
    def subset(shape: list[int], text: str) -> bytes:
        return bytes([len(shape)]) + b"".join(struct.pack("<H", n) for n in shape) + text.encode()

    for shape, text in [
        ([100, 20], "0:10,5:20"),
        ([7], ":"),
        ([], ""),
        ([8, 1, 1], "a:b,0:1,0:1"),
        ([4], "0:99"),
        ([5, 5], " 1 : 3 ,:"),
        ([5, 5, 5, 5], "0:5,1:,:4,2:2"),
        ([65535], "0:18446744073709551615"),
        ([3], "2:1"),
        ([3, 3], "0:1"),
    ]:
        put("subset_parser", subset(shape, text))

    # check_walk: each layout's valid first chunk, damaged copies, and chunk keys.
    for i, chunk in enumerate(check_walk_chunks()):
        put("check_walk", bytes([i, 0]) + chunk)
        put("check_walk", bytes([i, 0]) + chunk[: len(chunk) // 2])
        flipped = bytearray(chunk)
        flipped[len(chunk) // 3] ^= 0x40
        put("check_walk", bytes([i, 0]) + bytes(flipped))
        for key in ["c/0/0", "c/1/1", "c/7/0", "c.1.0", "1.1", "9.9", "c/0", "zarr.json", "c/00/1"]:
            put("check_walk", bytes([i, 1]) + key.encode())

    vlen_decode_seeds()


if __name__ == "__main__":
    main()
