"""zarrbuf.open on every fixture, compared with its .npy exactly; selections; errors."""

from __future__ import annotations

import numpy as np
import pytest
import zarrbuf
from conftest import FIXTURES, assert_same_bits


def load(entry):
    return np.load(FIXTURES / entry["npy"])


def test_every_fixture_reads_exactly(entry):
    a = zarrbuf.open(str(FIXTURES / entry["store"]), entry["path"])
    want = load(entry)
    assert a.shape == tuple(entry["shape"])
    got = np.asarray(a.read())
    assert_same_bits(got, want)
    # A sub-box and an integer index on the first axis.
    if want.ndim and want.shape[0] > 1:
        n = want.shape[0]
        assert_same_bits(np.asarray(a.read(slice(1, n - 1))), want[1 : n - 1])
        assert_same_bits(np.asarray(a.read((n // 2, ...))), want[n // 2, ...])


def test_dtype_is_numpys(entry):
    a = zarrbuf.open(str(FIXTURES / entry["store"]), entry["path"])
    want = load(entry)
    if entry["dtype"] == "bfloat16":
        assert a.dtype == "|V2"
    else:
        assert np.dtype(a.dtype) == want.dtype.newbyteorder("=")


def test_selections_match_numpy(tmp_path):
    path = tmp_path / "s.zarr"
    import zarr

    z = zarr.create_array(str(path), shape=(9, 8, 7), chunks=(4, 3, 5), dtype="i4")
    want = np.arange(9 * 8 * 7, dtype="i4").reshape(9, 8, 7)
    z[...] = want
    a = zarrbuf.open(str(path))
    for sel in [
        ...,
        (slice(None),),
        (2,),
        (-1, ..., 3),
        (slice(1, 8), slice(-3, None), 4),
        (..., slice(2, 2)),
        (8, 7, 6),
        (slice(5, 100),),
    ]:
        got = a.read(sel)
        assert got.shape == want[sel].shape, sel
        assert np.array_equal(np.asarray(got), want[sel]), sel
        assert np.array_equal(a[sel], want[sel])


def test_unsupported_selections_are_index_errors(tmp_path):
    import zarr

    zarr.create_array(str(tmp_path / "e.zarr"), shape=(4, 4), chunks=(2, 2), dtype="u1")
    a = zarrbuf.open(str(tmp_path / "e.zarr"))
    for sel, msg in [
        ((slice(0, 4, 2),), "step 1"),
        ((5,), "out of bounds"),
        ((0, 0, 0), "too many indices"),
        ((..., ...), "single ellipsis"),
        (([0, 1],), "unsupported index"),
        ((True,), "boolean"),
    ]:
        with pytest.raises(IndexError, match=msg):
            a.read(sel)


def test_errors_are_zarrbuf_errors_with_its_message(tmp_path):
    with pytest.raises(zarrbuf.ZarrbufError, match="no such directory"):
        zarrbuf.open(str(tmp_path / "missing.zarr"))
    (tmp_path / "empty.zarr").mkdir()
    with pytest.raises(zarrbuf.ZarrbufError):
        zarrbuf.open(str(tmp_path / "empty.zarr"))
    import zarr

    zarr.create_array(str(tmp_path / "c.zarr"), shape=(4,), chunks=(2,), dtype="u1")
    a = zarrbuf.open(str(tmp_path / "c.zarr"))
    with pytest.raises(zarrbuf.ZarrbufError, match="cuda"):
        # No GPU on CI machines; on a GPU machine ask for a device that does not exist.
        a.read(device=f"cuda:{zarrbuf.cuda_device_count() + 7}")
    with pytest.raises(zarrbuf.ZarrbufError, match="unknown device"):
        a.read(device="tpu")


def test_decode_choice_is_taken_and_checked(tmp_path):
    import zarr
    from zarr.codecs import ZstdCodec

    z = zarr.create_array(
        str(tmp_path / "z.zarr"), shape=(40, 30), chunks=(16, 16), dtype="f4",
        compressors=ZstdCodec(level=1),
    )
    want = np.arange(1200, dtype="f4").reshape(40, 30)
    z[:] = want
    a = zarrbuf.open(str(tmp_path / "z.zarr"))
    devices = ["cpu"] + (["cuda"] if zarrbuf.cuda_device_count() > 0 else [])
    for device in devices:
        for decode in ["auto", "cpu", "gpu", "both"]:
            got = a.read(np.s_[3:37, 5:29], device=device, decode=decode)
            host = np.from_dlpack(got.to_host())
            np.testing.assert_array_equal(host, want[3:37, 5:29])
    with pytest.raises(ValueError, match='unknown decode choice "fast"'):
        a.read(decode="fast")
