"""Decoded-chunk caches from Python: zarrbuf.ChunkCache, zarrbuf.open(..., cache=/cache_bytes=),
and the codec pipeline's process-wide cache (codec_pipeline.zarrbuf_cache_bytes)."""

from __future__ import annotations

import os

import numpy as np
import pytest
import zarr
import zarrbuf
from conftest import FIXTURES, MANIFEST, assert_same_bits, fixture_ids, native
from zarrbuf import pipeline as zpipeline

PIPELINE = {"codec_pipeline.path": "zarrbuf.ZarrbufCodecPipeline"}
READABLE = [e for e in MANIFEST if "zarr-python" in e.get("verified_by", [])]


def make_array(path, fmt=3, shards=None):
    """A 40 x 30 int32 array in 8 x 8 chunks (zstd), written 0, 1, 2, ... by zarr-python."""
    data = np.arange(40 * 30, dtype="i4").reshape(40, 30)
    kw = {"shards": shards} if shards else {}
    z = zarr.create_array(str(path), shape=data.shape, chunks=(8, 8), dtype="i4", zarr_format=fmt, **kw)
    z[...] = data
    return data


def test_a_second_read_hits_and_stats_count(tmp_path):
    data = make_array(tmp_path / "a.zarr")
    a = zarrbuf.open(str(tmp_path / "a.zarr"), cache_bytes=1 << 20)
    assert isinstance(a.cache, zarrbuf.ChunkCache)
    assert a.cache.capacity == 1 << 20
    first = np.asarray(a[3:20, 5:17])
    # Rows 3..20 and columns 5..17 touch 3 x 3 chunks of 8 x 8 int32 (256 bytes each).
    assert a.cache.stats() == {
        "hits": 0, "misses": 9, "inserted_bytes": 9 * 256, "resident_bytes": 9 * 256,
        "evictions": 0, "entries": 9,
    }
    second = np.asarray(a[3:20, 5:17])
    np.testing.assert_array_equal(first, data[3:20, 5:17])
    np.testing.assert_array_equal(second, data[3:20, 5:17])
    assert a.cache.stats()["hits"] == 9
    a.cache.clear()
    assert a.cache.stats()["entries"] == 0
    assert zarrbuf.open(str(tmp_path / "a.zarr")).cache is None
    with pytest.raises(ValueError, match="not both"):
        zarrbuf.open(str(tmp_path / "a.zarr"), cache=zarrbuf.ChunkCache(10), cache_bytes=10)


def test_eviction_keeps_the_capacity(tmp_path):
    data = make_array(tmp_path / "e.zarr")
    cache = zarrbuf.ChunkCache(4 * 256)  # four 8 x 8 int32 chunks
    a = zarrbuf.open(str(tmp_path / "e.zarr"), cache=cache)
    for r in range(0, 40, 8):
        np.testing.assert_array_equal(np.asarray(a[r:r + 8, :]), data[r:r + 8, :])
    s = cache.stats()
    assert s["resident_bytes"] <= 4 * 256 and s["evictions"] > 0, s


def test_two_opened_arrays_share_one_cache(tmp_path):
    data = make_array(tmp_path / "s.zarr")
    cache = zarrbuf.ChunkCache(1 << 20)
    one = zarrbuf.open(str(tmp_path / "s.zarr"), cache=cache)
    two = zarrbuf.open("file://" + str(tmp_path / "s.zarr"), cache=cache)
    np.testing.assert_array_equal(np.asarray(one[0:8, 0:8]), data[0:8, 0:8])
    np.testing.assert_array_equal(np.asarray(two[0:8, 0:8]), data[0:8, 0:8])
    assert cache.stats()["misses"] == 1 and cache.stats()["hits"] == 1
    # Another array in the same cache never sees these chunks.
    other = make_array(tmp_path / "other.zarr") * 0 - 1
    zarr.open_array(str(tmp_path / "other.zarr"))[...] = other
    o = zarrbuf.open(str(tmp_path / "other.zarr"), cache=cache)
    np.testing.assert_array_equal(np.asarray(o[0:8, 0:8]), other[0:8, 0:8])


def test_a_zarrbuf_write_invalidates_every_cache(tmp_path):
    data = make_array(tmp_path / "w.zarr")
    reader = zarrbuf.open(str(tmp_path / "w.zarr"), cache_bytes=1 << 20)
    writer = zarrbuf.open(str(tmp_path / "w.zarr"))  # no cache of its own
    np.testing.assert_array_equal(np.asarray(reader[...]), data)
    writer[2:12, 4:9] = -7
    data[2:12, 4:9] = -7
    np.testing.assert_array_equal(np.asarray(reader[...]), data)
    # A change zarrbuf did not make is not seen until the array's chunks are dropped.
    zarr.open_array(str(tmp_path / "w.zarr"))[0, 0] = 12345
    assert np.asarray(reader[0:1, 0:1])[0, 0] == 0
    reader.invalidate_cache()
    assert np.asarray(reader[0:1, 0:1])[0, 0] == 12345


def spellings(store, link):
    """Every way of naming node g/a of the directory store ``store`` as (location, path)."""
    s, rel = str(store), "./" + os.path.relpath(store)
    return [
        (s, "g/a"), (s + "/", "/g/a/"), ("file://" + s, "g/a"), (s + "/./g/../", "g/a"),
        (rel, "g/a"), (s + "/g", "a"), (s + "/g/", "/a"), ("file://" + s + "/g/", "a/"),
        (s + "/./g", "a"), (rel + "/g/", "a"), (s + "/g/a", ""), (str(link) + "/g", "a"),
    ]


def test_one_array_however_it_is_named(tmp_path):
    store = tmp_path / "s.zarr"
    zarr.create_group(str(store)).create_group("g").create_array(
        "a", shape=(16, 16), chunks=(8, 8), dtype="i4", fill_value=0)
    (tmp_path / "link.zarr").symlink_to(store)
    names = spellings(store, tmp_path / "link.zarr")
    value = 0
    for w, (wloc, wpath) in enumerate(names):
        writer = zarrbuf.open(wloc, wpath)
        for r, (rloc, rpath) in enumerate(names):
            if r == w:
                continue
            reader = zarrbuf.open(rloc, rpath, cache_bytes=1 << 20)
            assert (np.asarray(reader[...]) == value).all()
            value += 1
            writer[...] = np.full((16, 16), value, "i4")
            got = np.asarray(reader[...])
            assert (got == value).all(), (
                f"written through {(wloc, wpath)}, read through {(rloc, rpath)}: its cache "
                f"served {got[0, 0]}"
            )
            assert reader.cache.stats()["misses"] == 8, reader.cache.stats()


def test_streams_read_through_the_cache(tmp_path):
    data = make_array(tmp_path / "st.zarr", shards=(16, 16))
    a = zarrbuf.open(str(tmp_path / "st.zarr"), cache_bytes=1 << 20)
    sels = [(slice(r, r + 8), slice(0, 30)) for r in range(0, 40, 8)]
    for _ in range(2):
        for sel, got in zip(sels, a.read_stream(sels), strict=True):
            np.testing.assert_array_equal(np.asarray(got), data[sel])
    s = a.cache.stats()
    assert s["misses"] == 20 and s["hits"] == 20, s  # 5 x 4 inner chunks of 8 x 8


@pytest.mark.parametrize("entry", READABLE, ids=fixture_ids(READABLE))
def test_cached_reads_equal_zarr_python(entry):
    store = str(FIXTURES / entry["store"])
    z = zarr.open_array(store, path=entry["path"] or None, mode="r")
    want = native(np.asarray(z[...]))
    try:
        a = zarrbuf.open(store, entry["path"], cache_bytes=64 << 20)
    except zarrbuf.ZarrbufError:
        pytest.skip("zarrbuf.open refuses this fixture (its own tests cover why)")
    for _ in range(2):
        assert_same_bits(np.asarray(a.read(...)), want)
        if want.ndim and want.shape[0] > 2:
            assert_same_bits(np.asarray(a[1:-1]), want[1:-1])
    assert a.cache.stats()["hits"] > 0


def test_the_pipeline_cache_from_zarr_config(tmp_path):
    data = make_array(tmp_path / "p.zarr")
    with zarr.config.set({**PIPELINE, zpipeline.CACHE_CONFIG_KEY: 1 << 20}):
        cache = zpipeline.pipeline_cache()
        assert cache is not None and cache.capacity == 1 << 20
        before = cache.stats()
        z = zarr.open_array(str(tmp_path / "p.zarr"))
        np.testing.assert_array_equal(z[0:16, 0:16], data[0:16, 0:16])
        again = zarr.open_array(str(tmp_path / "p.zarr"))
        np.testing.assert_array_equal(again[0:16, 0:16], data[0:16, 0:16])
        after = cache.stats()
        assert after["misses"] - before["misses"] == 4
        assert after["hits"] - before["hits"] == 4
        # zarrbuf's writes through the pipeline drop what they replace.
        z[0:4, 0:4] = 99
        data[0:4, 0:4] = 99
        np.testing.assert_array_equal(again[0:16, 0:16], data[0:16, 0:16])
    with zarr.config.set({zpipeline.CACHE_CONFIG_KEY: 0}):
        assert zpipeline.pipeline_cache() is None
    with zarr.config.set({zpipeline.CACHE_CONFIG_KEY: -1}), pytest.raises(ValueError):
        zpipeline.pipeline_cache()


def test_pipeline_writes_zarr_python_makes_drop_the_array(tmp_path):
    data = make_array(tmp_path / "f.zarr")
    with zarr.config.set({**PIPELINE, zpipeline.CACHE_CONFIG_KEY: 1 << 20}):
        cache = zpipeline.pipeline_cache()
        z = zarr.open_array(str(tmp_path / "f.zarr"))
        np.testing.assert_array_equal(z[...], data)
        entries = cache.stats()["entries"]
        assert entries >= 20
        # Strided assignment is not a box: zarr-python writes it, the pipeline drops the array.
        z[0:8:2, 0:8] = -1
        data[0:8:2, 0:8] = -1
        assert z._async_array.codec_pipeline.stats["fallback"] > 0
        np.testing.assert_array_equal(z[...], data)
