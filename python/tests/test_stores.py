"""Zip files and groups (fixtures/stores.json): zarrbuf.open reads zip files, and
zarrbuf.list_hierarchy lists what zarr-python wrote and sees."""

from __future__ import annotations

import json

import numpy as np
import pytest

import zarrbuf

from conftest import FIXTURES, assert_same_bits

STORES = json.loads((FIXTURES / "stores.json").read_text())


@pytest.fixture(params=STORES, ids=[s["name"] for s in STORES])
def store(request):
    return request.param


def arrays(store):
    return [n for n in store["nodes"] if n["node_type"] == "array"]


def test_every_array_reads_exactly(store):
    location = str(FIXTURES / store["store"])
    for node in arrays(store):
        got = np.asarray(zarrbuf.open(location, node["path"]).read())
        assert_same_bits(got, np.load(FIXTURES / node["npy"]))


def test_listing_matches_zarr_python(store):
    import zarr

    location = str(FIXTURES / store["store"])
    h = zarrbuf.list_hierarchy(location)
    assert h["consolidated"] == store["consolidated"]
    assert [n["path"] for n in h["nodes"]] == [n["path"] for n in store["nodes"]]
    for got, want in zip(h["nodes"], store["nodes"]):
        assert got["node_type"] == want["node_type"]
        if got["node_type"] == "array":
            for field in ("shape", "data_type", "chunks", "shards", "chunks_stored",
                          "chunks_total", "stored_bytes"):
                assert got[field] == want[field], (got["path"], field)
            assert got["unreadable"] is None
    # zarr-python's own view of the same group.
    if store["kind"] == "zip":
        zs = zarr.storage.ZipStore(location, mode="r")
        prefix = "v3_group_consolidated.zarr" if store["name"] == "v3_zip_nested" else None
        group = zarr.open_group(store=zs, mode="r", path=prefix)
    else:
        zs = None
        group = zarr.open_group(location, mode="r")
    members = dict(group.members(max_depth=None))
    ours = {n["path"]: n for n in h["nodes"] if n["path"]}
    assert sorted(members) == sorted(ours)
    for path, member in members.items():
        if isinstance(member, zarr.Array):
            assert list(member.shape) == ours[path]["shape"]
    if zs is not None:
        zs.close()


def test_a_group_is_not_an_array(store):
    location = str(FIXTURES / store["store"])
    with pytest.raises(zarrbuf.ZarrbufError, match="is a zarr group, not an array") as e:
        zarrbuf.open(location)
    for node in arrays(store):
        assert node["path"] in str(e.value)
