"""zarr-python with zarrbuf's pipeline on the stores zarr users keep their data in: obstore
(``zarr.storage.ObjectStore``: local, S3 against the local moto server, HTTP against the
local range server, and the GCS and Azure mappings) and read-only ``ZipStore``s. Every
result is compared exactly; the batch counters say whether zarrbuf's own path or the
fallback did the work, and the fallback's reasons are counted."""

from __future__ import annotations

import uuid
import zipfile
from datetime import timedelta

import numpy as np
import pytest
import zarr

import zarrbuf
import zarrbuf.pipeline as zp
from conftest import FIXTURES, MANIFEST, assert_same_bits, fixture_ids, handled_by_zarrbuf, native, server_url

obstore = pytest.importorskip("obstore", reason="obstore is in fixtures/requirements.txt")
from obstore.store import (  # noqa: E402
    AzureStore,
    GCSStore,
    HTTPStore,
    LocalStore,
    MemoryStore,
    S3Store,
)

PIPELINE = {"codec_pipeline.path": "zarrbuf.ZarrbufCodecPipeline"}
DEFAULT = {"codec_pipeline.path": "zarr.core.codec_pipeline.BatchedCodecPipeline"}
READABLE = [e for e in MANIFEST if "zarr-python" in e.get("verified_by", [])]
HTTP_FIXTURES = [
    e
    for e in MANIFEST
    if e["name"]
    in (
        "v3_int32_blosc_lz4",
        "v3_shard_end",
        "v3_shard_3d_transpose",
        "v3_nested_group",
        "v3_chunkkey_v2",
        "v2_f8_blosc_lz4",
    )
]


def _data(shape=(37, 29), dtype="<f4", seed=3) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape) * 100).astype(dtype)


def _pipeline(a: zarr.Array):
    p = a._async_array.codec_pipeline
    assert type(p).__name__ == "ZarrbufCodecPipeline"
    return p


def _route(store):
    return zp._store_route(store)


def _write_read(store, *, sharded=False, fmt=3):
    """Writes, overwrites a box and reads back through the pipeline: (array, expected)."""
    want = _data()
    with zarr.config.set(PIPELINE):
        a = zarr.create_array(
            store,
            name="g/x",
            shape=want.shape,
            chunks=(4, 5) if sharded else (8, 10),
            shards=(8, 10) if sharded else None,
            dtype=want.dtype,
            fill_value=0,
            zarr_format=fmt,
            compressors=[zarr.codecs.ZstdCodec(level=1)] if fmt == 3 else None,
        )
        a[...] = want
        a[3:30, 2] = -1
        a[5:9, 11:27] = want[5:9, 11:27] * 2
        want[3:30, 2] = -1
        want[5:9, 11:27] *= 2
        assert_same_bits(a[...], want)
        assert_same_bits(a[1:-1, 4], want[1:-1, 4])
    return a, want


# --- obstore LocalStore -------------------------------------------------------------------


@pytest.mark.parametrize("entry", READABLE, ids=fixture_ids(READABLE))
def test_every_fixture_through_obstore_local(entry):
    want = np.load(FIXTURES / entry["npy"])
    store = zarr.storage.ObjectStore(LocalStore(FIXTURES / entry["store"]), read_only=True)
    with zarr.config.set(PIPELINE):
        z = zarr.open_array(store, path=entry["path"] or None, mode="r")
        p = _pipeline(z)
        got = z[...]
        if want.ndim and want.shape[0] > 2:
            assert_same_bits(native(np.asarray(z[1:-1])), want[1:-1])
    assert_same_bits(native(np.asarray(got)), want)
    handled = handled_by_zarrbuf(want, z)
    if handled:
        assert p.stats["zarrbuf"] > 0 and p.stats["fallback"] == 0, (p.stats, p.reasons, p.open_errors)
    elif handled is False:
        assert p.stats["zarrbuf"] == 0 and sum(p.reasons.values()) == p.stats["fallback"] > 0


@pytest.mark.parametrize(("fmt", "sharded"), [(2, False), (3, False), (3, True)])
def test_obstore_local_writes_and_reads_through_zarrbuf(tmp_path, fmt, sharded):
    store = zarr.storage.ObjectStore(LocalStore(tmp_path / "o.zarr", mkdir=True))
    route, why = _route(store)
    assert why is None and route.root == str(tmp_path / "o.zarr") and route.options is None
    before = dict(zp.STATS)
    a, want = _write_read(store, sharded=sharded, fmt=fmt)
    p = _pipeline(a)
    assert p.stats == {"zarrbuf": 5, "fallback": 0}, (p.stats, p.reasons)
    assert zp.STATS["zarrbuf"] - before["zarrbuf"] == 5
    assert zp.STATS["fallback"] == before["fallback"]
    # zarr-python's own pipeline, through obstore, and zarrbuf.open read what zarrbuf wrote.
    with zarr.config.set(DEFAULT):
        back = zarr.open_array(zarr.storage.ObjectStore(LocalStore(tmp_path / "o.zarr")), path="g/x", mode="r")
        assert type(back._async_array.codec_pipeline).__name__ == "BatchedCodecPipeline"
        assert_same_bits(back[...], want)
    assert_same_bits(np.asarray(zarrbuf.open(str(tmp_path / "o.zarr"), "g/x").read()), want)


def test_obstore_local_automatic_cleanup_writes_fall_back(tmp_path):
    """Reads take zarrbuf's path; writes do not (obstore would remove the directories that
    deleted chunks leave empty, zarrbuf keeps them)."""
    store = zarr.storage.ObjectStore(LocalStore(tmp_path / "c.zarr", mkdir=True, automatic_cleanup=True))
    want = _data((12, 10))
    with zarr.config.set(PIPELINE):
        a = zarr.create_array(store, shape=want.shape, chunks=(4, 4), dtype=want.dtype, fill_value=0)
        a[...] = want
        assert_same_bits(a[...], want)
        p = _pipeline(a)
    assert p.stats == {"zarrbuf": 1, "fallback": 1}
    assert p.reasons == {"obstore LocalStore with automatic_cleanup (zarrbuf keeps emptied directories)": 1}


def test_obstore_memory_store_falls_back_with_its_reason():
    store = zarr.storage.ObjectStore(MemoryStore())
    before = dict(zp.STATS_REASONS)
    with zarr.config.set(PIPELINE):
        a = zarr.create_array(store, shape=(10,), chunks=(4,), dtype="i2", fill_value=0)
        a[...] = np.arange(10)
        np.testing.assert_array_equal(a[...], np.arange(10))
        p = _pipeline(a)
    reason = "obstore MemoryStore: memory of this process's obstore"
    assert p.stats == {"zarrbuf": 0, "fallback": 2}
    assert p.reasons == {reason: 2}
    assert zp.STATS_REASONS[reason] - before.get(reason, 0) == 2


def test_reasons_add_up_to_the_fallbacks(tmp_path):
    store = zarr.storage.ObjectStore(LocalStore(tmp_path / "r.zarr", mkdir=True))
    want = np.arange(60, dtype="i2").reshape(6, 10)
    with zarr.config.set(PIPELINE):
        z = zarr.create_array(store, shape=want.shape, chunks=(4, 4), dtype="i2")
        z[...] = want
        assert np.array_equal(z[::2, 1::3], want[::2, 1::3])  # strided
        assert np.array_equal(z.vindex[[0, 5], [1, 9]], want[[0, 5], [1, 9]])
        p = _pipeline(z)
    assert p.stats == {"zarrbuf": 1, "fallback": 2}
    assert p.reasons == {zp._NOT_A_BOX: 2}
    assert sum(zp.STATS_REASONS.values()) == zp.STATS["fallback"]


def test_array_paths_with_escaped_characters(tmp_path):
    """obstore's LocalStore decodes %XX in keys (zarrbuf's directory stores do not): such
    paths fall back; other characters name the same files in both."""
    store = zarr.storage.ObjectStore(LocalStore(tmp_path / "e.zarr", mkdir=True))
    with zarr.config.set(PIPELINE):
        for name, via_zarrbuf in (("a%41b", False), ("a~b c", True)):
            a = zarr.create_array(store, name=name, shape=(6,), chunks=(4,), dtype="u1", fill_value=0)
            a[...] = np.arange(6)
            np.testing.assert_array_equal(a[...], np.arange(6))
            p = _pipeline(a)
            if via_zarrbuf:
                assert p.stats == {"zarrbuf": 2, "fallback": 0}, (p.stats, p.reasons)
            else:
                assert p.reasons == {"array path with characters object_store escapes": 2}
    # zarr-python's own pipeline reads them back.
    with zarr.config.set(DEFAULT):
        for name in ("a%41b", "a~b c"):
            np.testing.assert_array_equal(zarr.open_array(store, path=name, mode="r")[...], np.arange(6))


# --- obstore S3Store, against the local moto server -----------------------------------------


def _bucket(endpoint: str) -> str:
    import boto3

    bucket = "zarrbuf-obstore"
    s3 = boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    )
    try:
        s3.create_bucket(Bucket=bucket)
    except s3.exceptions.BucketAlreadyOwnedByYou:
        pass
    return bucket


def _s3(endpoint: str, prefix: str, **extra) -> S3Store:
    settings = {
        "endpoint": endpoint,
        "region": "us-east-1",
        "access_key_id": "testing",
        "secret_access_key": "testing",
        "client_options": {"allow_http": True},
    }
    settings.update(extra)
    return S3Store(_bucket(endpoint), prefix=prefix, **settings)


@pytest.mark.parametrize("sharded", [False, True])
def test_obstore_s3_writes_and_reads_through_zarrbuf(sharded):
    endpoint = server_url("ZARRBUF_TEST_S3_ENDPOINT")
    prefix = f"{uuid.uuid4().hex}/o.zarr"
    store = zarr.storage.ObjectStore(
        _s3(endpoint, prefix, retry_config={"max_retries": 2, "retry_timeout": timedelta(seconds=20)})
    )
    route, why = _route(store)
    assert why is None
    assert route.root == f"s3://zarrbuf-obstore/{prefix}"
    options = dict(route.options)
    assert options["endpoint"] == endpoint and options["allow_http"] == "true"
    assert options["max_retries"] == "2" and options["retry_timeout"] == "20.0"
    a, want = _write_read(store, sharded=sharded)
    p = _pipeline(a)
    assert p.stats == {"zarrbuf": 5, "fallback": 0}, (p.stats, p.reasons, p.open_errors)
    # zarr-python's own pipeline (through obstore) reads what zarrbuf wrote.
    with zarr.config.set(DEFAULT):
        back = zarr.open_array(zarr.storage.ObjectStore(_s3(endpoint, prefix), read_only=True), path="g/x", mode="r")
        assert_same_bits(back[...], want)


def test_obstore_s3_settings_zarrbuf_cannot_honour_fall_back():
    endpoint = server_url("ZARRBUF_TEST_S3_ENDPOINT")

    def credentials():
        return {"access_key_id": "testing", "secret_access_key": "testing", "token": None, "expires_at": None}

    prefix = f"{uuid.uuid4().hex}/cp.zarr"
    store = zarr.storage.ObjectStore(
        S3Store(
            _bucket(endpoint),
            prefix=prefix,
            endpoint=endpoint,
            region="us-east-1",
            client_options={"allow_http": True},
            credential_provider=credentials,
        )
    )
    with zarr.config.set(PIPELINE):
        a = zarr.create_array(store, shape=(8,), chunks=(4,), dtype="i4", fill_value=0)
        a[:] = np.arange(8)
        np.testing.assert_array_equal(a[:], np.arange(8))
        p = _pipeline(a)
    assert p.stats == {"zarrbuf": 0, "fallback": 2}
    assert p.reasons == {"obstore S3Store with a Python credential_provider": 2}

    # Settings without a counterpart: decided without a request.
    cases = {
        "obstore S3Store with default_headers (no object_store option carries them)": dict(
            client_options={"allow_http": True, "default_headers": {"x-test": "1"}}
        ),
        "obstore S3Store with a retry backoff of its own": dict(
            retry_config={"backoff": {"init_backoff": timedelta(seconds=1)}}
        ),
        "obstore S3Store with a plain-http endpoint but without allow_http": dict(client_options={}),
    }
    for reason, extra in cases.items():
        route, why = _route(zarr.storage.ObjectStore(_s3(endpoint, "p", **extra)))
        assert route is None and why == reason


# --- obstore HTTPStore, against the local range server --------------------------------------


@pytest.mark.parametrize("entry", HTTP_FIXTURES, ids=fixture_ids(HTTP_FIXTURES))
def test_obstore_http_reads_through_zarrbuf(entry):
    base = server_url("ZARRBUF_TEST_HTTP_URL").rstrip("/")
    name = entry["store"].removeprefix("data/")
    inner = HTTPStore.from_url(f"{base}/{name}", client_options={"allow_http": True})
    store = zarr.storage.ObjectStore(inner, read_only=True)
    want = np.load(FIXTURES / entry["npy"])
    with zarr.config.set(PIPELINE):
        z = zarr.open_array(store, path=entry["path"] or None, mode="r")
        got = z[...]
        p = _pipeline(z)
    assert_same_bits(native(np.asarray(got)), want)
    assert p.stats["zarrbuf"] > 0 and p.stats["fallback"] == 0, (p.stats, p.reasons, p.open_errors)


def test_obstore_http_without_allow_http_falls_back():
    store = zarr.storage.ObjectStore(HTTPStore.from_url("http://127.0.0.1:9/x.zarr"), read_only=True)
    assert _route(store) == (None, "obstore HTTPStore over plain http without allow_http")


# --- obstore GCSStore and AzureStore: the mapping (no server; nothing is requested) ---------


def _opens_in_zarrbuf(route) -> None:
    """zarrbuf's object_store takes every option the route carries (building a store sends
    no request)."""
    meta = '{"zarr_format": 3, "node_type": "array", "shape": [4], "data_type": "uint8", "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}}, "chunk_key_encoding": {"name": "default"}, "fill_value": 0, "codecs": [{"name": "bytes"}]}'
    a = zarrbuf._zarrbuf.open_with_metadata(route.root, "a", meta, route.options)
    assert a.shape == (4,)


def test_obstore_gcs_maps_to_a_gs_url():
    inner = GCSStore("bkt", prefix="data/x.zarr", skip_signature=True, client_options={"timeout": timedelta(seconds=7)})
    route, why = _route(zarr.storage.ObjectStore(inner))
    assert why is None
    assert route.root == "gs://bkt/data/x.zarr"
    assert dict(route.options) == {"bucket": "bkt", "skip_signature": "true", "timeout": "7s"}
    _opens_in_zarrbuf(route)


def test_obstore_azure_maps_to_an_az_url():
    inner = AzureStore("cont", prefix="p", account_name="devstoreaccount1", use_emulator=True)
    route, why = _route(zarr.storage.ObjectStore(inner))
    assert why is None
    assert route.root == "az://cont/p"
    assert dict(route.options) == {
        "container_name": "cont",
        "account_name": "devstoreaccount1",
        "use_emulator": "true",
    }
    _opens_in_zarrbuf(route)


def test_obstore_s3_options_open_in_zarrbuf():
    inner = S3Store(
        "bkt",
        prefix="a/b",
        endpoint="https://127.0.0.1:9",
        region="eu-west-1",
        skip_signature=True,
        virtual_hosted_style_request=False,
        client_options={"connect_timeout": timedelta(milliseconds=1500), "allow_http": False},
    )
    route, why = _route(zarr.storage.ObjectStore(inner))
    assert why is None and route.root == "s3://bkt/a/b"
    _opens_in_zarrbuf(route)


# --- ZipStore -------------------------------------------------------------------------------

ZIPS = ["v3_zipstore.zip", "v3_zipstore_deflate.zip"]


@pytest.mark.parametrize("name", ZIPS)
def test_read_only_zipstore_reads_through_zarrbuf(name):
    store = zarr.storage.ZipStore(FIXTURES / "data" / name, mode="r")
    try:
        with zarr.config.set(PIPELINE):
            for path, npy in (("temperature", "stores_temperature.npy"), ("g/labels", "stores_g_labels.npy")):
                want = np.load(FIXTURES / "data" / npy)
                z = zarr.open_array(store, path=path, mode="r")
                assert_same_bits(native(np.asarray(z[...])), want)
                assert_same_bits(native(np.asarray(z[1:-1, 3])), want[1:-1, 3])
                p = _pipeline(z)
                assert p.stats == {"zarrbuf": 2, "fallback": 0}, (p.stats, p.reasons, p.open_errors)
    finally:
        store.close()


def test_zipstore_open_for_writing_falls_back(tmp_path):
    path = tmp_path / "w.zip"
    want = _data((12, 10))
    reason = "ZipStore open for writing (its file is complete only once closed)"
    store = zarr.storage.ZipStore(path, mode="w")
    with zarr.config.set(PIPELINE):
        a = zarr.create_array(store, name="x", shape=want.shape, chunks=(4, 4), dtype=want.dtype, fill_value=0)
        a[...] = want
        assert_same_bits(a[...], want)
        p = _pipeline(a)
    store.close()
    assert p.stats == {"zarrbuf": 0, "fallback": 2}
    assert p.reasons == {reason: 2}
    # The closed file, opened read-only: zarrbuf's path.
    ro = zarr.storage.ZipStore(path, read_only=True)
    with zarr.config.set(PIPELINE):
        b = zarr.open_array(ro, path="x", mode="r")
        assert_same_bits(b[...], want)
        q = _pipeline(b)
    ro.close()
    assert q.stats == {"zarrbuf": 1, "fallback": 0}
    # Appending, even when zarr-python is told not to write: the fallback.
    ap = zarr.storage.ZipStore(path, mode="a", read_only=True)
    assert _route(ap) == (None, reason)


def test_zip_without_root_metadata_falls_back():
    """A zipped directory store (entries in one folder): zarrbuf would start in the folder,
    zarr-python's ZipStore starts at the archive root."""
    store = zarr.storage.ZipStore(FIXTURES / "data" / "v3_zip_nested.zip", mode="r")
    try:
        with zarr.config.set(PIPELINE):
            z = zarr.open_array(store, path="v3_group_consolidated.zarr/temperature", mode="r")
            assert_same_bits(native(np.asarray(z[...])), np.load(FIXTURES / "data" / "stores_temperature.npy"))
            p = _pipeline(z)
    finally:
        store.close()
    assert p.reasons == {"ZipStore without zarr metadata at the archive root": 1}


def test_zip_entries_zarrbuf_cannot_inflate_fall_back(tmp_path):
    src = zipfile.ZipFile(FIXTURES / "data" / "v3_zipstore.zip")
    path = tmp_path / "lzma.zip"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_LZMA) as out:
        for info in src.infolist():
            out.writestr(info.filename, src.read(info.filename))
    store = zarr.storage.ZipStore(path, mode="r")
    want = np.load(FIXTURES / "data" / "stores_temperature.npy")
    with zarr.config.set(PIPELINE):
        z = zarr.open_array(store, path="temperature", mode="r")
        assert_same_bits(native(np.asarray(z[...])), want)
        p = _pipeline(z)
    store.close()
    assert p.reasons == {"ZipStore with entries zarrbuf does not inflate (lzma, encrypted)": 1}
