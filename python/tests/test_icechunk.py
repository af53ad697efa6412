"""Icechunk repositories (fixtures/icechunk.json): zarrbuf.open reads every array of the
repository the icechunk package wrote at every version it lists, and says clearly when a
version does not exist."""

from __future__ import annotations

import json

import numpy as np
import pytest

import zarrbuf

from conftest import FIXTURES, assert_same_bits

SPEC = json.loads((FIXTURES / "icechunk.json").read_text())
REPO = str(FIXTURES / SPEC["repo"])


def version_kwargs(v):
    return {k: v[k] for k in ("branch", "tag", "snapshot") if k in v}


@pytest.mark.parametrize("version", SPEC["versions"], ids=lambda v: "-".join(
    f"{k}={v[k]}" for k in ("branch", "tag", "snapshot") if k in v))
def test_every_array_reads_exactly_at_every_version(version):
    for path, npy in version["arrays"].items():
        a = zarrbuf.open(REPO, path, **version_kwargs(version))
        assert_same_bits(np.asarray(a.read()), np.load(FIXTURES / npy))
        assert_same_bits(np.asarray(a[2:9, 3:7]), np.load(FIXTURES / npy)[2:9, 3:7])


def test_default_is_main_and_the_listing_takes_a_version():
    main = SPEC["versions"][0]
    assert main["branch"] == "main"
    got = np.asarray(zarrbuf.open(REPO, "temperature").read())
    assert_same_bits(got, np.load(FIXTURES / main["arrays"]["temperature"]))
    h = zarrbuf.list_hierarchy(REPO, branch="dev")
    assert [n["path"] for n in h["nodes"]] == ["", "g", "g/labels", "temperature"]


def test_bad_versions_are_clear_errors():
    with pytest.raises(zarrbuf.ZarrbufError, match='no branch "nope".*dev, main'):
        zarrbuf.open(REPO, "temperature", branch="nope")
    with pytest.raises(zarrbuf.ZarrbufError, match="at most one of branch, tag and snapshot"):
        zarrbuf.open(REPO, "temperature", branch="main", tag="v1")
    with pytest.raises(zarrbuf.ZarrbufError, match="not an icechunk repository"):
        zarrbuf.open(str(FIXTURES / "data/v3_int8.zarr"), tag="v1")
    with pytest.raises(zarrbuf.ZarrbufError, match="--branch"):
        zarrbuf.open(REPO, "temperature", tag="v1")[0:2, 0:2] = np.zeros((2, 2), "f4")
