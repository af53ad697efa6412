"""zarr-python's GPU mode (``zarr.config.enable_gpu()``: CuPy buffers) with the zarrbuf
pipeline: zarrbuf decodes straight into CuPy's device memory and writes from it.

Needs CuPy and a CUDA device: without them the tests skip visibly, and fail instead under
ZARRBUF_REQUIRE_GPU=1 (how scripts/gpu-test run-python runs them)."""

from __future__ import annotations

import os

import numpy as np
import pytest
import zarr

import zarrbuf
from conftest import FIXTURES, MANIFEST, assert_same_bits, fixture_ids, native

PIPELINE = {"codec_pipeline.path": "zarrbuf.ZarrbufCodecPipeline"}
READABLE = [
    e
    for e in MANIFEST
    if "zarr-python" in e.get("verified_by", [])
    and np.dtype(e["npy_dtype"]).kind in "biuf"
    and (e.get("endian") in (None, "little"))
]


def cupy_or_skip():
    try:
        import cupy

        if zarrbuf.cuda_device_count() > 0 and cupy.cuda.runtime.getDeviceCount() > 0:
            return cupy
        why = "no CUDA device"
    except Exception as e:  # ImportError, or CUDA errors from CuPy without a driver
        why = f"CuPy is not usable ({type(e).__name__}: {e})"
    if os.environ.get("ZARRBUF_REQUIRE_GPU") == "1":
        pytest.fail(f"ZARRBUF_REQUIRE_GPU=1 but {why}")
    pytest.skip(f"SKIPPED: the CuPy pipeline path needs CuPy and a GPU ({why})")


@pytest.mark.parametrize("entry", READABLE, ids=fixture_ids(READABLE))
def test_fixtures_decode_into_cupy_buffers(entry):
    cupy = cupy_or_skip()
    want = np.load(FIXTURES / entry["npy"])
    with zarr.config.enable_gpu(), zarr.config.set(PIPELINE):
        z = zarr.open_array(str(FIXTURES / entry["store"]), path=entry["path"] or None, mode="r")
        pipeline = z._async_array.codec_pipeline
        got = z[...]
        if want.ndim == 0:
            # zarr-python hands 0-d results back as NumPy scalars, GPU mode or not.
            got = cupy.asarray(got)
        assert isinstance(got, cupy.ndarray), type(got)
        assert_same_bits(native(cupy.asnumpy(got)), want)
        if want.ndim and want.shape[0] > 2:
            assert_same_bits(native(cupy.asnumpy(z[1:-1])), want[1:-1])
    if not (z.metadata.zarr_format == 2 and z.metadata.fill_value is None):
        assert pipeline.stats["zarrbuf"] > 0, pipeline.stats


@pytest.mark.parametrize("sharded", [False, True])
def test_cupy_writes_read_back_by_the_default_pipeline(tmp_path, sharded):
    cupy = cupy_or_skip()
    want = np.random.default_rng(3).standard_normal((37, 29)).astype("f4")
    path = str(tmp_path / "w.zarr")
    with zarr.config.enable_gpu(), zarr.config.set(PIPELINE):
        z = zarr.create_array(
            path, shape=want.shape, chunks=(4, 8) if sharded else (8, 8),
            shards=(8, 16) if sharded else None, dtype="f4",
            compressors=[zarr.codecs.ZstdCodec()],
        )
        z[...] = cupy.asarray(want)
        z[3:5, 7] = cupy.float32(2.5)  # a scalar broadcast over a region
        pipeline = z._async_array.codec_pipeline
        assert pipeline.stats["zarrbuf"] > 0, pipeline.stats
    want[3:5, 7] = 2.5
    back = zarr.open_array(path, mode="r")[...]
    assert_same_bits(np.asarray(back), want)
