"""Shared fixtures: the repository's zarr fixtures (fixtures/manifest.json)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"
MANIFEST = json.loads((FIXTURES / "manifest.json").read_text())


def fixture_ids(entries):
    return [e["name"] for e in entries]


def native(a: np.ndarray) -> np.ndarray:
    """`a` in native byte order (same values)."""
    if a.dtype.isnative or a.dtype.byteorder == "|":
        return a
    return a.astype(a.dtype.newbyteorder("="))


def assert_same_bits(got: np.ndarray, want: np.ndarray) -> None:
    """Exact equality, bit for bit (NaN payloads, -0.0), in native byte order."""
    want = native(want)
    assert got.shape == want.shape
    assert got.dtype.itemsize == want.dtype.itemsize, (got.dtype, want.dtype)
    assert np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(want).tobytes()


@pytest.fixture(params=MANIFEST, ids=fixture_ids(MANIFEST))
def entry(request):
    return request.param


def server_url(variable: str) -> str:
    """The URL of a local test server (scripts/start-test-servers.sh exports them): skips
    the test without it, fails it instead under ZARRBUF_REQUIRE_SERVERS=1 (CI)."""
    url = os.environ.get(variable)
    if url:
        return url
    if os.environ.get("ZARRBUF_REQUIRE_SERVERS") == "1":
        pytest.fail(f"ZARRBUF_REQUIRE_SERVERS=1 but {variable} is not set")
    pytest.skip(f"no local test server: run `source <(scripts/start-test-servers.sh)` first ({variable})")


def handled_by_zarrbuf(want: np.ndarray, z) -> bool | None:
    """Whether zarrbuf takes the batches (the others go to zarr-python's own pipeline);
    None where either is right: zarrs takes some v2 arrays with a null fill value (float)
    and refuses others (complex), as zarrs-python sees too."""
    dt = z.dtype.to_native_dtype() if hasattr(z.dtype, "to_native_dtype") else np.dtype(z.dtype)
    if z.metadata.zarr_format == 2 and z.metadata.fill_value is None:
        return None
    return dt.kind in "biufc" and dt.isnative
