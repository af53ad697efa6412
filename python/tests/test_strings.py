"""Variable-length strings and bytes (fixtures/strings.json): zarrbuf.open reads them into
VarLenArray results (NumPy StringDType, Arrow without a copy, DLPack offsets/values), the
codec pipeline decodes them with no fallback, xarray reads a string coordinate through
it, and writes from Python data read back exactly by zarr-python."""

from __future__ import annotations

import gc
import json
import os
import time

import numpy as np
import pyarrow as pa
import pytest
import zarr
import zarrbuf
from conftest import FIXTURES, fixture_ids
from zarr.core.dtype import VariableLengthBytes

STRINGS = json.loads((FIXTURES / "strings.json").read_text())
PIPELINE = {"codec_pipeline.path": "zarrbuf.ZarrbufCodecPipeline"}
DEFAULT = {"codec_pipeline.path": "zarr.core.codec_pipeline.BatchedCodecPipeline"}
READABLE = STRINGS  # v2 strings in order F (v2_vlen_utf8_F) included

pytestmark = pytest.mark.filterwarnings("ignore::zarr.errors.UnstableSpecificationWarning")


def expected(entry) -> tuple[str, list, tuple[int, ...]]:
    """(kind, flat values as str/bytes, shape) of a fixture's JSON expectation."""
    exp = json.loads((FIXTURES / entry["expected"]).read_text())
    values = exp["values"] if exp["kind"] == "utf8" else [bytes.fromhex(v) for v in exp["values"]]
    return exp["kind"], values, tuple(exp["shape"])


def as_array(x) -> np.ndarray:
    """`x` as an object array (a 0-d one for a single str or bytes element)."""
    if isinstance(x, np.ndarray):
        return x.astype(object)
    a = np.empty((), dtype=object)
    a[()] = x
    return a


def flat(a) -> list:
    return as_array(a).reshape(-1).tolist()


def test_the_fixtures_cover_every_layout():
    names = {e["name"] for e in STRINGS}
    kinds = {(e["zarr_format"], e["data_type"]) for e in STRINGS}
    assert kinds == {(3, "string"), (3, "variable_length_bytes"), (2, "string"),
                     (2, "variable_length_bytes")}
    assert any(e["inner_chunks"] for e in STRINGS if e["data_type"] == "string")
    assert any(e["chunks_present"] < e["chunks_total"] for e in STRINGS)
    assert {"xr_v3_stations", "xr_v2_stations", "v2_vlen_utf8_F"} <= names


@pytest.mark.parametrize("entry", READABLE, ids=fixture_ids(READABLE))
def test_every_fixture_exact_through_open(entry):
    kind, want, shape = expected(entry)
    a = zarrbuf.open(str(FIXTURES / entry["store"]), entry["path"])
    assert a.shape == shape
    assert np.dtype(a.dtype) == (np.dtypes.StringDType() if kind == "utf8" else np.dtype("O"))
    r = a.read()
    assert isinstance(r, zarrbuf.VarLenArray)
    assert (r.kind, r.shape, r.size, r.device) == (kind, shape, len(want), "cpu")
    got = np.asarray(r)
    assert got.shape == shape
    assert got.dtype == (np.dtypes.StringDType() if kind == "utf8" else np.dtype("O"))
    assert flat(got) == want
    assert flat(a[...]) == want
    # Arrow: the same strings, over the result's own buffers.
    arrow = pa.array(r)
    assert arrow.type == (pa.large_string() if kind == "utf8" else pa.large_binary())
    assert arrow.to_pylist() == want
    offsets = np.from_dlpack(r.offsets)
    values = np.from_dlpack(r.values)
    assert offsets.dtype == np.int64 and values.dtype == np.uint8
    assert offsets[0] == 0 and offsets[-1] == values.size and offsets.size == len(want) + 1
    encoded = [w.encode() if kind == "utf8" else w for w in want]
    assert bytes(values) == b"".join(encoded)
    assert np.array_equal(np.diff(offsets), [len(e) for e in encoded])


@pytest.mark.parametrize("entry", READABLE, ids=fixture_ids(READABLE))
def test_subsets_match_the_whole(entry):
    _, want, shape = expected(entry)
    whole = np.array(want, dtype=object).reshape(shape)
    a = zarrbuf.open(str(FIXTURES / entry["store"]), entry["path"])
    n = shape[0]
    selections = [slice(1, n - 1), n - 1, slice(n // 2, n // 2)]
    if len(shape) == 2:
        selections += [(slice(1, -1), slice(2, 5)), (slice(None), 3), (2, slice(None))]
    for sel in selections:
        got = a.read(sel)
        part = as_array(whole[sel])
        assert got.shape == part.shape, sel
        assert flat(np.asarray(got)) == part.reshape(-1).tolist(), sel
        assert pa.array(got).to_pylist() == part.reshape(-1).tolist(), sel


@pytest.mark.parametrize("entry", READABLE, ids=fixture_ids(READABLE))
def test_read_stream_items_equal_read_in_order(entry):
    _, want, shape = expected(entry)
    whole = np.array(want, dtype=object).reshape(shape)
    a = zarrbuf.open(str(FIXTURES / entry["store"]), entry["path"])
    n = shape[0]
    selections = [n - 1, slice(1, n - 1), slice(None), slice(n // 2, n // 2), 0]
    if len(shape) == 2:
        selections += [(slice(1, -1), slice(2, 5)), (slice(None), 3), (2, slice(None))]
    pulled = []

    def lazily():
        for sel in selections:
            pulled.append(sel)
            yield sel

    stream = a.read_stream(lazily(), prefetch=2)
    assert pulled == []  # nothing is read before the first next()
    for k, (sel, got) in enumerate(zip(selections, stream, strict=True)):
        assert stream.in_flight <= 2
        assert len(pulled) <= k + 1 + 2
        part = as_array(whole[sel])
        direct = a.read(sel)
        assert got.shape == part.shape == direct.shape, sel
        assert flat(np.asarray(got)) == part.reshape(-1).tolist() == flat(np.asarray(direct)), sel


def test_read_stream_errors_name_the_selection_and_the_stream_goes_on(tmp_path):
    path = tmp_path / "s.zarr"
    z = zarr.create_array(str(path), shape=(6,), chunks=(2,), dtype=str, zarr_format=3)
    z[...] = np.array(["a", "bc", "", "dé", "f", "g"], dtype=np.dtypes.StringDType())
    (path / "c" / "1").write_bytes(b"\xff\xff\xff\xff")  # chunk 1: a count past the end
    a = zarrbuf.open(str(path))
    stream = a.read_stream([slice(0, 2), slice(1, 4), slice(4, 6)])
    assert flat(np.asarray(next(stream))) == ["a", "bc"]
    with pytest.raises(zarrbuf.ZarrbufError, match=r"item 1 \(subset \[1\.\.4\]\)"):
        next(stream)
    assert flat(np.asarray(next(stream))) == ["f", "g"]
    with pytest.raises(StopIteration):
        next(stream)
    stream = a.read_stream(slice(i, i + 1) for i in range(4, 6))
    stream.close()
    assert stream.in_flight == 0
    assert list(stream) == []


def test_one_extension_class_and_stream_for_both_kinds(tmp_path):
    """Strings and numbers open as one extension class, with the same properties (strings
    read uncached, decode whole chunks, and keep open's io_concurrency), and stream
    through one stream class yielding VarLenArray or NDArray."""
    z = zarr.create_array(str(tmp_path / "s.zarr"), shape=(4,), chunks=(2,), dtype=str, zarr_format=3)
    z[...] = np.array(["a", "bc", "", "d"], dtype=np.dtypes.StringDType())
    zarr.create_array(str(tmp_path / "n.zarr"), shape=(4,), chunks=(2,), dtype="f4", zarr_format=3)
    s = zarrbuf.open(str(tmp_path / "s.zarr"), cache_bytes=1 << 20, io_concurrency=8)
    n = zarrbuf.open(str(tmp_path / "n.zarr"), cache_bytes=1 << 20, io_concurrency=8)
    assert type(s._inner) is type(n._inner)
    assert (s.dtype, s._inner.kind, s.cache, s.prefix_decode) == ("T", "utf8", None, False)
    assert (n._inner.kind, n.prefix_decode, n.io_concurrency, s.io_concurrency) == (None, True, 8, 8)
    assert n.cache is not None
    strings, numbers = s.read_stream([slice(0, 2)]), n.read_stream([slice(0, 2)])
    assert type(strings) is type(numbers)
    assert flat(np.asarray(next(strings))) == ["a", "bc"]
    assert isinstance(next(numbers), zarrbuf.NDArray)
    with pytest.raises(TypeError, match="write_raw takes fixed-size elements"):
        s._inner.write_raw([(0, 1)], [], np.zeros((1, 1), np.uint8))
    assert repr(s) == f"<zarrbuf.Array {tmp_path / 's.zarr'} shape=[4] dtype=string chunks=[2]>"


def test_string_reads_from_an_object_store_keep_the_arrays_io_concurrency():
    """zarrbuf.open(url, io_concurrency=1) bounds the requests of a string array's reads and
    streams: one fetch-ahead request plus one per decoding thread (which fetch a chunk no
    request has started; see tests/it/remote_latency.rs), so 64 chunks behind the test
    server's 20 ms take at least 64 / (1 + threads) x 20 ms, where the default sends them
    together."""
    from conftest import server_url

    url = server_url("ZARRBUF_TEST_LATENCY_URL")
    root = os.environ["ZARRBUF_TEST_LATENCY_ROOT"]
    name = f"pystrings-{os.getpid()}-{np.random.default_rng().integers(1 << 30)}.zarr"
    want = [f"s{i}" for i in range(256)]
    z = zarr.create_array(os.path.join(root, name), shape=(256,), chunks=(4,), dtype=str, zarr_format=3)
    z[...] = np.array(want, dtype=np.dtypes.StringDType())
    a = zarrbuf.open(f"{url}/{name}", io_concurrency=1)
    assert a.io_concurrency == 1
    in_flight = 1 + len(os.sched_getaffinity(0))
    start = time.perf_counter()
    got = a.read()
    took = time.perf_counter() - start
    assert flat(np.asarray(got)) == want
    floor = (64 // in_flight) * 0.020
    assert took >= floor, f"64 chunks in {took:.3f} s: more than {in_flight} requests in flight"
    start = time.perf_counter()
    batches = list(a.read_stream([slice(0, 128), slice(128, 256)], prefetch=2))
    took = time.perf_counter() - start
    assert [flat(np.asarray(b)) for b in batches] == [want[:128], want[128:]]
    assert took >= (32 // in_flight) * 0.020, f"two reads of 32 chunks in {took:.3f} s"


@pytest.mark.parametrize("entry", READABLE, ids=fixture_ids(READABLE))
def test_every_fixture_through_the_pipeline_without_fallback(entry):
    _, want, shape = expected(entry)
    whole = np.array(want, dtype=object).reshape(shape)
    with zarr.config.set(PIPELINE):
        z = zarr.open_array(str(FIXTURES / entry["store"]), path=entry["path"] or None, mode="r")
        pipeline = z._async_array.codec_pipeline
        assert type(pipeline).__name__ == "ZarrbufCodecPipeline"
        assert flat(z[...]) == want
        assert flat(z[1:-1]) == flat(whole[1:-1])
        assert flat(z[-1]) == flat(whole[-1])
    assert pipeline.stats["zarrbuf"] == 3 and pipeline.stats["fallback"] == 0, (
        pipeline.stats, pipeline.reasons, pipeline.open_errors)


@pytest.mark.parametrize("name", ["xr_v3_stations", "xr_v2_stations"])
def test_xarray_reads_the_string_coordinate_through_the_pipeline(name):
    xr = pytest.importorskip("xarray")
    entry = next(e for e in STRINGS if e["name"] == name)
    _, want, _ = expected(entry)
    from zarrbuf import pipeline as p

    before = dict(p.STATS)
    with zarr.config.set(PIPELINE):
        ds = xr.open_zarr(str(FIXTURES / entry["store"]), consolidated=False)
        stations = ds["station"].values
        temp = ds["temp"].values
    assert stations.tolist() == want
    assert temp.shape == (len(want), 3)
    assert p.STATS["fallback"] == before["fallback"], p.STATS_REASONS
    assert p.STATS["zarrbuf"] > before["zarrbuf"]


def test_arrow_buffers_outlive_the_result():
    a = zarrbuf.open(str(FIXTURES / "data/v3_string_zstd.zarr"))
    r = a.read()
    want = np.asarray(r).tolist()
    arrow = pa.array(r)
    address = np.from_dlpack(r.values).ctypes.data
    del r
    gc.collect()
    assert arrow.buffers()[2].address == address  # zero-copy: Arrow points at our values
    assert arrow.to_pylist() == want
    # an unconsumed export releases its buffers when the capsules go
    r = a.read()
    schema, array = r.__arrow_c_array__()
    del schema, array, r
    gc.collect()
    assert pa.array(zarrbuf.open(str(FIXTURES / "data/v3_string_zstd.zarr")).read()).to_pylist() == want


def test_numpy_array_protocol_options():
    r = zarrbuf.open(str(FIXTURES / "data/v3_string_2d_fill.zarr")).read()
    assert np.asarray(r, dtype=object).dtype == np.dtype("O")
    assert r.numpy().tolist() == r.tolist()
    assert len(r) == 7
    with pytest.raises(ValueError, match="always a copy"):
        np.array(r, copy=False)


def _back(path, path_in_store=None):
    with zarr.config.set(DEFAULT):
        return zarr.open_array(path, path=path_in_store, mode="r")[...]


WORDS = ["alpha", "", "γάμμα", "東京", "😀", "nul\x00", "trailing\x00", "x" * 50, "e\u0301"]


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize(
    "make",
    [
        lambda w: w,  # list[str]
        lambda w: np.array(w, dtype=np.dtypes.StringDType()),
        lambda w: np.array(w, dtype=object),
        lambda w: pa.array(w),
        lambda w: pa.array(w, type=pa.large_string()),
        lambda w: pa.chunked_array([w[:4], w[4:]]),
        lambda w: pa.array(["pad"] + w)[1:],  # a sliced Arrow array (offsets not at 0)
    ],
    ids=["list", "StringDType", "object", "arrow", "arrow-large", "arrow-chunked", "arrow-sliced"],
)
def test_string_writes_read_back_by_zarr_python(tmp_path, fmt, make):
    path = str(tmp_path / "s.zarr")
    z = zarr.create_array(path, shape=(12,), chunks=(4,), dtype=str, zarr_format=fmt,
                          compressors=None if fmt == 2 else zarr.codecs.ZstdCodec(level=1))
    a = zarrbuf.open(path)
    a[1:10] = make(WORDS)
    back = _back(path)
    assert back.tolist() == [""] + WORDS + ["", ""]
    assert flat(a[...]) == back.tolist()
    del z


def test_fixed_width_unicode_writes(tmp_path):
    path = str(tmp_path / "u.zarr")
    zarr.create_array(path, shape=(2, 3), chunks=(1, 2), dtype=str, zarr_format=3)
    a = zarrbuf.open(path)
    a[...] = np.array([["a", "bc", "δεζ"], ["", "x", "yy"]], dtype="<U3")
    a[1, :] = "same"  # broadcast, as numpy assigns
    assert _back(path).tolist() == [["a", "bc", "δεζ"], ["same", "same", "same"]]


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize(
    "make",
    [
        lambda b: [b[:3], b[3:]],  # nested lists of bytes
        lambda b: np.array(b, dtype=object).reshape(2, 3),
        lambda b: pa.array(b, type=pa.binary()),  # flat Arrow, in C order of the selection
    ],
    ids=["list", "object", "arrow"],
)
def test_bytes_writes_read_back_by_zarr_python(tmp_path, fmt, make):
    blobs = [b"\x00\x01", b"", b"\xff\xfe", b"nul\x00", b"z" * 40, b"\x00"]
    path = str(tmp_path / "b.zarr")
    zarr.create_array(path, shape=(2, 4), chunks=(2, 3), dtype=VariableLengthBytes(),
                      zarr_format=fmt)
    a = zarrbuf.open(path)
    assert a.dtype == "O"
    a[:, 1:4] = make(blobs)
    a[0, 0] = b"first"
    back = _back(path)
    assert back.tolist() == [[b"first"] + blobs[:3], [b""] + blobs[3:]]
    assert flat(a[...]) == back.reshape(-1).tolist()


@pytest.mark.parametrize("make", [lambda b: pa.array(b, type=pa.binary()),
                                  lambda b: pa.array(b, type=pa.large_binary())],
                         ids=["arrow", "arrow-large"])
def test_bytes_writes_from_arrow(tmp_path, make):
    blobs = [b"\x00\x01", b"", b"\xff\xfe", b"nul\x00"]
    path = str(tmp_path / "b.zarr")
    zarr.create_array(path, shape=(4,), chunks=(3,), dtype=VariableLengthBytes(), zarr_format=3)
    zarrbuf.open(path)[...] = make(blobs)
    assert _back(path).tolist() == blobs


def test_pipeline_writes_strings_through_zarrbuf(tmp_path):
    path = str(tmp_path / "p.zarr")
    with zarr.config.set(PIPELINE):
        z = zarr.create_array(path, shape=(10,), chunks=(3,), dtype=str, zarr_format=3)
        z[...] = np.array(WORDS + ["last"], dtype=np.dtypes.StringDType())
        z[2:4] = ["changed", "τ"]
        pipeline = z._async_array.codec_pipeline
        assert pipeline.stats == {"zarrbuf": 2, "fallback": 0}, pipeline.reasons
    want = WORDS + ["last"]
    want[2:4] = ["changed", "τ"]
    assert _back(path).tolist() == want


def test_wrong_elements_are_clear_errors(tmp_path):
    path = str(tmp_path / "e.zarr")
    zarr.create_array(path, shape=(3,), chunks=(2,), dtype=str, zarr_format=3)
    a = zarrbuf.open(path)
    with pytest.raises(TypeError, match="element 1 is int"):
        a[...] = ["a", 5, "c"]
    with pytest.raises(TypeError, match="element 0 is NoneType"):
        a[...] = [None, "b", "c"]
    with pytest.raises(TypeError, match="element 2 is bytes"):
        a[...] = ["a", "b", b"c"]
    with pytest.raises(TypeError, match="float64 array cannot be written to a utf8 array"):
        a[...] = np.zeros(3)
    with pytest.raises(TypeError, match="pyarrow large_binary array cannot be written"):
        a[...] = pa.array([b"a", b"b", b"c"], type=pa.large_binary())
    with pytest.raises(ValueError, match="element 1 of the pyarrow array is null"):
        a[...] = pa.array(["a", None, "c"])
    with pytest.raises(ValueError, match="3 elements cannot be written to a selection of shape"):
        a[0:2] = pa.array(["a", "b", "c"])
    with pytest.raises(ValueError, match="not valid UTF-8"):
        a[...] = ["a", "\ud800", "c"]  # a lone surrogate
    with pytest.raises(ValueError, match="missing"):
        a[...] = np.array(["a", None, "c"], dtype=np.dtypes.StringDType(na_object=None))
    bpath = str(tmp_path / "b.zarr")
    zarr.create_array(bpath, shape=(2,), chunks=(2,), dtype=VariableLengthBytes(), zarr_format=3)
    b = zarrbuf.open(bpath)
    with pytest.raises(TypeError, match="element 0 is str"):
        b[...] = ["text", b"ok"]
    with pytest.raises(TypeError, match="a utf8 VarLenArray cannot be written to a bytes array"):
        b[...] = a.read(slice(0, 2))
    with pytest.raises(ValueError, match="strings decode on the CPU"):
        a.read(decode="gpu")
    assert _back(path).tolist() == ["", "", ""]  # nothing was written by the failures


def test_strings_on_s3_read_through_zarrbuf_and_writes_fall_back(monkeypatch):
    import uuid

    from conftest import server_url
    from test_pipeline_stores import _s3

    endpoint = server_url("ZARRBUF_TEST_S3_ENDPOINT")
    prefix = f"{uuid.uuid4().hex}/s.zarr"
    store = zarr.storage.ObjectStore(_s3(endpoint, prefix))
    with zarr.config.set(PIPELINE):
        z = zarr.create_array(store, shape=(9,), chunks=(4,), dtype=str, zarr_format=3)
        z[...] = WORDS  # zarrbuf writes strings to local stores only: zarr-python does this
        assert flat(z[...]) == WORDS
        assert flat(z[2:7]) == WORDS[2:7]
        p = z._async_array.codec_pipeline
        assert p.stats == {"zarrbuf": 2, "fallback": 1}, (p.stats, p.reasons, p.open_errors)
        assert p.reasons == {
            "strings written to an object store (zarrbuf writes them to local stores)": 1
        }
    for k, v in {"AWS_ENDPOINT_URL": endpoint, "AWS_ALLOW_HTTP": "true", "AWS_REGION": "us-east-1",
                 "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}.items():
        monkeypatch.setenv(k, v)
    a = zarrbuf.open(f"s3://zarrbuf-obstore/{prefix}")  # the async route, directly
    assert a.read().tolist() == WORDS
    sels = [slice(5, 9), 2, slice(0, 4)]
    assert [flat(np.asarray(v)) for v in a.read_stream(sels, prefetch=2)] == [
        WORDS[5:9], [WORDS[2]], WORDS[0:4]
    ]
    with pytest.raises(zarrbuf.ZarrbufError, match="not supported yet"):
        a[0:1] = ["x"]
