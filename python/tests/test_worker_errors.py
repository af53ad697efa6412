"""Errors cross process boundaries: zarrbuf's exception classes pickle with their message
and attributes, and an error in a DataLoader worker (a damaged chunk) reaches the training
loop for the map-style and the iterable dataset, with and without workers. Every loader
with workers has a timeout, so a lost error fails the test instead of hanging it."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch  # not importorskip: the suite must fail without torch
import zarr
import zarrbuf
import zarrbuf.torch as zt
from torch.utils.data import DataLoader

SHAPE = (4, 16, 16)
CHUNKS = (2, 8, 8)
PATCH = (1, 8, 8)
DAMAGED = "c/1/0/1"  # the chunk overwritten with garbage


def error_classes() -> list[type]:
    """ZarrbufError and every subclass zarrbuf defines."""
    out = [zarrbuf.ZarrbufError]
    for cls in out:
        out.extend(c for c in cls.__subclasses__() if c.__module__.split(".")[0] == "zarrbuf")
    return out


@pytest.mark.parametrize("cls", error_classes(), ids=lambda c: c.__qualname__)
@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_exception_classes_pickle_with_message_and_attributes(cls, protocol):
    # Found by the name pickle records: where `import zarrbuf` users find it.
    assert f"{cls.__module__}.{cls.__qualname__}" == f"zarrbuf.{cls.__qualname__}"
    assert getattr(zarrbuf, cls.__qualname__) is cls
    e = cls("chunk [1, 0, 1] of data.zarr does not decode", 7)
    e.chunk = (1, 0, 1)
    e.key = DAMAGED
    e.add_note("while reading patch 3")
    back = pickle.loads(pickle.dumps(e, protocol=protocol))
    assert type(back) is cls
    assert back.args == e.args and str(back) == str(e)
    assert (back.chunk, back.key) == ((1, 0, 1), DAMAGED)
    assert back.__notes__ == ["while reading patch 3"]
    # The class itself (what a DataLoader worker sends, with the message as text).
    assert pickle.loads(pickle.dumps(cls, protocol=protocol)) is cls


def test_an_error_raised_by_zarrbuf_pickles(tmp_path):
    with pytest.raises(zarrbuf.ZarrbufError) as raised:
        zarrbuf.open(str(tmp_path / "nothing-here.zarr"))
    back = pickle.loads(pickle.dumps(raised.value))
    assert type(back) is zarrbuf.ZarrbufError and str(back) == str(raised.value)
    assert "nothing-here.zarr" in str(back)


@pytest.fixture(scope="module")
def damaged(tmp_path_factory):
    """A zstd int32 array of SHAPE in CHUNKS whose chunk DAMAGED holds garbage."""
    root = tmp_path_factory.mktemp("damaged") / "d.zarr"
    z = zarr.create_array(str(root), shape=SHAPE, chunks=CHUNKS, dtype="i4")
    z[...] = np.arange(np.prod(SHAPE), dtype="i4").reshape(SHAPE)
    chunk = root / DAMAGED
    assert chunk.is_file()
    chunk.write_bytes(b"not a zstd frame, just garbage bytes " * 4)
    return str(root)


def loader_kwargs(num_workers: int, context: str | None) -> dict:
    if num_workers == 0:
        return {}
    # A lost error hangs a map-style loader: the timeout turns that into a failure.
    return {"num_workers": num_workers, "timeout": 60, "multiprocessing_context": context}


def assert_names_the_chunk(error: BaseException) -> None:
    text = str(error)
    assert f"chunk [1, 0, 1] (key {DAMAGED})" in text, text


WORKERS = [(0, None), (2, None), (2, "spawn")]


@pytest.mark.parametrize(("num_workers", "context"), WORKERS)
@pytest.mark.parametrize("batch_size", [None, 4])
def test_map_style_dataset_raises_a_workers_error_in_the_loop(damaged, num_workers, context,
                                                             batch_size):
    sampler = zt.PatchSampler.grid(SHAPE, PATCH, shuffle=False)
    ds = zt.ZarrDataset(damaged, PATCH, sampler)
    loader = DataLoader(ds, batch_size=batch_size, sampler=sampler,
                        **loader_kwargs(num_workers, context))
    with pytest.raises(zarrbuf.ZarrbufError) as raised:
        for _ in loader:
            pass
    assert_names_the_chunk(raised.value)


@pytest.mark.parametrize(("num_workers", "context"), WORKERS)
@pytest.mark.parametrize("batch_size", [None, 4])
def test_iterable_dataset_raises_a_workers_error_instead_of_ending_the_epoch(
        damaged, num_workers, context, batch_size):
    sampler = zt.PatchSampler.grid(SHAPE, PATCH, shuffle=False)
    ds = zt.ZarrIterableDataset(damaged, PATCH, sampler, batch_size=batch_size, prefetch=3)
    loader = DataLoader(ds, batch_size=None, **loader_kwargs(num_workers, context))
    seen = []
    with pytest.raises(zarrbuf.ZarrbufError) as raised:
        for item in loader:
            seen.append(item)
    assert_names_the_chunk(raised.value)
    # Patches before the damaged chunk still came, correct.
    patches = [p for item in seen for p in (item if batch_size else [item])]
    for p in patches:
        first = int(p.reshape(-1)[0])
        o = np.unravel_index(first, SHAPE)
        want = np.arange(np.prod(SHAPE), dtype="i4").reshape(SHAPE)[
            o[0]:o[0] + 1, o[1]:o[1] + 8, o[2]:o[2] + 8]
        assert np.array_equal(p.numpy(), want)


def test_an_error_a_worker_cannot_send_arrives_as_runtime_error(damaged):
    class LocalError(Exception):  # defined here: pickle cannot find it by name
        pass

    def transform(t: torch.Tensor) -> torch.Tensor:
        raise LocalError("the transform refused a patch")

    sampler = zt.PatchSampler.grid(SHAPE, PATCH, shuffle=False)
    for ds, kwargs in [
        (zt.ZarrDataset(damaged, PATCH, sampler, transform=transform), {"sampler": sampler}),
        (zt.ZarrIterableDataset(damaged, PATCH, sampler, transform=transform), {}),
    ]:
        # fork: the local transform is not pickled to the workers.
        loader = DataLoader(ds, batch_size=None, num_workers=2, timeout=60,
                            multiprocessing_context="fork", **kwargs)
        with pytest.raises(RuntimeError, match="LocalError .*the transform refused a patch"):
            for _ in loader:
                pass
        # In this process the error is itself.
        with pytest.raises(LocalError):
            next(iter(DataLoader(ds, batch_size=None, **kwargs)))
