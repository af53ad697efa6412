"""DLPack and array-interface hand-off with numpy, both ways, without copies."""

from __future__ import annotations

import gc

import numpy as np
import pytest
import zarr
import zarrbuf


@pytest.fixture
def arr(tmp_path):
    path = str(tmp_path / "d.zarr")
    z = zarr.create_array(path, shape=(6, 5, 4), chunks=(4, 2, 3), dtype="f4")
    z[...] = np.arange(120, dtype="f4").reshape(6, 5, 4)
    return zarrbuf.open(path), np.arange(120, dtype="f4").reshape(6, 5, 4)


def addr(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def test_numpy_from_dlpack_shares_memory(arr):
    a, want = arr
    r = a.read((slice(1, 5), 2))
    assert r.__dlpack_device__() == (1, 0)
    x = np.from_dlpack(r)
    y = np.asarray(r)
    assert np.array_equal(x, want[1:5, 2]) and np.array_equal(y, want[1:5, 2])
    assert addr(x) == addr(y)  # both views of zarrbuf's memory
    x[0, 0] = -5  # writable, seen through every view
    assert y[0, 0] == -5


def test_the_owner_outlives_the_result(arr):
    a, want = arr
    x = np.from_dlpack(a.read())
    gc.collect()
    assert np.array_equal(x, want)
    y = np.asarray(a.read(0))
    gc.collect()
    assert np.array_equal(y, want[0])


def test_capsules_versioned_legacy_and_unconsumed(arr):
    a, _ = arr
    r = a.read()
    for kwargs, name in [
        ({"max_version": (1, 0)}, "dltensor_versioned"),
        ({"max_version": (1, 3)}, "dltensor_versioned"),
        ({}, "dltensor"),
        ({"max_version": (0, 8)}, "dltensor"),
    ]:
        cap = r.__dlpack__(**kwargs)
        assert f'"{name}"' in repr(cap)
        del cap  # never consumed: the capsule's destructor frees the tensor
    gc.collect()
    with pytest.raises(BufferError, match="copy"):
        r.__dlpack__(copy=True)
    with pytest.raises(BufferError, match="device"):
        r.__dlpack__(dl_device=(2, 0))
    assert r.__dlpack__(dl_device=(1, 0), copy=False) is not None


def test_views_with_offsets_and_strides_round_trip(arr):
    a, want = arr
    base = np.arange(200, dtype="f8").reshape(10, 20)
    view = base[2:8:2, 3:15:3].T  # offset, non-contiguous, transposed
    z = zarrbuf.from_dlpack(view)
    assert z.shape == view.shape
    assert z.strides == view.strides
    back = np.from_dlpack(z)
    assert np.array_equal(back, view)
    assert addr(back) == addr(view)
    back[0, 0] = 1e9
    assert base[2, 3] == 1e9


def test_every_dlpack_dtype_round_trips():
    for dt in ["bool", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8", "c8", "c16"]:
        src = np.ones((3, 2), dtype=dt)
        z = zarrbuf.from_dlpack(src)
        assert np.dtype(z.dtype) == src.dtype
        assert np.array_equal(np.from_dlpack(z), src)
        assert np.array_equal(np.asarray(z), src)


def test_types_without_dlpack_codes_are_clear_errors(tmp_path):
    path = str(tmp_path / "t.zarr")
    z = zarr.create_array(path, shape=(3,), chunks=(2,), dtype="M8[s]")
    z[...] = np.array([1, 2, 3], dtype="M8[s]")
    r = zarrbuf.open(path).read()
    # numpy views it through the array interface...
    assert np.array_equal(np.asarray(r), np.array([1, 2, 3], dtype="M8[s]"))
    # ...but DLPack has no datetime type: an error, not a silent copy.
    with pytest.raises(zarrbuf.ZarrbufError, match="no DLPack data type"):
        r.__dlpack__(max_version=(1, 0))


def test_read_only_sources_stay_read_only():
    src = np.arange(6, dtype="i4")
    src.flags.writeable = False
    z = zarrbuf.from_dlpack(src)  # numpy marks it READ_ONLY
    back = np.from_dlpack(z)
    assert not back.flags.writeable
    assert np.array_equal(back, src)


def test_device_results_refuse_the_host_interface(arr):
    a, _ = arr
    r = a.read()
    assert r.device == "cpu" and r.memory == "host"
    assert not hasattr(r, "__cuda_array_interface__")
    if zarrbuf.cuda_device_count() == 0:
        return
    g = a.read(device="cuda")
    assert g.__dlpack_device__() == (2, 0)
    assert not hasattr(g, "__array_interface__")
    assert g.__cuda_array_interface__["shape"] == (6, 5, 4)
