"""Shared fixtures: the repository's zarr fixtures (fixtures/manifest.json)."""

from __future__ import annotations

import json
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
