"""Reads into outputs that do not start on a cache line (numpy's large arrays start 16 bytes
into a page) go through aligned scratch slabs (src/read.rs, `read_realigned`): the results
must be exactly those of an aligned read, for whole outputs and windows of larger ones."""

from __future__ import annotations

import numpy as np
import pytest
import zarr

import zarrbuf


def _misaligned(shape, dtype, offset):
    dtype = np.dtype(dtype)
    n = int(np.prod(shape)) * dtype.itemsize
    raw = np.empty(n + 4096 + offset, np.uint8)
    start = (-raw.ctypes.data) % 4096 + offset
    out = raw[start : start + n].view(dtype).reshape(shape)
    out[...] = 0
    assert out.ctypes.data % 64 == offset % 64
    return out


@pytest.mark.parametrize("sharded", [False, True])
@pytest.mark.parametrize("offset", [16, 8, 64])
def test_misaligned_outputs_read_exactly(tmp_path, sharded, offset):
    shape = (96, 80, 48)
    rng = np.random.default_rng(3)
    data = rng.standard_normal(shape).astype("f4")
    kwargs = {"shards": (32, 40, 48), "chunks": (16, 20, 16)} if sharded else {"chunks": (16, 20, 16)}
    z = zarr.create_array(tmp_path / "a.zarr", shape=shape, dtype="f4", compressors=zarr.codecs.ZstdCodec(level=1), **kwargs)
    z[...] = data
    a = zarrbuf.open(str(tmp_path / "a.zarr"))
    inner = a._inner

    # The whole array into a misaligned output.
    out = _misaligned(shape, "f4", offset)
    inner.read_into([(0, 96), (0, 80), (0, 48)], [], out)
    np.testing.assert_array_equal(out, data)

    # A subset into a window of a larger misaligned parent (slabs cut at chunk boundaries,
    # rows at an offset inside the parent's rows).
    parent = _misaligned((100, 90, 60), "f4", offset)
    sel = (slice(5, 91), slice(3, 77), slice(1, 45))
    dst = parent[2:88, 7:81, 10:54]
    inner.read_into([(s.start, s.stop) for s in sel], [], dst)
    np.testing.assert_array_equal(dst, data[sel])
    untouched = parent.copy()
    untouched[2:88, 7:81, 10:54] = 0
    assert not untouched.any()

    # An integer index dropped from the output.
    row = _misaligned((80, 48), "f4", offset)
    inner.read_into([(17, 18), (0, 80), (0, 48)], [0], row)
    np.testing.assert_array_equal(row, data[17])


def test_pipeline_reads_into_misaligned_numpy_outputs(tmp_path):
    # zarr-python allocates its outputs with numpy (16 bytes into a page when large).
    shape = (128, 128, 64)
    data = np.arange(np.prod(shape), dtype="f4").reshape(shape)
    z = zarr.create_array(tmp_path / "b.zarr", shape=shape, chunks=(32, 32, 32), dtype="f4", compressors=None)
    z[...] = data
    with zarr.config.set({"codec_pipeline.path": "zarrbuf.ZarrbufCodecPipeline"}):
        zz = zarr.open_array(tmp_path / "b.zarr", mode="r")
        np.testing.assert_array_equal(zz[:], data)
        np.testing.assert_array_equal(zz[3:101, 5:, 7:60], data[3:101, 5:, 7:60])
        assert zz._async_array.codec_pipeline.stats["zarrbuf"] == 2
