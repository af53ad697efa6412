"""zarrbuf.check on arrays zarr-python wrote: clean ones pass, planted damage is named."""

from __future__ import annotations

import os

import numpy as np
import zarr
import zarrbuf


def _write(tmp_path, **kw):
    path = str(tmp_path / "a.zarr")
    z = zarr.create_array(path, shape=(40, 30), dtype="f4", **kw)
    z[...] = np.arange(1200, dtype="f4").reshape(40, 30)
    return path


def test_a_clean_array_checks_clean(tmp_path):
    path = _write(tmp_path, chunks=(10, 10), compressors=zarr.codecs.ZstdCodec(level=1))
    report = zarrbuf.check(path)
    assert report["clean"] and report["findings"] == []
    assert report["chunks_checked"] == 12


def test_planted_damage_is_named_and_repaired(tmp_path):
    path = _write(tmp_path, chunks=(10, 10), compressors=zarr.codecs.ZstdCodec(level=1))
    chunk = os.path.join(path, "c", "1", "2")
    data = open(chunk, "rb").read()
    open(chunk, "wb").write(data[: len(data) // 2])  # truncated
    open(os.path.join(path, "c", "0", ".1.zarrbuf-tmp.h.1.0"), "wb").write(b"torn")
    report = zarrbuf.check(path)
    assert not report["clean"]
    found = {(f["key"], f["problem"]) for f in report["findings"]}
    assert ("c/1/2", "undecodable") in found
    assert ("c/0/.1.zarrbuf-tmp.h.1.0", "leftover") in found
    repaired = zarrbuf.check(path, repair=True)
    assert len(repaired["repaired"]) == 2
    assert zarrbuf.check(path)["clean"]
    # The removed chunk reads as the fill value through zarr-python; the rest is intact.
    back = zarr.open_array(path, mode="r")[...]
    want = np.arange(1200, dtype="f4").reshape(40, 30)
    want[10:20, 20:30] = 0
    assert np.array_equal(back, want)


def test_a_damaged_inner_chunk_of_a_shard_is_named(tmp_path):
    path = _write(
        tmp_path,
        chunks=(5, 5),
        shards=(20, 30),
        compressors=[zarr.codecs.ZstdCodec(level=1), zarr.codecs.Crc32cCodec()],
    )
    shard = os.path.join(path, "c", "0", "0")
    data = bytearray(open(shard, "rb").read())
    data[8] ^= 0xFF  # inside the first inner chunk (the index is at the end)
    open(shard, "wb").write(bytes(data))
    report = zarrbuf.check(path)
    inner = [f["inner"] for f in report["findings"] if f["key"] == "c/0/0"]
    assert inner == [[0, 0]], report
    zarrbuf.check(path, repair=True)
    back = zarr.open_array(path, mode="r")[...]
    want = np.arange(1200, dtype="f4").reshape(40, 30)
    want[0:5, 0:5] = 0
    assert np.array_equal(back, want)


def test_a_missing_store_is_an_error(tmp_path):
    try:
        zarrbuf.check(str(tmp_path / "nothing.zarr"))
    except zarrbuf.ZarrbufError as e:
        assert "no such directory" in str(e)
    else:
        raise AssertionError("no error")


def test_an_http_url_is_checked_by_its_chunk_grid():
    from conftest import server_url

    url = server_url("ZARRBUF_TEST_LATENCY_URL")
    root = os.environ["ZARRBUF_TEST_LATENCY_ROOT"]
    name = f"pycheck-{os.getpid()}-{np.random.default_rng().integers(1 << 30)}.zarr"
    path = os.path.join(root, name)
    z = zarr.create_array(path, shape=(40, 30), chunks=(10, 10), dtype="f4",
                          compressors=zarr.codecs.ZstdCodec(level=1))
    z[...] = np.arange(1200, dtype="f4").reshape(40, 30)
    report = zarrbuf.check(f"{url}/{name}", io_concurrency=8)
    assert report["clean"] and report["keys"] == "chunk-grid"
    assert report["chunks_checked"] == 12
    chunk = os.path.join(path, "c", "1", "2")
    data = open(chunk, "rb").read()
    open(chunk, "wb").write(data[: len(data) // 2])  # truncated
    found = {(f["key"], f["problem"]) for f in zarrbuf.check(f"{url}/{name}")["findings"]}
    assert found == {("c/1/2", "undecodable")}
