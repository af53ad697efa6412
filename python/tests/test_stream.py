"""Array.read_stream: results in order and exact (every fixture), lazy pulls, integer
indices dropped as read() drops them, errors naming the selection, close() and the GIL."""

from __future__ import annotations

import itertools
import threading
import time

import numpy as np
import pytest
import zarrbuf
from conftest import FIXTURES, assert_same_bits


def test_every_fixture_streams_exactly(entry):
    a = zarrbuf.open(str(FIXTURES / entry["store"]), entry["path"])
    want = np.load(FIXTURES / entry["npy"])
    if want.ndim == 0:
        sels = [...]
        wants = [want]
    else:
        n = want.shape[0]
        step = max(1, n // 3)
        starts = list(range(0, n, step))[::-1]  # not the storage order
        sels = [(slice(s, s + step), ...) for s in starts] + [(n // 2, ...)]
        wants = [want[s : s + step] for s in starts] + [want[n // 2, ...]]
    got = list(a.read_stream(iter(sels), prefetch=2))
    assert len(got) == len(wants)
    for g, w in zip(got, wants, strict=True):
        if w.dtype.kind in "biufc":  # DLPack has no code for the others
            assert_same_bits(np.from_dlpack(g), w)
        assert_same_bits(np.asarray(g), w)


@pytest.fixture
def rows(tmp_path):
    import zarr

    z = zarr.create_array(tmp_path / "r.zarr", shape=(1000, 8), chunks=(100, 8), dtype="f4")
    z[:] = np.arange(8000, dtype="f4").reshape(1000, 8)
    return zarrbuf.open(str(tmp_path / "r.zarr")), z[:]


def test_minibatches_in_order_and_the_selections_pulled_lazily(rows):
    a, want = rows
    pulled = []

    def selections():
        for i in itertools.count():
            pulled.append(i)
            yield (slice(i * 10 % 1000, i * 10 % 1000 + 10), slice(None))

    stream = a.read_stream(selections(), prefetch=3)  # an endless iterator
    assert stream.in_flight == 0 and not pulled
    for k, batch in zip(range(50), stream):
        s = k * 10 % 1000
        assert_same_bits(np.asarray(batch), want[s : s + 10])
        assert stream.in_flight <= 3
        assert len(pulled) <= k + 1 + 3
    stream.close()
    assert stream.in_flight == 0
    assert list(stream) == []


def test_errors_name_the_selection_and_the_stream_goes_on(rows, tmp_path):
    a, want = rows
    # Chunk (3, 0) holds rows 300..400; make it unreadable.
    (tmp_path / "r.zarr" / "c" / "3" / "0").write_bytes(b"not a chunk")
    stream = a.read_stream([slice(0, 5), (slice(350, 360), slice(2, 4)), slice(5, 7)])
    assert_same_bits(np.asarray(next(stream)), want[0:5])
    with pytest.raises(zarrbuf.ZarrbufError, match=r"item 1 \(subset \[350\.\.360, 2\.\.4\]\).*chunk \[3, 0\]"):
        next(stream)
    assert_same_bits(np.asarray(next(stream)), want[5:7])
    with pytest.raises(StopIteration):
        next(stream)


def test_a_bad_selection_is_raised_after_the_items_before_it(rows):
    a, want = rows
    stream = a.read_stream([slice(0, 2), (slice(0, 4, 2),)])
    assert_same_bits(np.asarray(next(stream)), want[0:2])
    with pytest.raises(IndexError, match="step 1"):
        next(stream)
    with pytest.raises(ValueError, match="prefetch"):
        a.read_stream([slice(0, 1)], prefetch=0)


def test_the_gil_is_released_while_waiting(rows):
    a, _ = rows
    ticks = []
    stop = threading.Event()

    def ticker():
        while not stop.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.001)

    t = threading.Thread(target=ticker)
    t.start()
    try:
        n = sum(1 for _ in a.read_stream((slice(i, i + 100) for i in range(0, 900, 3)), prefetch=4))
    finally:
        stop.set()
        t.join()
    assert n == 300
    assert len(ticks) > 5, "another Python thread ran while the stream read"


def test_an_iterable_dataset_can_wrap_it(rows):
    a, want = rows

    class Batches:  # what torch.utils.data.IterableDataset subclasses look like
        def __iter__(self):
            return a.read_stream((slice(s, s + 64) for s in (128, 0, 512)), prefetch=2)

    got = [np.asarray(x) for x in Batches()]
    assert [g[0, 0] for g in got] == [128 * 8, 0, 512 * 8]
    assert_same_bits(got[2], want[512:576])
