"""Dask over arrays opened with zarrbuf's pipeline: threaded scheduler and a LocalCluster of
worker processes, on a local directory store and on S3 (the local moto server of
scripts/start-test-servers.sh, through zarr-python's FsspecStore over s3fs, which the
pipeline maps to zarrbuf's own s3:// reader). Every result is compared exactly, and the
batch counters say that zarrbuf's Rust path (not the fallback) did the reads."""

from __future__ import annotations

import os
import uuid

import numpy as np
import pytest
import zarr

import zarrbuf
import zarrbuf.pipeline as zp

da = pytest.importorskip("dask.array", reason="dask[array] is in python/requirements.txt")
distributed = pytest.importorskip("distributed", reason="distributed is in python/requirements.txt")
import zarrbuf.dask as zd  # noqa: E402

PIPELINE = "zarrbuf.ZarrbufCodecPipeline"
SHAPE, CHUNKS = (96, 40), (16, 10)


def _data() -> np.ndarray:
    rng = np.random.default_rng(11)
    return rng.standard_normal(SHAPE).astype("<f4")


def _s3_endpoint() -> str:
    endpoint = os.environ.get("ZARRBUF_TEST_S3_ENDPOINT")
    if endpoint:
        return endpoint
    if os.environ.get("ZARRBUF_REQUIRE_SERVERS") == "1":
        pytest.fail("ZARRBUF_REQUIRE_SERVERS=1 but ZARRBUF_TEST_S3_ENDPOINT is not set")
    pytest.skip(
        "no S3 test server: run `source <(scripts/start-test-servers.sh)` first "
        "(ZARRBUF_TEST_S3_ENDPOINT)"
    )


def _s3_store(endpoint: str, prefix: str, **extra) -> zarr.storage.FsspecStore:
    import boto3

    bucket = "zarrbuf-dask"
    s3 = boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    )
    try:
        s3.create_bucket(Bucket=bucket)
    except s3.exceptions.BucketAlreadyOwnedByYou:
        pass
    return zarr.storage.FsspecStore.from_url(
        f"s3://{bucket}/{prefix}",
        storage_options={
            "endpoint_url": endpoint,
            "key": "testing",
            "secret": "testing",
            "client_kwargs": {"region_name": "us-east-1"},
            **extra,
        },
    )


@pytest.fixture(params=["local", "s3"])
def store(request, tmp_path):
    if request.param == "local":
        return zarr.storage.LocalStore(tmp_path / "dask.zarr")
    return _s3_store(_s3_endpoint(), f"{uuid.uuid4().hex}/dask.zarr")


@pytest.fixture
def written(store):
    """(store, data): the array written by zarr-python's own pipeline, then opened with zarrbuf's."""
    data = _data()
    with zarr.config.set({"codec_pipeline.path": "zarr.core.codec_pipeline.BatchedCodecPipeline"}):
        a = zarr.create_array(store, shape=SHAPE, chunks=CHUNKS, dtype="<f4", fill_value=0)
        a[:] = data
    return store, data


def _open(store) -> zarr.Array:
    with zarr.config.set({"codec_pipeline.path": PIPELINE}):
        a = zarr.open_array(store, mode="r")
    assert type(a._async_array.codec_pipeline).__name__ == "ZarrbufCodecPipeline"
    return a


def test_pipeline_reads_and_writes_s3_through_zarrbuf():
    """FsspecStore over s3fs maps to zarrbuf's s3:// reader and writer (no fallback)."""
    store = _s3_store(_s3_endpoint(), f"{uuid.uuid4().hex}/rw.zarr")
    data = _data()
    with zarr.config.set({"codec_pipeline.path": PIPELINE}):
        a = zarr.create_array(store, shape=SHAPE, chunks=CHUNKS, dtype="<f4", fill_value=0)
        before = dict(a._async_array.codec_pipeline.stats)
        a[:] = data
        a[5:37, 3:29] = -data[5:37, 3:29]
        got = a[2:90, 1:39]
        stats = a._async_array.codec_pipeline.stats
    assert stats["zarrbuf"] - before["zarrbuf"] == 3 and stats["fallback"] == before["fallback"]
    want = data.copy()
    want[5:37, 3:29] *= -1
    np.testing.assert_array_equal(got, want[2:90, 1:39])
    # zarr-python's own pipeline (through s3fs) reads what zarrbuf wrote.
    with zarr.config.set({"codec_pipeline.path": "zarr.core.codec_pipeline.BatchedCodecPipeline"}):
        back = zarr.open_array(store, mode="r")[:]
    np.testing.assert_array_equal(back, want)


def test_s3_settings_zarrbuf_cannot_honour_fall_back():
    """An s3fs option object_store would not honour (extra request arguments) falls back."""
    endpoint = _s3_endpoint()
    # (A filesystem of its own: fsspec caches filesystems by their arguments.)
    store = _s3_store(
        endpoint,
        f"{uuid.uuid4().hex}/fb.zarr",
        s3_additional_kwargs={"ServerSideEncryption": "AES256"},
    )
    assert zp._store_location(store) is None
    with zarr.config.set({"codec_pipeline.path": PIPELINE}):
        a = zarr.create_array(store, shape=(8,), chunks=(4,), dtype="i4", fill_value=0)
        a[:] = np.arange(8)
        np.testing.assert_array_equal(a[:], np.arange(8))
        stats = a._async_array.codec_pipeline.stats
    assert stats["zarrbuf"] == 0 and stats["fallback"] == 2


def test_dask_threaded_scheduler(written):
    store, data = written
    a = _open(store)
    before = zp.STATS["zarrbuf"]
    x = da.from_zarr(a)
    assert x.chunks == tuple((c,) * (n // c) for n, c in zip(SHAPE, CHUNKS))
    np.testing.assert_array_equal(x.compute(scheduler="threads"), data)
    # A reduction over an unaligned slab: chunks read once each, results exact.
    y = x[7:90, 3:33].sum(axis=0, dtype="f8")
    np.testing.assert_array_equal(y.compute(scheduler="threads"), data[7:90, 3:33].sum(axis=0, dtype="f8"))
    n_blocks = (SHAPE[0] // CHUNKS[0]) * (SHAPE[1] // CHUNKS[1])
    assert zp.STATS["zarrbuf"] - before >= n_blocks, dict(zp.STATS)


@pytest.fixture(scope="module")
def client():
    # Worker processes (spawned, not forked): each gets the pipeline from the plugin.
    with distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=2,
        processes=True,
        dashboard_address=None,
        host="127.0.0.1",
        worker_dashboard_address=None,
    ) as cluster, distributed.Client(cluster) as c:
        zd.use_zarrbuf_pipeline(c)
        yield c


def test_plugin_configures_every_worker(client):
    stats = client.run(zd.worker_stats)
    assert len(stats) == 2
    assert all(s["pipeline"] == PIPELINE for s in stats.values()), stats
    assert all(os.getpid() != pid for pid in client.run(os.getpid).values())


def test_dask_local_cluster_of_processes(client, written):
    store, data = written
    before = {w: s["zarrbuf"] for w, s in client.run(zd.worker_stats).items()}
    x = da.from_zarr(_open(store))
    np.testing.assert_array_equal(client.compute(x).result(), data)
    col = client.compute(x[:, 11:27].mean(axis=0, dtype="f8")).result()
    np.testing.assert_array_equal(col, data[:, 11:27].mean(axis=0, dtype="f8"))
    after = {w: s["zarrbuf"] for w, s in client.run(zd.worker_stats).items()}
    done = sum(after[w] - before.get(w, 0) for w in after)
    assert done >= (SHAPE[0] // CHUNKS[0]) * (SHAPE[1] // CHUNKS[1]), (before, after)


def test_dask_workers_open_arrays_themselves(client, written):
    """Arrays opened on the workers (not pickled from here) use the plugin's setting."""
    store, data = written

    def read_block(i: int) -> tuple[str, np.ndarray]:
        a = zarr.open_array(store, mode="r")
        return type(a._async_array.codec_pipeline).__name__, a[i * 16 : (i + 1) * 16]

    futures = client.map(read_block, range(SHAPE[0] // 16))
    for i, (name, block) in enumerate(client.gather(futures)):
        assert name == "ZarrbufCodecPipeline"
        np.testing.assert_array_equal(block, data[i * 16 : (i + 1) * 16])


def test_rank_slice_partitions_whole_chunks():
    for length, chunk, world in [(100, 10, 3), (96, 16, 4), (5, 10, 3), (0, 4, 2), (97, 8, 5)]:
        parts = [zarrbuf.rank_slice(length, chunk, r, world) for r in range(world)]
        assert parts[0].start == 0 and parts[-1].stop == length
        for p, q in zip(parts, parts[1:]):
            assert p.stop == q.start
        for p in parts:
            assert p.start % chunk == 0 or p.start == p.stop == length
            assert p.stop % chunk == 0 or p.stop == length
        sizes = [-(-(p.stop - p.start) // chunk) for p in parts]
        assert max(sizes) - min(sizes) <= 1


@pytest.mark.parametrize(
    "args, err",
    [
        ((10, 0, 0, 1), ValueError),
        ((10, 2, 2, 2), ValueError),
        ((10, 2, -1, 2), ValueError),
        ((-1, 2, 0, 1), ValueError),
        ((10, 2, 0, 0), ValueError),
        ((10.0, 2, 0, 1), TypeError),
        ((10, 2, True, 2), TypeError),
    ],
)
def test_rank_slice_bad_input(args, err):
    with pytest.raises(err):
        zarrbuf.rank_slice(*args)
