"""zarr-python with zarrbuf's pipeline on icechunk sessions: a read-only session's batches
take zarrbuf's path (the session handed over whole, so zarrbuf reads the snapshot the
session sees), a writable session's go to zarr-python with their reason, and a session over
icechunk's own S3 client (which zarrbuf does not have) falls back too. Every result is
compared exactly with what the icechunk package wrote (fixtures/icechunk.json)."""

from __future__ import annotations

import json
import shutil
import uuid

import numpy as np
import pytest
import zarr

import zarrbuf.pipeline as zp
from conftest import FIXTURES, assert_same_bits, native, server_url

icechunk = pytest.importorskip("icechunk", reason="icechunk is in fixtures/requirements.txt")

PIPELINE = {"codec_pipeline.path": "zarrbuf.ZarrbufCodecPipeline"}
SPEC = json.loads((FIXTURES / "icechunk.json").read_text())
REPO = FIXTURES / SPEC["repo"]
WRITABLE = "a writable icechunk session (its uncommitted changes live in Python)"


def _pipeline(a: zarr.Array):
    p = a._async_array.codec_pipeline
    assert type(p).__name__ == "ZarrbufCodecPipeline"
    return p


def _session(repo, version: dict):
    if "branch" in version:
        return repo.readonly_session(branch=version["branch"])
    if "tag" in version:
        return repo.readonly_session(tag=version["tag"])
    return repo.readonly_session(snapshot_id=version["snapshot"])


@pytest.mark.parametrize(
    "version",
    SPEC["versions"],
    ids=lambda v: "-".join(f"{k}={v[k]}" for k in ("branch", "tag", "snapshot") if k in v),
)
def test_read_only_sessions_read_through_zarrbuf_at_every_version(version):
    repo = icechunk.Repository.open(icechunk.local_filesystem_storage(str(REPO)))
    session = _session(repo, version)
    route, why = zp._store_route(session.store)
    assert why is None and route.session is not None
    assert route.root == f"icechunk snapshot {session.snapshot_id}"
    with zarr.config.set(PIPELINE):
        for path, npy in version["arrays"].items():
            want = np.load(FIXTURES / npy)
            z = zarr.open_array(session.store, path=path, mode="r")
            assert_same_bits(native(np.asarray(z[...])), want)
            assert_same_bits(native(np.asarray(z[2:9, 3])), want[2:9, 3])
            p = _pipeline(z)
            assert p.stats == {"zarrbuf": 2, "fallback": 0}, (p.stats, p.reasons, p.open_errors)


def test_writable_sessions_fall_back_and_their_commit_reads_through_zarrbuf(tmp_path):
    shutil.copytree(REPO, tmp_path / "repo")
    repo = icechunk.Repository.open(icechunk.local_filesystem_storage(str(tmp_path / "repo")))
    session = repo.writable_session("main")
    assert zp._store_route(session.store) == (None, WRITABLE)
    want = (np.arange(12 * 10, dtype="<i4").reshape(12, 10) * 7) % 1000
    before = zp.STATS_REASONS.get(WRITABLE, 0)
    with zarr.config.set(PIPELINE):
        a = zarr.create_array(session.store, name="w", shape=want.shape, chunks=(4, 4), dtype=want.dtype, fill_value=0)
        a[...] = want
        # zarr-python reads the session's uncommitted chunks.
        assert_same_bits(a[...], want)
        p = _pipeline(a)
    assert p.stats == {"zarrbuf": 0, "fallback": 2}
    assert p.reasons == {WRITABLE: 2}
    assert zp.STATS_REASONS[WRITABLE] - before == 2
    snapshot = session.commit("w through zarr-python")
    # The committed snapshot, read-only: zarrbuf's path, the same data.
    ro = repo.readonly_session(snapshot_id=snapshot)
    with zarr.config.set(PIPELINE):
        b = zarr.open_array(ro.store, path="w", mode="r")
        assert_same_bits(b[...], want)
        q = _pipeline(b)
    assert q.stats == {"zarrbuf": 1, "fallback": 0}, (q.stats, q.reasons, q.open_errors)
    # Writes into a read-only session are refused (by icechunk), as without zarrbuf.
    with zarr.config.set(PIPELINE), pytest.raises(Exception, match="read-only store"):
        b[0:2, 0:2] = 0
    assert q.reasons == {"a read-only store (zarr-python raises its error)": 1}


def _read_back(storage):
    """Makes a new repository in `storage` holding one array, commits it, reads it through
    the pipeline from a read-only session at that snapshot; the pipeline."""
    session = icechunk.Repository.create(storage).writable_session("main")
    want = np.random.default_rng(5).standard_normal((20, 16)).astype("<f4")
    z = zarr.create_array(session.store, name="t", shape=want.shape, chunks=(8, 8), dtype=want.dtype)
    z[...] = want
    snapshot = session.commit("t")
    ro = icechunk.Repository.open(storage).readonly_session(snapshot_id=snapshot)
    with zarr.config.set(PIPELINE):
        z = zarr.open_array(ro.store, path="t", mode="r")
        assert_same_bits(z[...], want)
        return _pipeline(z)


def _object_store_s3(endpoint: str, prefix: str):
    """icechunk storage through object_store's S3 client (what zarrbuf builds in)."""
    return icechunk.Storage.new_s3_object_store(
        icechunk.S3Options(region="us-east-1", endpoint_url=endpoint, allow_http=True),
        "icechunk-py",
        prefix,
        icechunk.s3_static_credentials(access_key_id="testing", secret_access_key="testing"),
    )


def _bucket(endpoint: str) -> None:
    import boto3

    s3 = boto3.client(
        "s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing"
    )
    try:
        s3.create_bucket(Bucket="icechunk-py")
    except s3.exceptions.BucketAlreadyOwnedByYou:
        pass


def test_sessions_over_object_store_s3_read_through_zarrbuf():
    endpoint = server_url("ZARRBUF_TEST_S3_ENDPOINT")
    _bucket(endpoint)
    storage = _object_store_s3(endpoint, f"os-{uuid.uuid4().hex}")
    p = _read_back(storage)
    assert p.stats == {"zarrbuf": 1, "fallback": 0}, (p.stats, p.reasons, p.open_errors)


def test_sessions_over_icechunks_own_s3_client_fall_back():
    endpoint = server_url("ZARRBUF_TEST_S3_ENDPOINT")
    _bucket(endpoint)
    storage = icechunk.s3_storage(
        bucket="icechunk-py",
        prefix=f"s3-{uuid.uuid4().hex}",
        endpoint_url=endpoint,
        region="us-east-1",
        allow_http=True,
        force_path_style=True,
        access_key_id="testing",
        secret_access_key="testing",
    )
    p = _read_back(storage)
    assert p.stats == {"zarrbuf": 0, "fallback": 1}
    assert p.reasons == {"a store zarrbuf cannot open": 1}
    assert "icechunk session" in p.open_errors["t"], p.open_errors
