"""Prefix decoding of zstd chunks (``zarrbuf.open(..., prefix_decode=True)`` and the
pipeline's ``codec_pipeline.zarrbuf_prefix_decode``): exact against what zarr-python wrote at
every depth of a chunk, for element sizes 1 to 8, plain and sharded; and a chunk whose last
zstd block is garbled (its sizes intact) reads for a first-plane patch only with the option
on (the default), which proves that only the needed prefix is decoded and that
``prefix_decode=False`` decodes whole."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import zarr
import zarrbuf
from zarrbuf import pipeline as zpipeline

PIPELINE = {"codec_pipeline.path": "zarrbuf.ZarrbufCodecPipeline"}
DEFAULT = {"codec_pipeline.path": "zarr.core.codec_pipeline.BatchedCodecPipeline"}
SHAPE = (32, 128, 128)
CHUNKS = (16, 128, 128)  # 256 KiB to 2 MiB decoded: frames of several 128 KiB blocks


def _write(path: str, dtype: str, sharded: bool) -> np.ndarray:
    values = np.random.default_rng(5).integers(0, 16, size=SHAPE).astype(dtype)
    kwargs = {"shards": (32, 128, 128)} if sharded else {}
    with zarr.config.set(DEFAULT):
        z = zarr.create_array(
            path, shape=SHAPE, chunks=CHUNKS, dtype=dtype,
            compressors=zarr.codecs.ZstdCodec(level=1), fill_value=0, overwrite=True, **kwargs,
        )
        z[...] = values
    return values


def _blocks(frame: bytes) -> list[tuple[int, int]]:
    """The start and stored length of each block's contents in a zstd frame."""
    d = frame[4]
    single = bool(d & 0x20)
    fcs = [int(single), 2, 4, 8][d >> 6]
    at = 5 + (not single) + [0, 1, 2, 4][d & 3] + fcs
    out = []
    while True:
        h = int.from_bytes(frame[at:at + 3], "little")
        stored = 1 if (h >> 1) & 3 == 1 else h >> 3
        out.append((at + 3, stored))
        at += 3 + stored
        if h & 1:
            return out


def _garble_last_block(chunk_file) -> None:
    frame = bytearray(chunk_file.read_bytes())
    blocks = _blocks(bytes(frame))
    assert len(blocks) > 1, "a frame of several blocks"
    start, n = blocks[-1]
    frame[start:start + n] = b"\xff" * n
    chunk_file.write_bytes(bytes(frame))


@pytest.mark.parametrize("sharded", [False, True], ids=["plain", "sharded"])
@pytest.mark.parametrize("dtype", ["u1", "i2", "f4", "f8"])
def test_every_depth_reads_exactly(tmp_path, dtype, sharded):
    path = str(tmp_path / "a.zarr")
    values = _write(path, dtype, sharded)
    a = zarrbuf.open(path, prefix_decode=True)
    assert a.prefix_decode and zarrbuf.open(path).prefix_decode
    assert not zarrbuf.open(path, prefix_decode=False).prefix_decode
    for z in range(SHAPE[0]):
        for sel in [(z, slice(0, 64), slice(64, 128)), (slice(z, z + 1), slice(5, 128), slice(0, 127))]:
            np.testing.assert_array_equal(a[sel], values[sel], err_msg=f"{dtype} {sel}")
    with zarr.config.set({**PIPELINE, zpipeline.PREFIX_DECODE_CONFIG_KEY: True}):
        z = zarr.open_array(path, mode="r")
        for d in (0, 15, 16, 31):
            np.testing.assert_array_equal(z[d, 10:74, :64], values[d, 10:74, :64])
        assert z._async_array.codec_pipeline.stats["zarrbuf"] > 0


def test_a_garbled_last_block_reads_past_only_with_the_option_on(tmp_path):
    path = tmp_path / "g.zarr"
    values = _write(str(path), "f4", sharded=False)
    _garble_last_block(path / "c" / "0" / "0" / "0")
    patch = (0, slice(0, 64), slice(0, 64))
    np.testing.assert_array_equal(zarrbuf.open(str(path), prefix_decode=True)[patch], values[patch])
    # The default is the prefix decode; turned off, the chunk decodes whole.
    np.testing.assert_array_equal(zarrbuf.open(str(path))[patch], values[patch])
    with pytest.raises(zarrbuf.ZarrbufError):
        zarrbuf.open(str(path), prefix_decode=False)[patch]
    # A patch that needs the last block, and a read through a cache, decode it.
    with pytest.raises(zarrbuf.ZarrbufError):
        zarrbuf.open(str(path), prefix_decode=True)[15, 64:, 64:]
    with pytest.raises(zarrbuf.ZarrbufError):
        zarrbuf.open(str(path), prefix_decode=True, cache_bytes=1 << 24)[patch]
    # The pipeline: the config key on (the default), then off.
    with zarr.config.set(PIPELINE):
        np.testing.assert_array_equal(zarr.open_array(str(path), mode="r")[patch], values[patch])
    with zarr.config.set({**PIPELINE, zpipeline.PREFIX_DECODE_CONFIG_KEY: False}), pytest.raises(
        zarrbuf.ZarrbufError
    ):
        zarr.open_array(str(path), mode="r")[patch]


def test_the_config_key_and_reopening(tmp_path):
    assert zpipeline.pipeline_prefix_decode() is True
    for value, want in [(True, True), (False, False), ("true", True), ("0", False)]:
        with zarr.config.set({zpipeline.PREFIX_DECODE_CONFIG_KEY: value}):
            assert zpipeline.pipeline_prefix_decode() is want
    with zarr.config.set({zpipeline.PREFIX_DECODE_CONFIG_KEY: 3}), pytest.raises(ValueError):
        zpipeline.pipeline_prefix_decode()
    # What a worker process reopens the array with keeps the option.
    path = str(tmp_path / "r.zarr")
    _write(path, "u1", sharded=False)
    location, p, opts = pickle.loads(pickle.dumps(zarrbuf.open(path, prefix_decode=False)._open_args))
    assert opts == {"prefix_decode": False}
    assert not zarrbuf.open(location, p, **opts).prefix_decode
    assert pickle.loads(pickle.dumps(zarrbuf.open(path)._open_args))[2] == {}


def test_string_arrays_read_through_the_pipeline_with_the_key_on(tmp_path):
    """Variable-length arrays decode their chunks whole; the key changes nothing for them."""
    path = str(tmp_path / "s.zarr")
    values = np.array([f"s{i}" * (i % 5) for i in range(300)], dtype=object).reshape(30, 10)
    with zarr.config.set(DEFAULT):
        z = zarr.create_array(path, shape=values.shape, chunks=(8, 5), dtype=str,
                              compressors=zarr.codecs.ZstdCodec(level=1), overwrite=True)
        z[...] = values
    with zarr.config.set({**PIPELINE, zpipeline.PREFIX_DECODE_CONFIG_KEY: True}):
        z = zarr.open_array(path, mode="r")
        got = z[3:20, 2:9]
        assert z._async_array.codec_pipeline.stats["zarrbuf"] > 0
    assert [str(x) for x in got.ravel()] == [str(x) for x in values[3:20, 2:9].ravel()]
