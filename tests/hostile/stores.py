"""Writing zarr stores byte by byte: metadata, chunks, shards, zip files.

The suite writes its stores itself (no zarr-python) so that every byte of a hostile store is
the one the case means: metadata that zarr-python would refuse to write, chunks that decode
to the wrong size, shard indexes that lie. Chunks are encoded with numcodecs, the codecs
zarr-python itself uses.
"""

from __future__ import annotations

import json
import os
import struct
import zipfile
from pathlib import Path

import crc32c
import numpy as np

#: A v3 codec entry per compressor name; the numcodecs codec that encodes it.
V3_COMPRESSORS = {
    "zstd": {"name": "zstd", "configuration": {"level": 1, "checksum": False}},
    "gzip": {"name": "gzip", "configuration": {"level": 1}},
    "blosc-lz4": {
        "name": "blosc",
        "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "noshuffle", "typesize": 8, "blocksize": 0},
    },
}

#: A v2 compressor entry per name.
V2_COMPRESSORS = {
    "none": None,
    "zstd": {"id": "zstd", "level": 1},
    "gzip": {"id": "gzip", "level": 1},
    "zlib": {"id": "zlib", "level": 1},
    "bz2": {"id": "bz2", "level": 1},
    "lzma": {"id": "lzma", "format": 1, "check": -1, "preset": None, "filters": None},
    "lz4": {"id": "lz4", "acceleration": 1},
    "blosc-lz4": {"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 0, "blocksize": 0},
    "blosc-zstd": {"id": "blosc", "cname": "zstd", "clevel": 5, "shuffle": 0, "blocksize": 0},
    "blosc-zlib": {"id": "blosc", "cname": "zlib", "clevel": 5, "shuffle": 0, "blocksize": 0},
}


def numcodec(name: str):
    """The numcodecs codec that writes `name`'s chunks (None for uncompressed)."""
    import numcodecs

    spec = V2_COMPRESSORS[name]
    return None if spec is None else numcodecs.get_codec(dict(spec))


def encode(name: str, raw: bytes) -> bytes:
    """`raw` compressed as `name` writes it."""
    codec = numcodec(name)
    return raw if codec is None else bytes(codec.encode(raw))


def write_json(path: Path, doc) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1))


def v2_array(root: Path, shape, chunks, dtype="<f8", compressor="none", fill=0.0, sep=".") -> Path:
    """Writes a v2 `.zarray` (no chunks) and returns the array's directory."""
    write_json(
        root / ".zarray",
        {
            "zarr_format": 2,
            "shape": list(shape),
            "chunks": list(chunks),
            "dtype": dtype,
            "compressor": V2_COMPRESSORS[compressor] if isinstance(compressor, str) else compressor,
            "fill_value": fill,
            "order": "C",
            "filters": None,
            "dimension_separator": sep,
        },
    )
    return root


def v3_codecs(compressor: str | None):
    chain = [{"name": "bytes", "configuration": {"endian": "little"}}]
    if compressor:
        chain.append(V3_COMPRESSORS[compressor])
    return chain


def v3_array(root: Path, shape, chunks, data_type="float64", codecs=None, fill=0.0) -> Path:
    """Writes a v3 `zarr.json` (no chunks, `/` chunk keys) and returns the array's directory."""
    write_json(
        root / "zarr.json",
        {
            "zarr_format": 3,
            "node_type": "array",
            "shape": list(shape),
            "data_type": data_type,
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(chunks)}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
            "fill_value": fill,
            "codecs": codecs if codecs is not None else v3_codecs(None),
            "attributes": {},
        },
    )
    return root


def v3_group(root: Path, consolidated=None) -> None:
    doc = {"zarr_format": 3, "node_type": "group", "attributes": {}}
    if consolidated is not None:
        doc["consolidated_metadata"] = {"kind": "inline", "must_understand": False, "metadata": consolidated}
    write_json(root / "zarr.json", doc)


def v3_meta(root: Path) -> dict:
    return json.loads((root / "zarr.json").read_text())


def put(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def dense_1d(root: Path, version: int, compressor: str, n=1000, chunk=100) -> np.ndarray:
    """A float64 array 0..n in chunks of `chunk`, every chunk stored; returns its data."""
    data = np.arange(n, dtype="<f8")
    if version == 2:
        v2_array(root, [n], [chunk], compressor=compressor)
    else:
        v3_array(root, [n], [chunk], codecs=v3_codecs(None if compressor == "none" else compressor))
    for i in range(0, n // chunk):
        raw = data[i * chunk : (i + 1) * chunk].tobytes()
        put(chunk_path(root, version, i), encode(compressor, raw))
    return data


def chunk_path(root: Path, version: int, *index: int) -> Path:
    if version == 2:
        return root / ".".join(str(i) for i in index)
    return root.joinpath("c", *(str(i) for i in index))


MISSING = (2**64 - 1, 2**64 - 1)


def shard_index_bytes(entries, checksum=True) -> bytes:
    """A shard index (offset, nbytes per inner chunk, little-endian) with its crc32c."""
    raw = b"".join(struct.pack("<QQ", o, n) for o, n in entries)
    return raw + (struct.pack("<I", crc32c.crc32c(raw)) if checksum else b"")


def sharded_1d(root: Path, n=1000, shard=1000, inner=100, inner_compressor=None, fill=0.0):
    """A sharded v3 float64 array 0..n (index at the end, bytes+crc32c); returns (data,
    [(offset, nbytes)] of shard 0, the encoded inner chunks of shard 0)."""
    data = np.arange(n, dtype="<f8")
    codecs = [
        {
            "name": "sharding_indexed",
            "configuration": {
                "chunk_shape": [inner],
                "codecs": v3_codecs(inner_compressor),
                "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}],
                "index_location": "end",
            },
        }
    ]
    v3_array(root, [n], [shard], codecs=codecs, fill=fill)
    shards = []
    for s in range(n // shard):
        blobs = []
        for i in range(shard // inner):
            lo = s * shard + i * inner
            blobs.append(encode(inner_compressor or "none", data[lo : lo + inner].tobytes()))
        shards.append(blobs)
        write_shard(chunk_path(root, 3, s), blobs)
    return data, shards


def write_shard(path: Path, blobs, entries=None, pad_to: int | None = None) -> list:
    """Writes inner chunks `blobs` and their index (or `entries` instead); with `pad_to`, a
    sparse hole between the chunks and the index makes the file that long."""
    body = b"".join(blobs)
    if entries is None:
        entries, off = [], 0
        for b in blobs:
            entries.append((off, len(b)))
            off += len(b)
    index = shard_index_bytes(entries)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.write(body)
        if pad_to is not None:
            f.seek(pad_to - len(index))
        f.write(index)
    return entries


def zip_store(src_dir: Path, zip_path: Path, compression=zipfile.ZIP_STORED, big: dict | None = None) -> None:
    """Zips a directory store (entries at the archive root); `big` maps entry names to
    iterables of byte pieces written as deflated entries (streamed, zip64)."""
    big = big or {}
    with zipfile.ZipFile(zip_path, "w", compression=compression) as zf:
        for dirpath, _, files in os.walk(src_dir):
            for name in sorted(files):
                full = Path(dirpath) / name
                rel = full.relative_to(src_dir).as_posix()
                if rel in big:
                    continue
                zf.write(full, rel)
        for rel, pieces in big.items():
            info = zipfile.ZipInfo(rel)
            info.compress_type = zipfile.ZIP_DEFLATED
            info._compresslevel = 1
            with zf.open(info, "w", force_zip64=True) as f:
                for piece in pieces:
                    f.write(piece)
