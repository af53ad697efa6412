"""Small random reads (a training loop's patches) through ``zarrbuf.open`` and zarrbuf's
pipeline: exact against the data zarr-python wrote, plain and sharded, and after writes —
through zarrbuf (which drops the cached shard indexes of the shards it stores) and through
zarr-python on a handle opened again."""

from __future__ import annotations

import numpy as np
import pytest
import zarr
import zarrbuf

PIPELINE = {"codec_pipeline.path": "zarrbuf.ZarrbufCodecPipeline"}
DEFAULT = {"codec_pipeline.path": "zarr.core.codec_pipeline.BatchedCodecPipeline"}
SHAPE = (6, 40, 40)


def _write(path: str, values: np.ndarray, sharded: bool) -> None:
    kwargs = {"shards": (3, 20, 20)} if sharded else {}
    with zarr.config.set(DEFAULT):
        z = zarr.create_array(
            path,
            shape=SHAPE,
            chunks=(3, 10, 10),
            dtype="f4",
            compressors=zarr.codecs.ZstdCodec(level=1),
            fill_value=0.0,
            overwrite=True,
            **kwargs,
        )
        z[...] = values


def pipeline_fallbacks(z) -> int:
    return z._async_array.codec_pipeline.stats["fallback"]


def _patches(n: int = 40) -> list[tuple[slice, ...]]:
    rng = np.random.default_rng(3)
    out = []
    for _ in range(n):
        z, y, x = (int(rng.integers(0, s - p + 1)) for s, p in zip(SHAPE, (1, 16, 16)))
        out.append((slice(z, z + 1), slice(y, y + 16), slice(x, x + 16)))
    return out


@pytest.mark.parametrize("sharded", [False, True], ids=["plain", "sharded"])
def test_random_patches_equal_the_data_written(tmp_path, sharded):
    path = str(tmp_path / "a.zarr")
    values = np.random.default_rng(0).standard_normal(SHAPE).astype("f4")
    _write(path, values, sharded)
    a = zarrbuf.open(path)
    with zarr.config.set(PIPELINE):
        z = zarr.open_array(path, mode="r")
        pipeline = z._async_array.codec_pipeline
        for _ in range(2):  # the second pass through cached shard indexes
            for sel in _patches():
                np.testing.assert_array_equal(np.asarray(a.read(sel)), values[sel])
                np.testing.assert_array_equal(np.asarray(a[sel]), values[sel])
                np.testing.assert_array_equal(z[sel], values[sel])
    assert pipeline.stats["zarrbuf"] > 0 and pipeline.stats["fallback"] == 0, pipeline.stats


@pytest.mark.parametrize("sharded", [False, True], ids=["plain", "sharded"])
def test_patches_after_writes_show_the_new_data(tmp_path, sharded):
    path = str(tmp_path / "a.zarr")
    rng = np.random.default_rng(1)
    values = rng.standard_normal(SHAPE).astype("f4")
    _write(path, values, sharded)
    a = zarrbuf.open(path)
    sels = _patches(10)
    for sel in sels:
        np.testing.assert_array_equal(np.asarray(a.read(sel)), values[sel])
    # A write through the same zarrbuf handle: the shards it stores are read afresh.
    fresh = rng.standard_normal(SHAPE).astype("f4") * 1000
    a.write(..., fresh)
    for sel in sels:
        np.testing.assert_array_equal(np.asarray(a.read(sel)), fresh[sel])
    # Through zarrbuf's pipeline, reading and writing through one zarr-python array.
    with zarr.config.set(PIPELINE):
        z = zarr.open_array(path, mode="r+")
        for sel in sels:
            np.testing.assert_array_equal(z[sel], fresh[sel])
        again = fresh[::-1].copy()
        z[...] = again
        for sel in sels:
            np.testing.assert_array_equal(z[sel], again[sel])
        # A write zarrbuf hands to zarr-python (fancy indexing) rewrites shards too.
        rows = np.array([0, 2, 5])
        again[rows] = -again[rows]
        z.oindex[rows] = again[rows]
        assert pipeline_fallbacks(z) > 0
        for sel in sels:
            np.testing.assert_array_equal(z[sel], again[sel])
    # zarr-python's own writes are seen by a handle opened afterwards.
    other = rng.standard_normal(SHAPE).astype("f4")
    _write(path, other, sharded)
    b = zarrbuf.open(path)
    for sel in sels:
        np.testing.assert_array_equal(np.asarray(b.read(sel)), other[sel])


@pytest.mark.parametrize("sharded", [False, True], ids=["plain", "sharded"])
def test_patches_over_a_file_url_from_threads_equal_the_data_and_see_writes(tmp_path, sharded):
    # A file:// URL opens the async store: the async small-read route, whose concurrent
    # reads of the same chunks (these threads') share their fetches.
    from concurrent.futures import ThreadPoolExecutor

    path = tmp_path / "a.zarr"
    rng = np.random.default_rng(2)
    values = rng.standard_normal(SHAPE).astype("f4")
    _write(str(path), values, sharded)
    a = zarrbuf.open(path.as_uri())
    sels = _patches() * 2
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda sel: np.asarray(a.read(sel)), sels))
    for sel, g in zip(sels, got):
        np.testing.assert_array_equal(g, values[sel])
    fresh = rng.standard_normal(SHAPE).astype("f4") * 1000
    a.write(..., fresh)
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda sel: np.asarray(a.read(sel)), sels))
    for sel, g in zip(sels, got):
        np.testing.assert_array_equal(g, fresh[sel])
