"""zarrbuf writes, read back by zarr-python's default pipeline."""

from __future__ import annotations

import numpy as np
import pytest
import zarr
import zarrbuf

DTYPES = ["bool", "i1", "u2", "i4", "u8", "f2", "f4", "f8", "c8", "c16", "M8[s]", "S3", "U2"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("fmt", [2, 3])
def test_writes_read_back_by_zarr_python(tmp_path, dtype, fmt):
    path = str(tmp_path / "w.zarr")
    dt = np.dtype(dtype)
    z = zarr.create_array(path, shape=(7, 5), chunks=(3, 2), dtype=dt, zarr_format=fmt)
    rng = np.random.default_rng(0)
    raw = rng.integers(0, 255, size=(7, 5 * dt.itemsize), dtype=np.uint8)
    want = np.ascontiguousarray(raw).view(dt).reshape(7, 5)
    if dt.kind == "b":
        want = want.view(np.uint8) % 2 == 1
    if dt.kind == "f" or dt.kind == "c":
        want = np.arange(35).reshape(7, 5).astype(dt) / 3
    if dt.kind == "M":
        want = np.arange(35).reshape(7, 5).astype(dt)
    if dt.kind in "SU":
        want = np.array([str(i)[:2] for i in range(35)], dtype=dt).reshape(7, 5)
    a = zarrbuf.open(path)
    a.write(..., want)
    a[1:3, 4] = want[0, :2]  # a cast-free partial write across chunks
    want = want.copy()
    want[1:3, 4] = want[0, :2]
    with zarr.config.set({"codec_pipeline.path": "zarr.core.codec_pipeline.BatchedCodecPipeline"}):
        back = zarr.open_array(path, mode="r")[...]
    assert np.array_equal(back, want)


def test_writes_broadcast_and_cast_like_numpy(tmp_path):
    path = str(tmp_path / "b.zarr")
    zarr.create_array(path, shape=(4, 6), chunks=(3, 4), dtype="f8", fill_value=-1)
    a = zarrbuf.open(path)
    a[1:3, ...] = 2          # a scalar
    a[0] = np.arange(6)      # int64 cast to float64
    a[3, 1:4] = [[7.5]]      # broadcast from (1, 1)
    want = np.full((4, 6), -1.0)
    want[1:3] = 2
    want[0] = np.arange(6)
    want[3, 1:4] = 7.5
    assert np.array_equal(zarr.open_array(path, mode="r")[...], want)


def test_big_endian_and_strided_sources(tmp_path):
    path = str(tmp_path / "e.zarr")
    zarr.create_array(path, shape=(6, 6), chunks=(4, 4), dtype="<i4")
    a = zarrbuf.open(path)
    src = np.arange(72, dtype=">i4").reshape(6, 12)[:, ::2]  # non-native and strided
    a[...] = src
    assert np.array_equal(zarr.open_array(path, mode="r")[...], src)


def test_write_shape_mismatch_is_an_error(tmp_path):
    path = str(tmp_path / "m.zarr")
    zarr.create_array(path, shape=(4,), chunks=(2,), dtype="u1")
    with pytest.raises(ValueError):
        zarrbuf.open(path)[0:3] = np.zeros(2, dtype="u1")
