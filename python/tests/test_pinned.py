"""zarrbuf.zarr.pinned_prototype: zarr-python buffers over zarrbuf's pinned host memory.

Without a GPU the first allocation must raise a clear ZarrbufError (checked here always);
the real path runs only where CUDA is present, and skips visibly otherwise (it fails
instead under ZARRBUF_REQUIRE_GPU=1)."""

from __future__ import annotations

import os

import numpy as np
import pytest
import zarr

import zarrbuf
from zarrbuf.zarr import is_pinned, pinned_empty, pinned_prototype

HAVE_GPU = zarrbuf.cuda_device_count() > 0


def need_gpu():
    if HAVE_GPU:
        return
    if os.environ.get("ZARRBUF_REQUIRE_GPU") == "1":
        pytest.fail("ZARRBUF_REQUIRE_GPU=1 but zarrbuf.cuda_device_count() is 0")
    pytest.skip("SKIPPED: pinned memory needs a CUDA device (none here)")


def test_prototype_is_a_zarr_buffer_prototype():
    from zarr.core.buffer import BufferPrototype

    assert isinstance(pinned_prototype, BufferPrototype)


@pytest.mark.skipif(HAVE_GPU, reason="checks the error without a GPU; this machine has one")
def test_without_a_gpu_allocation_is_a_clear_error(tmp_path):
    with pytest.raises(zarrbuf.ZarrbufError, match="(?i)cuda|gpu|driver|device"):
        pinned_empty((4, 4), "f4")
    a = zarr.create_array(tmp_path / "a.zarr", shape=(8,), chunks=(4,), dtype="i4", fill_value=0)
    a[:] = np.arange(8)
    with pytest.raises(zarrbuf.ZarrbufError, match="(?i)cuda|gpu|driver|device"):
        a.get_basic_selection(slice(None), prototype=pinned_prototype)


@pytest.mark.parametrize(
    "args, err",
    [
        (((2, -1), "f4"), ValueError),
        (((2, 2.5), "f4"), ValueError),
        (((2, 2), "f4", "K"), ValueError),
        (((2, 2), object), TypeError),
    ],
)
def test_bad_arguments_are_clear_errors(args, err):
    with pytest.raises(err):
        pinned_empty(*args)


@pytest.mark.parametrize("pipeline", ["zarrbuf.ZarrbufCodecPipeline", "zarr.core.codec_pipeline.BatchedCodecPipeline"])
def test_reads_land_in_pinned_memory(tmp_path, pipeline):
    need_gpu()
    data = np.arange(600, dtype="<f8").reshape(20, 30)
    with zarr.config.set({"codec_pipeline.path": pipeline}):
        a = zarr.create_array(tmp_path / "a.zarr", shape=data.shape, chunks=(7, 8), dtype="<f8", fill_value=-1)
        a[:] = data
        got = a.get_basic_selection((slice(3, 17), slice(None)), prototype=pinned_prototype)
    np.testing.assert_array_equal(got, data[3:17])
    assert is_pinned(got)
    f = pinned_empty((3, 5), "i2", "F")
    assert f.flags.f_contiguous and is_pinned(f) and not f.any()
    assert not is_pinned(np.zeros(3))
