"""zarrbuf.torch: patches equal zarr-python's reading, samplers split epochs exactly across
DataLoader workers and ranks, the iterable dataset equals the map-style one, pickling carries
the location (not an open array), and bad patches are clear errors. CPU only; torch is
required (CI installs it), so a missing torch fails these tests."""

from __future__ import annotations

import collections
import os
import pickle
import subprocess
import sys
import uuid

import numpy as np
import pytest
import torch  # not importorskip: the suite must fail without torch
import zarr
import zarrbuf
import zarrbuf.torch as zt
from conftest import server_url
from torch.utils.data import DataLoader

SHAPE = (6, 40, 36)
PATCH = (1, 8, 12)


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """The same int32 data plain (chunks 2×16×16) and sharded (shards 2×32×32 of 1×16×16)."""
    root = tmp_path_factory.mktemp("torch")
    data = np.arange(np.prod(SHAPE), dtype="i4").reshape(SHAPE)
    plain = zarr.create_array(root / "plain.zarr", shape=SHAPE, chunks=(2, 16, 16), dtype="i4")
    plain[:] = data
    sharded = zarr.create_array(root / "sharded.zarr", shape=SHAPE, chunks=(1, 16, 16),
                                shards=(2, 32, 32), dtype="i4")
    sharded[:] = data
    return {"plain": (str(root / "plain.zarr"), plain), "sharded": (str(root / "sharded.zarr"), sharded)}


@pytest.fixture(params=["plain", "sharded"])
def store(request, stores):
    return stores[request.param]


def origin_of(t: torch.Tensor) -> tuple[int, ...]:
    """The origin of a patch of the arange data: its first element's position."""
    return tuple(int(v) for v in np.unravel_index(int(t.reshape(-1)[0]), SHAPE))


def test_items_equal_zarr_pythons_reading(store):
    location, z = store
    sampler = zt.PatchSampler(SHAPE, PATCH, num_patches=25, seed=3)
    ds = zt.ZarrDataset(location, PATCH, sampler)
    assert len(ds) == 25
    for i in range(len(ds)):
        t = ds[i]
        o = sampler.origins[i]
        want = z[tuple(slice(a, a + p) for a, p in zip(o, PATCH, strict=True))]
        assert isinstance(t, torch.Tensor)
        assert t.dtype == torch.int32 and t.shape == PATCH and t.device.type == "cpu"
        assert np.array_equal(t.numpy(), want)
    assert torch.equal(ds[-1], ds[24])
    with pytest.raises(IndexError, match="out of range for 25 patches"):
        ds[25]


def test_batches_are_read_together_and_equal_the_items(store):
    location, _ = store
    sampler = zt.PatchSampler(SHAPE, PATCH, num_patches=10, seed=4)
    ds = zt.ZarrDataset(location, PATCH, sampler, transform=lambda t: t * 2, prefetch=3)
    got = ds.__getitems__([7, 2, 2, 9])
    for g, i in zip(got, [7, 2, 2, 9], strict=True):
        assert torch.equal(g, ds[i])
    (batch,) = DataLoader(ds, batch_size=4, sampler=[7, 2, 2, 9])
    assert batch.shape == (4, *PATCH)
    assert torch.equal(batch, torch.stack(got))


def test_sampler_orders_are_seeded_and_change_with_the_epoch():
    s = zt.PatchSampler(SHAPE, PATCH, num_patches=50, seed=7)
    t = zt.PatchSampler(SHAPE, PATCH, num_patches=50, seed=7)
    assert np.array_equal(s.origins, t.origins)
    first = list(s)
    assert first == list(t) and sorted(first) == list(range(50))
    s.set_epoch(1)
    second = list(s)
    assert sorted(second) == list(range(50)) and second != first
    t.set_epoch(1)
    assert list(t) == second
    assert list(zt.PatchSampler(SHAPE, PATCH, num_patches=50, shuffle=False)) == list(range(50))
    limit = np.array(SHAPE) - np.array(PATCH)
    assert (s.origins >= 0).all() and (s.origins <= limit).all()
    assert len({tuple(o) for o in s.origins}) > 40  # random, not one origin repeated


def test_ranks_partition_every_epoch():
    for n, world in [(50, 3), (7, 4), (2, 3)]:
        ranks = [zt.PatchSampler(SHAPE, PATCH, num_patches=n, seed=1, rank=r, world_size=world)
                 for r in range(world)]
        for epoch in range(3):
            for s in ranks:
                s.set_epoch(epoch)
            parts = [list(s) for s in ranks]
            assert sorted(i for p in parts for i in p) == list(range(n))
            assert [len(p) for p in parts] == [len(s) for s in ranks]
            assert max(map(len, parts)) - min(map(len, parts)) <= 1
        even = [zt.PatchSampler(SHAPE, PATCH, num_patches=n, seed=1, rank=r, world_size=world,
                                drop_last=True) for r in range(world)]
        parts = [list(s) for s in even]
        assert {len(p) for p in parts} == {n // world}
        flat = [i for p in parts for i in p]
        assert len(set(flat)) == len(flat) == n - n % world


@pytest.mark.parametrize("num_workers", [0, 2])
def test_dataloader_covers_every_index_once_per_epoch(store, num_workers):
    location, _ = store
    sampler = zt.PatchSampler.grid(SHAPE, PATCH, seed=5)  # distinct origins: identifiable
    ds = zt.ZarrDataset(location, PATCH, sampler)
    loader = DataLoader(ds, batch_size=7, sampler=sampler, num_workers=num_workers,
                        timeout=60 if num_workers else 0)  # a hung worker fails, not hangs
    want = sorted(tuple(int(v) for v in o) for o in sampler.origins)
    orders = []
    for epoch in range(2):
        sampler.set_epoch(epoch)
        seen = [origin_of(t) for batch in loader for t in batch]
        assert sorted(seen) == want
        orders.append(seen)
    assert orders[0] != orders[1]


@pytest.mark.parametrize("num_workers", [0, 2])
def test_iterable_dataset_splits_across_workers_and_ranks(store, num_workers):
    location, _ = store
    world = 2
    origins = zt.PatchSampler.grid(SHAPE, PATCH).origins
    want = sorted(tuple(int(v) for v in o) for o in origins)
    for epoch in range(2):
        seen = []
        for rank in range(world):
            sampler = zt.PatchSampler(SHAPE, PATCH, origins=origins, seed=2, rank=rank,
                                      world_size=world)
            ds = zt.ZarrIterableDataset(location, PATCH, sampler, prefetch=4)
            ds.set_epoch(epoch)
            loader = DataLoader(ds, batch_size=None, num_workers=num_workers,
                                timeout=60 if num_workers else 0)
            mine = [origin_of(t) for t in loader]
            assert len(mine) == len(sampler)
            seen += mine
        assert sorted(seen) == want


def test_iterable_equals_map_style(store):
    location, _ = store
    sampler = zt.PatchSampler(SHAPE, PATCH, num_patches=30, seed=9)
    sampler.set_epoch(4)
    maps = zt.ZarrDataset(location, PATCH, sampler)
    want = [maps[i] for i in sampler]
    it = zt.ZarrIterableDataset(location, PATCH, sampler, prefetch=5)
    got = list(it)
    assert len(got) == len(want) == 30
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape and torch.equal(g, w)
    batched = list(zt.ZarrIterableDataset(location, PATCH, sampler, batch_size=8))
    assert [b.shape[0] for b in batched] == [8, 8, 8, 6]
    assert torch.equal(torch.cat(batched), torch.stack(want))
    dropped = list(zt.ZarrIterableDataset(location, PATCH, sampler, batch_size=8,
                                          drop_last_batch=True))
    assert [b.shape[0] for b in dropped] == [8, 8, 8]


def test_origins_given_and_dtypes(tmp_path):
    for dtype, torch_dtype in [("f4", torch.float32), ("u1", torch.uint8), ("f8", torch.float64),
                               ("bool", torch.bool), ("i2", torch.int16)]:
        path = str(tmp_path / f"{dtype}.zarr")
        z = zarr.create_array(path, shape=(5, 7), chunks=(2, 3), dtype=dtype)
        data = (np.arange(35).reshape(5, 7) % 3).astype(dtype)
        z[:] = data
        ds = zt.ZarrDataset(path, (2, 3), [[0, 0], [3, 4], [1, 2]])
        assert ds[1].dtype == torch_dtype and ds[1].shape == (2, 3)
        assert np.array_equal(ds[1].numpy(), data[3:5, 4:7])
        assert np.array_equal(ds[2].numpy(), data[1:3, 2:5])


def test_pickling_carries_the_location_not_an_open_array(store):
    location, z = store
    sampler = zt.PatchSampler(SHAPE, PATCH, num_patches=5, seed=1)
    for ds in [zt.ZarrDataset(location, PATCH, sampler),
               zt.ZarrDataset(zarrbuf.open(location), PATCH, sampler),
               zt.ZarrIterableDataset(location, PATCH, sampler, batch_size=2)]:
        blob = pickle.dumps(ds)
        back = pickle.loads(blob)
        assert back.source._array is None  # opened again on first use
        assert torch.equal(torch.stack(list(_items(back))), torch.stack(list(_items(ds))))
        assert back.source._array is not None


def test_another_interpreter_unpickles_and_reads(stores):
    # What spawn- and forkserver-started DataLoader workers do.
    location, _ = stores["sharded"]
    ds = zt.ZarrDataset(location, PATCH, zt.PatchSampler(SHAPE, PATCH, num_patches=5, seed=1))
    code = ("import pickle, sys; ds = pickle.load(sys.stdin.buffer); "
            "print(int(ds[3].sum()), 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(ds),
                         capture_output=True, check=True).stdout.decode().split()
    assert out == [str(int(ds[3].sum())), "True"]


def _items(ds):
    if isinstance(ds, zt.ZarrDataset):
        return (ds[i] for i in range(len(ds)))
    return (t for batch in ds for t in batch)


def test_an_array_not_from_open_cannot_be_carried(store):
    location, _ = store
    a = zarrbuf.open(location)
    del a._open_args
    with pytest.raises(TypeError, match="give the dataset its location"):
        zt.ZarrDataset(a, PATCH, [[0, 0, 0]])
    with pytest.raises(TypeError, match="location"):
        zt.ZarrDataset(42, PATCH, [[0, 0, 0]])


def test_bad_patch_shapes_and_patches_outside_are_clear_errors(store):
    location, _ = store
    with pytest.raises(ValueError, match=r"patch_shape \(8, 12\) has 2 dimensions but the array has 3"):
        zt.ZarrDataset(location, (8, 12), [[0, 0]])
    with pytest.raises(ValueError, match=r"axis 1 needs 1 <= extent <= 40, got 41"):
        zt.PatchSampler(SHAPE, (1, 41, 4), num_patches=3)
    with pytest.raises(ValueError, match=r"axis 0 needs 1 <= extent <= 6, got 0"):
        zt.ZarrDataset(location, (0, 8, 12), [[0, 0, 0]])
    with pytest.raises(TypeError, match="patch_shape must be a sequence of integers"):
        zt.ZarrDataset(location, (1.5, 8, 12), [[0, 0, 0]])
    with pytest.raises(ValueError, match=r"patch 1 at origin \(0, 33, 0\) of shape \(1, 8, 12\) "
                                         r"lies outside the array of shape \(6, 40, 36\)"):
        zt.ZarrDataset(location, PATCH, [[0, 0, 0], [0, 33, 0], [-1, 0, 0]])
    with pytest.raises(ValueError, match=r"origins must be integers of shape \(N, 3\)"):
        zt.ZarrDataset(location, PATCH, [[0, 0]])
    other = zt.PatchSampler((6, 40, 40), PATCH, num_patches=2)
    with pytest.raises(ValueError, match="the sampler was made for"):
        zt.ZarrDataset(location, PATCH, other)
    with pytest.raises(ValueError, match="either num_patches"):
        zt.PatchSampler(SHAPE, PATCH)
    with pytest.raises(ValueError, match="rank"):
        zt.PatchSampler(SHAPE, PATCH, num_patches=2, rank=2, world_size=2)
    with pytest.raises(ValueError, match="device"):
        zt.ZarrDataset(location, PATCH, [[0, 0, 0]], device="tpu")
    with pytest.raises(ValueError, match="not both"):
        zt.ZarrDataset(location, PATCH, [[0, 0, 0]], cache_bytes=1, cache=zarrbuf.ChunkCache(1))
    with pytest.raises(ValueError, match="batch_size"):
        zt.ZarrIterableDataset(location, PATCH, [[0, 0, 0]], batch_size=0)


def test_importing_zarrbuf_does_not_import_torch():
    code = "import sys, zarrbuf; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True)
    assert out.stdout.decode().strip() == "False"


def test_rank_and_world_come_from_torch_distributed(store, tmp_path):
    import torch.distributed as dist

    location, _ = store
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'pg'}", rank=0, world_size=1)
    try:
        s = zt.PatchSampler(SHAPE, PATCH, num_patches=9)
        assert (s.rank, s.world_size) == (0, 1) and len(s) == 9
        assert (zt.PatchSampler(SHAPE, PATCH, num_patches=9, rank=1, world_size=3).rank) == 1
    finally:
        dist.destroy_process_group()
    counts = collections.Counter(list(zt.PatchSampler(SHAPE, PATCH, num_patches=9)))
    assert set(counts.values()) == {1}


def need_gpu():
    if zarrbuf.cuda_device_count() > 0 and torch.cuda.is_available():
        return
    if os.environ.get("ZARRBUF_REQUIRE_GPU") == "1":
        pytest.fail("ZARRBUF_REQUIRE_GPU=1 but no CUDA device is visible to zarrbuf and torch")
    pytest.skip("SKIPPED: CUDA tensors need a CUDA device (none here)")


def test_cuda_tensors_equal_the_cpu_ones(store):
    need_gpu()
    location, _ = store
    sampler = zt.PatchSampler(SHAPE, PATCH, num_patches=20, seed=6)
    cpu = zt.ZarrDataset(location, PATCH, sampler)
    gpu = zt.ZarrDataset(location, PATCH, sampler, device="cuda:0")
    t = gpu[3]
    assert t.device == torch.device("cuda", 0) and t.dtype == torch.int32 and t.shape == PATCH
    assert torch.equal(t.cpu(), cpu[3])
    (batch,) = DataLoader(gpu, batch_size=20, sampler=list(range(20)))
    assert batch.device.type == "cuda"
    assert torch.equal(batch.cpu(), torch.stack([cpu[i] for i in range(20)]))
    it = zt.ZarrIterableDataset(location, PATCH, sampler, device="cuda", batch_size=6, prefetch=4)
    got = list(DataLoader(it, batch_size=None))
    assert all(b.device.type == "cuda" for b in got)
    assert torch.equal(torch.cat(got).cpu(), torch.stack([cpu[i] for i in sampler]))


def _workers_read(ds, batch_size):
    ctx = torch.multiprocessing.get_context("fork")  # the default on Linux, made explicit
    return [t for b in DataLoader(ds, batch_size=batch_size, num_workers=2, timeout=60,
                                  multiprocessing_context=ctx) for t in b]


def test_forked_workers_read_after_the_parent_did(store):
    # The parent's threads do not survive fork(): each worker must open and read on its own.
    location, _ = store
    sampler = zt.PatchSampler(SHAPE, PATCH, num_patches=16, seed=8)
    ds = zt.ZarrDataset(location, PATCH, sampler)
    want = [ds[i] for i in range(16)] + ds.__getitems__(list(range(16)))  # parent reads
    got = _workers_read(ds, 4)
    assert torch.equal(torch.stack(got), torch.stack(want[:16]))
    it = zt.ZarrIterableDataset(location, PATCH, sampler, batch_size=4)
    assert sorted(map(origin_of, _workers_read(it, None))) == sorted(map(origin_of, want[:16]))


def test_forked_workers_read_an_object_store(monkeypatch):
    """s3:// through the async runtime, which a forked worker must build again."""
    # The server first: without one (the GPU machine) the test skips visibly, before it
    # needs boto3, which only the test environment with the server has.
    endpoint = server_url("ZARRBUF_TEST_S3_ENDPOINT")
    import boto3

    s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="testing",
                      aws_secret_access_key="testing", region_name="us-east-1")
    try:
        s3.create_bucket(Bucket="zarrbuf-torch")
    except s3.exceptions.BucketAlreadyOwnedByYou:
        pass
    prefix = f"{uuid.uuid4().hex}/a.zarr"
    store = zarr.storage.FsspecStore.from_url(
        f"s3://zarrbuf-torch/{prefix}",
        storage_options={"endpoint_url": endpoint, "key": "testing", "secret": "testing",
                         "client_kwargs": {"region_name": "us-east-1"}})
    z = zarr.create_array(store, shape=SHAPE, chunks=(2, 16, 16), dtype="i4")
    z[:] = np.arange(np.prod(SHAPE), dtype="i4").reshape(SHAPE)
    for k, v in {"AWS_ENDPOINT_URL": endpoint, "AWS_ALLOW_HTTP": "true",
                 "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "testing",
                 "AWS_SECRET_ACCESS_KEY": "testing"}.items():
        monkeypatch.setenv(k, v)
    sampler = zt.PatchSampler.grid(SHAPE, PATCH)
    ds = zt.ZarrDataset(f"s3://zarrbuf-torch/{prefix}", PATCH, sampler)
    assert np.array_equal(ds[5].numpy(), z[tuple(slice(o, o + p) for o, p in
                                                 zip(sampler.origins[5], PATCH, strict=True))])
    got = _workers_read(ds, 8)
    assert sorted(map(origin_of, got)) == sorted(tuple(int(v) for v in o) for o in sampler.origins)


def test_cache_bytes_gives_the_dataset_a_cache(store):
    location, z = store
    sampler = zt.PatchSampler(SHAPE, PATCH, num_patches=12, seed=2)
    ds = zt.ZarrDataset(location, PATCH, sampler, cache_bytes=1 << 20)
    cache = ds.array.cache
    assert cache is not None and cache.capacity == 1 << 20
    first = [ds[i] for i in range(12)]
    misses = cache.stats()["misses"]
    assert misses > 0
    second = ds.__getitems__(list(range(12)))  # epoch 2: every chunk from the cache
    stats = cache.stats()
    assert stats["misses"] == misses and stats["hits"] > 0
    for a, b, o in zip(first, second, sampler.origins, strict=True):
        assert torch.equal(a, b)
        assert np.array_equal(b.numpy(), z[tuple(slice(v, v + p) for v, p in zip(o, PATCH, strict=True))])
    it = zt.ZarrIterableDataset(location, PATCH, sampler, cache_bytes=1 << 20, batch_size=4)
    assert torch.equal(torch.cat(list(it)), torch.stack([first[i] for i in sampler]))
    assert it.array.cache.stats()["hits"] + it.array.cache.stats()["misses"] > 0


def test_a_shared_cache_is_one_per_process(store):
    location, _ = store
    cache = zarrbuf.ChunkCache(1 << 20)
    sampler = zt.PatchSampler(SHAPE, PATCH, num_patches=6, seed=3)
    a = zt.ZarrDataset(location, PATCH, sampler, cache=cache)
    b = zt.ZarrIterableDataset(location, PATCH, sampler, cache=cache)
    a[0]
    hits = cache.stats()["hits"]
    list(b)  # patch 0's chunks again, through the other dataset
    assert cache.stats()["hits"] > hits
    # In another process (here: unpickled), both get one new cache of the same size.
    a2, b2 = pickle.loads(pickle.dumps((a, b)))
    c2 = a2.array.cache
    assert c2.capacity == 1 << 20 and c2.stats()["misses"] == 0
    a2[0]
    before = cache.stats()
    list(b2)
    assert b2.array.cache.stats()["hits"] > 0
    assert c2.stats() == b2.array.cache.stats()  # the same cache
    assert cache.stats() == before  # the original saw none of it
    # An array opened with a cache hands its size on too.
    opened = zarrbuf.open(location, cache_bytes=1 << 19)
    d = zt.ZarrDataset(opened, PATCH, sampler)
    assert d.array is opened
    assert pickle.loads(pickle.dumps(d)).array.cache.capacity == 1 << 19


@pytest.mark.parametrize("context", [None, "fork", "forkserver"])
def test_dataloader_with_per_worker_caches(store, context):
    location, _ = store
    sampler = zt.PatchSampler.grid(SHAPE, PATCH, seed=5)
    probe = CacheProbe()
    ds = probe.ds = zt.ZarrDataset(location, PATCH, sampler, cache_bytes=1 << 20, transform=probe)
    workers = {"num_workers": 2, "timeout": 60, "persistent_workers": True,
               "multiprocessing_context": context} if context else {}
    loader = DataLoader(ds, batch_size=5, sampler=sampler, collate_fn=list, **workers)
    want = sorted(tuple(int(v) for v in o) for o in sampler.origins)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        items = [item for b in loader for item in b]
        assert sorted(origin_of(t) for t, _ in items) == want
        # Every worker reads through a cache of its own, forked ones too (zarrbuf builds its
        # thread pool again in a forked process).
        assert {cached for _, cached in items} == {True}


class CacheProbe:
    """A transform that pairs each patch with whether its process's dataset reads through a
    cache (a transform runs in the worker)."""

    ds = None

    def __call__(self, t):
        cache = self.ds.array.cache
        return t, cache is not None and cache.capacity == 1 << 20
