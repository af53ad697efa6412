"""``ZarrbufCodecPipeline``: zarr-python's reads and writes through zarrbuf.

    zarr.config.set({"codec_pipeline.path": "zarrbuf.ZarrbufCodecPipeline"})

zarr-python hands a codec pipeline one batch per read or write: for every chunk the
selection touches, its store key, the part of the chunk and the part of the output. When the
batch is a box of the array (basic slicing with step 1, integers), the array sits in a store
zarrbuf reaches itself, and the output is a native-order NumPy array — or a CuPy array with
``zarr.config.enable_gpu()``, which zarrbuf writes on the device, without zarr-python's host
round trips — of a type DLPack knows, zarrbuf decodes the whole box straight into the output
(``read_into``: no per-chunk temporaries) or encodes it from the input, off the event loop
and without the GIL.

The stores zarrbuf reaches (``_store_route``):

- ``LocalStore``: the same directory.
- ``FsspecStore`` over s3fs: the same ``s3://bucket/prefix`` through object_store, with
  s3fs's endpoint, region and credentials, else the ``AWS_*`` environment.
- ``ObjectStore`` (obstore): obstore is built on object_store too, so its stores map onto
  zarrbuf's with the same settings: ``LocalStore`` → its directory; ``S3Store``,
  ``GCSStore``, ``AzureStore`` → ``s3://``, ``gs://``, ``az://`` URLs with the store's
  config, client options and retry settings as object_store options (both read the
  environment the same way); ``HTTPStore`` → its URL.
- ``ZipStore`` opened read-only (``mode="r"``) on a path: the same zip file, read-only.
- ``IcechunkStore`` of a read-only icechunk session (``repo.readonly_session(...)``): the
  session itself, handed to zarrbuf as icechunk serializes it, so zarrbuf reads the same
  snapshot, storage and virtual chunk access. Writable sessions (their changes live in this
  process) and sessions over icechunk's own S3 client (zarrbuf has object_store's) go to
  zarr-python.

Everything else goes to zarr-python's own ``BatchedCodecPipeline``, as zarrs-python does,
and is counted with its reason in ``STATS_REASONS`` (and each pipeline's ``reasons``):
other stores (memory, obstore's ``MemoryStore``, zip files open for writing, writable
icechunk sessions, other fsspec
filesystems, wrapped or mocked stores), settings zarrbuf cannot honour exactly (a Python
``credential_provider``, default headers, a retry backoff of one's own, s3fs's extra
request arguments...), fancy and strided indexing, other types (objects that are not variable-length bytes, non-native byte order),
``array.read_missing_chunks = False``, processes forked after zarrbuf started its threads.
Variable-length strings (``StringDType`` outputs) and bytes (object outputs) of v3
``string`` / ``variable_length_bytes`` and v2 ``vlen-utf8`` / ``vlen-bytes`` arrays go
through zarrbuf: strings are packed straight into zarr-python's output.
Modelled on zarrs-python's ``ZarrsCodecPipeline``.

Decoded chunks can be cached for the pipeline's reads, in one cache per process::

    zarr.config.set({"codec_pipeline.zarrbuf_cache_bytes": 1 << 30})

Every read zarrbuf handles then goes through that cache (``pipeline_cache()`` returns it,
with ``stats()``; a new size makes a new, empty cache; 0 or unset: no cache). Writes through
zarrbuf drop the chunks they replace, and so do writes the pipeline hands to zarr-python.
Changes made to the store any other way (another process, ``store.delete``) are not seen:
``pipeline_cache().clear()`` forgets everything. Arrays in local directories share cached
chunks across ``zarr.open`` calls; arrays on object stores are cached per opened array.

Small reads decode zstd chunks only as far as they need (on by default; off with)::

    zarr.config.set({"codec_pipeline.zarrbuf_prefix_decode": False})

A read of a few chunks decodes each zstd chunk only up to its last element the read needs
(``zarrbuf.open(..., prefix_decode=...)``, Rust's ``decode_needed_prefix``): the bytes decoded
from an intact prefix are the bytes written; headers, sizes and block headers are still
checked; damage inside the later compressed blocks of a chunk is reported by the reads that
need them and by ``zarrbuf check``; checksummed chunks and cached reads decode whole.

Reads from object stores keep many requests in flight ahead of zarrbuf's decoders
(``zarrbuf.open(..., io_concurrency=N)``); the pipeline takes ``N`` from
``codec_pipeline.zarrbuf_io_concurrency``, else from zarr-python's ``async.concurrency``
when it was changed from its default of 10, else zarrbuf's default (128, or
``ZARRBUF_IO_CONCURRENCY``)::

    zarr.config.set({"async.concurrency": 128})
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import zipfile
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import numpy as np
from zarr.abc.codec import CodecPipeline
from zarr.codecs._v2 import V2Codec
from zarr.core.codec_pipeline import BatchedCodecPipeline
from zarr.core.config import config
from zarr.core.metadata import ArrayMetadata, ArrayV2Metadata, ArrayV3Metadata
from zarr.storage import LocalStore, ObjectStore, ZipStore

from . import _zarrbuf

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator
    from typing import Self

    from zarr.abc.codec import Codec
    from zarr.abc.store import Store
    from zarr.core.array_spec import ArraySpec
    from zarr.core.buffer import Buffer, NDBuffer

# Element kinds DLPack carries: bool, signed, unsigned, float, complex.
_KINDS = frozenset("biufc")
# NumPy kinds of variable-length outputs → zarrbuf's element kind: StringDType holds
# strings, object arrays hold variable-length bytes.
_VARLEN_KINDS = {"T": "utf8", "O": "bytes"}

#: Batches zarrbuf handled and batches handed to zarr-python, over every pipeline of this
#: process (``stats`` on a pipeline counts its own). Tests read it to check that zarrbuf's
#: Rust path really ran.
STATS: dict[str, int] = {"zarrbuf": 0, "fallback": 0}

#: Why batches went to zarr-python's pipeline: reason → batches, over every pipeline of this
#: process (``reasons`` on a pipeline counts its own). The reasons are short sentences, such
#: as ``"MemoryStore: a store zarrbuf has no route to"`` or ``"a selection that is not a box
#: (fancy, strided or masked indexing)"``; they add up to ``STATS["fallback"]``.
STATS_REASONS: dict[str, int] = {}


# zarrbuf's Rust side runs on threads (a rayon pool, a tokio runtime) that a fork does not
# copy: in a forked child they look alive but never run, and a call into them would hang.
# Children of fork() therefore hand every batch to zarr-python's pipeline (spawn and
# forkserver children start clean and use zarrbuf).
_FORKED = False
_UNKNOWN = object()


def _after_fork_in_child() -> None:
    global _FORKED
    _FORKED = True


os.register_at_fork(after_in_child=_after_fork_in_child)

#: The config key that sizes the pipeline's decoded-chunk cache, in bytes.
CACHE_CONFIG_KEY = "codec_pipeline.zarrbuf_cache_bytes"
_CACHE: _zarrbuf.ChunkCache | None = None


def pipeline_cache() -> _zarrbuf.ChunkCache | None:
    """The process-wide :class:`zarrbuf.ChunkCache` of the pipeline's reads: None unless
    ``codec_pipeline.zarrbuf_cache_bytes`` is set above 0; a new, empty cache whenever the
    configured size changes."""
    global _CACHE
    value = config.get(CACHE_CONFIG_KEY, 0) or 0
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ValueError(f"{CACHE_CONFIG_KEY} must be a number of bytes >= 0, got {value!r}")
    if value == 0:
        return None
    if _CACHE is None or _CACHE.capacity != int(value):
        _CACHE = _zarrbuf.ChunkCache(int(value))
    return _CACHE


#: The config key that makes the pipeline's small reads decode zstd chunks only as far as
#: they need (a bool, default True; False decodes every chunk whole).
PREFIX_DECODE_CONFIG_KEY = "codec_pipeline.zarrbuf_prefix_decode"


def pipeline_prefix_decode() -> bool:
    """Whether the pipeline's small reads decode zstd chunks only up to the last element they
    need: ``codec_pipeline.zarrbuf_prefix_decode``, True unless set False."""
    value = config.get(PREFIX_DECODE_CONFIG_KEY, True)
    if isinstance(value, str):  # from the environment: ZARR_CODEC_PIPELINE__ZARRBUF_PREFIX_DECODE
        value = {"true": True, "1": True, "false": False, "0": False, "": False}.get(
            value.strip().lower(), value
        )
    if value is None:
        return True
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{PREFIX_DECODE_CONFIG_KEY} must be True or False, got {value!r}")
    return bool(value)


#: The config key that sets how many requests to an object store the pipeline's reads keep
#: in flight (a positive int; default: zarr-python's ``async.concurrency`` when a user set it
#: to something other than its default of 10, else zarrbuf's own default).
IO_CONCURRENCY_CONFIG_KEY = "codec_pipeline.zarrbuf_io_concurrency"
# zarr-python's default async.concurrency: tuned for its own pipeline, one request per
# chunk task; zarrbuf's reads fetch ahead with a larger default of their own.
_ZARR_DEFAULT_CONCURRENCY = 10


def pipeline_io_concurrency() -> int | None:
    """Requests to an object store the pipeline's reads keep in flight:
    ``codec_pipeline.zarrbuf_io_concurrency`` when set, else zarr-python's
    ``async.concurrency`` when a user changed it from its default, else None (zarrbuf's
    default: ``ZARRBUF_IO_CONCURRENCY`` or 128)."""
    for key, default in ((IO_CONCURRENCY_CONFIG_KEY, None), ("async.concurrency", _ZARR_DEFAULT_CONCURRENCY)):
        value = config.get(key, None)
        if isinstance(value, str):  # from the environment
            value = value.strip()
            value = int(value) if value.isdigit() else value
        if value is None or value == default:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{key} must be a positive number of requests, got {value!r}")
        return int(value)
    return None


def _s3_options(fs: Any) -> list[tuple[str, str]] | None:
    """object_store options equivalent to an s3fs filesystem's settings, or None when it uses
    a setting zarrbuf would not honour (profiles, extra request arguments, versioning...)."""
    ck = dict(getattr(fs, "client_kwargs", None) or {})
    if (
        getattr(fs, "s3_additional_kwargs", None)
        or getattr(fs, "config_kwargs", None)
        or getattr(fs, "version_aware", False)
        or getattr(fs, "requester_pays", False)
        or (getattr(fs, "kwargs", None) or {}).get("profile")
        or set(ck) - {"endpoint_url", "region_name", "aws_access_key_id", "aws_secret_access_key"}
    ):
        return None
    opts: list[tuple[str, str]] = []
    endpoint = getattr(fs, "endpoint_url", None) or ck.get("endpoint_url")
    if endpoint:
        opts.append(("aws_endpoint", str(endpoint)))
    region = ck.get("region_name")
    if region:
        opts.append(("aws_region", str(region)))
    if getattr(fs, "anon", False):
        opts.append(("aws_skip_signature", "true"))
    else:
        key = getattr(fs, "key", None) or ck.get("aws_access_key_id")
        secret = getattr(fs, "secret", None) or ck.get("aws_secret_access_key")
        token = getattr(fs, "token", None)
        if key and secret:
            opts += [("aws_access_key_id", str(key)), ("aws_secret_access_key", str(secret))]
            if token:
                opts.append(("aws_session_token", str(token)))
        elif key or secret or token:
            return None  # half a credential: let s3fs/botocore decide what it means
    return opts


@dataclass(frozen=True)
class _Route:
    """Where zarrbuf finds a store's keys: a directory or zip file path, or an object-store
    URL with object_store options."""

    root: str
    options: list[tuple[str, str]] | None = None
    #: Why writes through this store go to zarr-python's pipeline (None: zarrbuf writes).
    no_writes: str | None = None
    #: Characters that would make an array path name another object in zarrbuf than in
    #: the store: obstore hands keys to object_store as they are, zarrbuf's object-store
    #: reader escapes some characters first, and obstore's LocalStore decodes ``%XX``.
    escaped: frozenset[str] = frozenset()
    #: A read-only icechunk session as icechunk serializes it (``root`` then only names it).
    session: bytes | None = None


#: Characters object_store's paths percent-encode (``object_store::path::parts``).
_ESCAPED = frozenset('\\{^}%`]">[~<#|*?') | frozenset(chr(c) for c in range(32)) | {"\x7f"}


def _plain_object_path(path: str, escaped: frozenset[str] = _ESCAPED) -> bool:
    return not (escaped & set(path)) and all(p not in (".", "..") for p in path.split("/") if p)


def _store_route(store: Any) -> tuple[_Route | None, str | None]:
    """Where zarrbuf finds ``store``'s keys, or None and the reason zarrbuf cannot read it
    exactly as ``store`` does."""
    # type(), not isinstance: a mock or proxy with a store's spec passes isinstance.
    kind = type(store)
    if issubclass(kind, LocalStore):
        return _Route(str(store.root)), None
    if issubclass(kind, ObjectStore):
        return _obstore_route(store.store)
    if issubclass(kind, ZipStore):
        return _zip_route(store)
    if kind.__name__ == "IcechunkStore" and kind.__module__.split(".")[0] == "icechunk":
        return _icechunk_route(store)
    if kind.__name__ == "FsspecStore" and kind.__module__.startswith("zarr."):
        fs = store.fs
        protocol = fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)
        if "s3" not in protocol or type(fs).__module__.split(".")[0] != "s3fs":
            return None, "FsspecStore: a filesystem other than s3fs"
        path = str(store.path).strip("/")
        if not path or "://" in path:
            return None, "FsspecStore: an s3 path zarrbuf cannot address (no bucket)"
        options = _s3_options(fs)
        if options is None:
            return None, (
                "FsspecStore: s3fs settings object_store would not honour (profile, extra "
                "request arguments, versioning, requester pays, part of a credential)"
            )
        return _Route(f"s3://{path}", options), None
    return None, f"{kind.__name__}: a store zarrbuf has no route to"


def _store_location(store: Any) -> tuple[str, list[tuple[str, str]] | None] | None:
    """``(root, options)`` of :func:`_store_route`, or None for a store zarrbuf cannot read."""
    route, _ = _store_route(store)
    return None if route is None else (route.root, route.options)


# --- obstore (zarr.storage.ObjectStore) -------------------------------------------------

#: object_store's default retry backoff (obstore fills it in when a retry_config is given);
#: zarrbuf takes max_retries and retry_timeout only.
_DEFAULT_BACKOFF = {
    "init_backoff": timedelta(milliseconds=100),
    "max_backoff": timedelta(seconds=15),
    "base": 2.0,
}


def _obstore_options(inner: Any) -> tuple[list[tuple[str, str]] | None, str | None]:
    """An obstore store's config, client options and retry settings as object_store options
    (obstore's config keys are object_store's, without the ``aws_``/``google_``/``azure_``
    prefix, which object_store accepts too), or None and the reason zarrbuf cannot honour
    them."""
    name = type(inner).__name__
    if getattr(inner, "credential_provider", None) is not None:
        return None, f"obstore {name} with a Python credential_provider"
    opts = [(str(k), str(v)) for k, v in (getattr(inner, "config", None) or {}).items()]
    client = dict(getattr(inner, "client_options", None) or {})
    if "default_headers" in client:
        return None, f"obstore {name} with default_headers (no object_store option carries them)"
    opts += [(str(k), str(v)) for k, v in client.items()]
    retry = getattr(inner, "retry_config", None)
    if retry:
        backoff = dict(retry.get("backoff") or {})
        if any(backoff.get(k, v) != v for k, v in _DEFAULT_BACKOFF.items()):
            return None, f"obstore {name} with a retry backoff of its own"
        if retry.get("max_retries") is not None:
            opts.append(("max_retries", str(int(retry["max_retries"]))))
        if retry.get("retry_timeout") is not None:
            opts.append(("retry_timeout", repr(retry["retry_timeout"].total_seconds())))
    return opts, None


def _truthy(value: Any) -> bool:
    return str(value).strip().lower() in ("true", "1", "yes", "on")


def _obstore_route(inner: Any) -> tuple[_Route | None, str | None]:
    """zarrbuf's route to the obstore store under a ``zarr.storage.ObjectStore``."""
    kind = type(inner)
    name = kind.__name__
    if not kind.__module__.startswith("obstore"):
        return None, f"ObjectStore over {name}, not one of obstore's stores"
    if name == "LocalStore":
        # obstore's LocalStore is object_store's LocalFileSystem: files under the prefix
        # directory, written whole and renamed into place, as zarrbuf's directory stores do.
        _, kwargs = inner.__getnewargs_ex__()
        no_writes = None
        if kwargs.get("automatic_cleanup"):
            no_writes = "obstore LocalStore with automatic_cleanup (zarrbuf keeps emptied directories)"
        prefix = inner.prefix  # obstore resolved it when the store was made
        root = os.path.abspath(os.fspath(prefix)) if prefix is not None else "/"
        return _Route(root, None, no_writes=no_writes, escaped=frozenset("%")), None
    if name == "MemoryStore":
        return None, "obstore MemoryStore: memory of this process's obstore"
    if name == "HTTPStore":
        url = str(inner.url)
        opts, why = _obstore_options(inner)
        if opts is None:
            return None, why
        allow_http = dict(opts).get("allow_http")
        if url.startswith("http://") and not _truthy(allow_http):
            # obstore refuses plain http without allow_http; zarrbuf would allow it.
            return None, "obstore HTTPStore over plain http without allow_http"
        return _Route(url, opts, escaped=_ESCAPED), None
    schemes = {"S3Store": ("s3", "bucket"), "GCSStore": ("gs", "bucket"), "AzureStore": ("az", "container_name")}
    if name not in schemes:
        return None, f"obstore {name}: a store zarrbuf has no route to"
    scheme, bucket_key = schemes[name]
    opts, why = _obstore_options(inner)
    if opts is None:
        return None, why
    config = dict(getattr(inner, "config", None) or {})
    bucket = config.get(bucket_key)
    if not bucket:
        return None, f"obstore {name} without a {bucket_key}"
    prefix = str(inner.prefix or "").strip("/")
    if not _plain_object_path(prefix) or "/" in str(bucket):
        return None, f"obstore {name} with a prefix object_store would escape"
    if scheme == "s3":
        # zarrbuf allows plain http to an http:// endpoint by itself; obstore only with
        # allow_http (option or AWS_ALLOW_HTTP).
        endpoint = str(
            config.get("endpoint") or os.environ.get("AWS_ENDPOINT_URL") or os.environ.get("AWS_ENDPOINT") or ""
        )
        allow = dict(opts).get("allow_http", os.environ.get("AWS_ALLOW_HTTP", "false"))
        if endpoint.startswith("http://") and not _truthy(allow):
            return None, "obstore S3Store with a plain-http endpoint but without allow_http"
    url = f"{scheme}://{bucket}/{prefix}" if prefix else f"{scheme}://{bucket}"
    return _Route(url, opts, escaped=_ESCAPED), None


# --- zip files (zarr.storage.ZipStore) ---------------------------------------------------

#: Entry compressions zarrbuf's zip reader inflates: stored, deflated, bzip2, zstd.
_ZIP_METHODS = frozenset({0, 8, 12, 93})
_ZIP_ROOT_METADATA = frozenset({"zarr.json", ".zarray", ".zgroup", ".zmetadata"})


def _zip_route(store: Any) -> tuple[_Route | None, str | None]:
    """A read-only ZipStore's file, when zarrbuf sees the same entries in it."""
    if store.path is None:
        return None, "ZipStore over a file object (zarrbuf opens zip files by path)"
    if not store.read_only or getattr(store, "_zmode", None) != "r":
        return None, "ZipStore open for writing (its file is complete only once closed)"
    path = os.path.abspath(os.fspath(store.path))
    try:
        zf = getattr(store, "_zf", None) if getattr(store, "_is_open", False) else None
        if zf is not None:
            infos = zf.infolist()
        else:
            with zipfile.ZipFile(path) as own:
                infos = own.infolist()
    except (OSError, zipfile.BadZipFile, ValueError, AttributeError):
        return None, "ZipStore whose file zarrbuf could not list"
    names = [i.filename for i in infos]
    if len(set(names)) != len(names):
        return None, "ZipStore with duplicate entries (a key written twice)"
    if any(i.compress_type not in _ZIP_METHODS or i.flag_bits & 1 for i in infos):
        return None, "ZipStore with entries zarrbuf does not inflate (lzma, encrypted)"
    if not _ZIP_ROOT_METADATA & set(names):
        # zarrbuf starts a zip without root metadata in its single folder (zipped directory
        # stores), where zarr-python's ZipStore starts at the archive root.
        return None, "ZipStore without zarr metadata at the archive root"
    return _Route(path, no_writes="ZipStore is read-only"), None


# --- icechunk (icechunk.IcechunkStore) --------------------------------------------------


def _icechunk_route(store: Any) -> tuple[_Route | None, str | None]:
    """A read-only icechunk session, handed to zarrbuf whole (see the module docs)."""
    session = store.session
    if not session.read_only:
        return None, "a writable icechunk session (its uncommitted changes live in Python)"
    try:
        data = session._session.as_bytes()
    except Exception:  # an icechunk without Session.as_bytes: zarr-python reads it
        return None, "an icechunk session zarrbuf could not serialize"
    return _Route(f"icechunk snapshot {session.snapshot_id}", session=bytes(data)), None


def _is_cupy(arr: Any) -> bool:
    """A CuPy array (zarr-python's GPU buffers, ``zarr.config.enable_gpu()``)."""
    return type(arr).__module__.split(".")[0] == "cupy" and hasattr(
        arr, "__cuda_array_interface__"
    )


def _cupy() -> Any:
    import cupy

    return cupy


def _count(pipeline: ZarrbufCodecPipeline, path: str, reason: str | None = None) -> None:
    pipeline.stats[path] += 1
    STATS[path] += 1
    if reason is not None:
        pipeline.reasons[reason] = pipeline.reasons.get(reason, 0) + 1
        STATS_REASONS[reason] = STATS_REASONS.get(reason, 0) + 1


def _codecs(metadata: ArrayMetadata) -> tuple[Codec, ...]:
    if isinstance(metadata, ArrayV3Metadata):
        return tuple(metadata.codecs)
    return (V2Codec(filters=metadata.filters, compressor=metadata.compressor),)


_NOT_A_BOX = "a selection that is not a box (fancy, strided or masked indexing)"


@dataclass
class _Plan:
    """One batch as a box of the array: zarrbuf reads or writes it in one call."""

    array: Any  # _zarrbuf.Array
    ranges: list[tuple[int, int]]
    drop: list[int]
    target: np.ndarray  # the part of the output (or input) the box maps to


#: Reads of at most this many chunks (shards) and bytes run on the event loop's thread
#: instead of a worker thread (the time of the hand-off is that of the read).
_INLINE_CHUNKS = 4
_INLINE_BYTES = 1 << 20


@dataclass
class ZarrbufCodecPipeline(CodecPipeline):
    """A zarr-python codec pipeline that reads and writes through zarrbuf (see module docs)."""

    # Registered and pickled as "zarrbuf.ZarrbufCodecPipeline", the name users configure.
    __module__ = "zarrbuf"

    metadata: ArrayMetadata
    store: Store
    python_impl: BatchedCodecPipeline
    # A cache and counters: two pipelines for the same array and store are equal (as
    # zarr-python's are), whatever they have opened or counted so far.
    _arrays: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    _where: object = field(default=None, repr=False, compare=False)
    #: Batches zarrbuf handled and batches handed to zarr-python (for tests and tuning).
    stats: dict[str, int] = field(
        default_factory=lambda: {"zarrbuf": 0, "fallback": 0}, repr=False, compare=False
    )
    #: Why batches went to zarr-python: reason → batches (see ``STATS_REASONS``).
    reasons: dict[str, int] = field(default_factory=dict, repr=False, compare=False)
    #: Why zarrbuf could not open an array: array path → zarrbuf's message.
    open_errors: dict[str, str] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._where = _UNKNOWN

    def __getstate__(self) -> dict[str, Any]:
        return {"metadata": self.metadata, "store": self.store}

    def __setstate__(self, state: dict[str, Any]) -> None:
        fresh = type(self).from_array_metadata_and_store(state["metadata"], state["store"])
        self.__dict__.update(fresh.__dict__)

    @classmethod
    def from_array_metadata_and_store(cls, array_metadata: ArrayMetadata, store: Store) -> Self:
        return cls(
            metadata=array_metadata,
            store=store,
            python_impl=BatchedCodecPipeline.from_codecs(_codecs(array_metadata)),
        )

    @classmethod
    def from_codecs(cls, codecs: Iterable[Codec]) -> BatchedCodecPipeline:  # type: ignore[override]
        # Without metadata and a store there is nothing for zarrbuf to open.
        return BatchedCodecPipeline.from_codecs(codecs)

    def evolve_from_array_spec(self, array_spec: ArraySpec) -> Self:
        return self

    @property
    def supports_partial_decode(self) -> bool:
        return False

    @property
    def supports_partial_encode(self) -> bool:
        return False

    def __iter__(self) -> Iterator[Codec]:
        yield from self.python_impl

    def validate(self, *, shape: Any, dtype: Any, chunk_grid: Any) -> None:
        self.python_impl.validate(shape=shape, dtype=dtype, chunk_grid=chunk_grid)

    def compute_encoded_size(self, byte_length: int, array_spec: ArraySpec) -> int:
        return self.python_impl.compute_encoded_size(byte_length, array_spec)

    async def decode(
        self, chunk_bytes_and_specs: Iterable[tuple[Buffer | None, ArraySpec]]
    ) -> Iterable[NDBuffer | None]:
        return await self.python_impl.decode(chunk_bytes_and_specs)

    async def encode(
        self, chunk_arrays_and_specs: Iterable[tuple[NDBuffer | None, ArraySpec]]
    ) -> Iterable[Buffer | None]:
        return await self.python_impl.encode(chunk_arrays_and_specs)

    # --- the zarrbuf path -------------------------------------------------------------------

    def _split_key(self, key: str) -> tuple[str, tuple[int, ...]] | None:
        """A chunk's store key as (array path, chunk coordinates), checked by re-encoding."""
        md = self.metadata
        ndim = len(md.shape)
        if isinstance(md, ArrayV3Metadata):
            enc = md.chunk_key_encoding
            sep = getattr(enc, "separator", "/")
            default = getattr(enc, "name", "default") == "default"
        else:
            sep = md.dimension_separator or "."
            default = False
        if sep == "/":
            n = max(ndim + (1 if default else 0), 1)
            parts = key.split("/")
            if len(parts) < n:
                return None
            prefix, suffix = "/".join(parts[:-n]), parts[-n:]
        else:
            prefix, _, last = key.rpartition("/")
            suffix = last.split(sep)
        if default:
            if not suffix or suffix[0] != "c":
                return None
            suffix = suffix[1:]
        try:
            coords = tuple(int(x) for x in suffix) if ndim else ()
        except ValueError:
            return None
        if len(coords) != ndim:
            return None
        encoded = md.encode_chunk_key(coords)
        if (f"{prefix}/{encoded}" if prefix else encoded) != key:
            return None
        return prefix, coords

    def _route(self) -> tuple[_Route | None, str | None]:
        if self._where is _UNKNOWN:
            self._where = _store_route(self.store)
        return self._where  # type: ignore[return-value]

    def _array(self, prefix: str) -> tuple[Any, str | None]:
        """zarrbuf's array at ``prefix`` of the store, or None and why not."""
        if prefix not in self._arrays:
            route, why = self._route()
            if route is None:
                return None, why
            if route.escaped and not _plain_object_path(prefix, route.escaped):
                self._arrays[prefix] = (None, "array path with characters object_store escapes")
                return self._arrays[prefix]
            try:
                meta = json.dumps(self.metadata.to_dict())
                array = _zarrbuf.open_with_metadata(
                    route.root, prefix, meta, route.options, route.session
                )
                self._arrays[prefix] = (array, None)
            except (_zarrbuf.ZarrbufError, TypeError, ValueError) as e:
                # Metadata zarrs cannot use (a codec or type it lacks), or a store zarrbuf
                # cannot open with these options: zarr-python reads it.
                self.open_errors[prefix] = str(e)
                msg = str(e)
                if "metadata" in msg:
                    what = "array metadata zarrs cannot use"
                elif msg.startswith("unsupported") and "icechunk session" not in msg:
                    # (an icechunk session zarrbuf cannot use is a store it cannot open)
                    what = "an encoding zarrbuf does not read"
                else:
                    what = "a store zarrbuf cannot open"
                self._arrays[prefix] = (None, what)
        return self._arrays[prefix]

    def _plan(self, batch_info: list[Any], data: NDBuffer, drop_axes: tuple[int, ...], writing: bool) -> _Plan | str:
        """The batch as one box of the array, or the reason zarr-python must handle it."""
        if _FORKED:
            return "a process forked after zarrbuf started its threads"
        if not batch_info:
            return "an empty batch"
        if drop_axes:
            return "dropped axes (orthogonal indexing with integers)"
        route, why = self._route()
        if route is None:
            return why or "a store zarrbuf has no route to"
        if writing and self.store.read_only:
            return "a read-only store (zarr-python raises its error)"
        if writing and route.no_writes:
            return route.no_writes
        if not writing and config.get("array.read_missing_chunks", True) is False:
            # zarr-python reports missing chunks; zarrbuf reads them as fill
            return "array.read_missing_chunks = False"
        arr = data.as_ndarray_like()
        on_gpu = _is_cupy(arr)
        if type(arr) is not np.ndarray and not on_gpu:
            return "a buffer that is neither a NumPy nor a CuPy array"
        md_dtype = self.metadata.dtype.to_native_dtype()
        # Strings (StringDType) and variable-length bytes (objects) decode on the host.
        varlen = _VARLEN_KINDS.get(arr.dtype.kind) if not on_gpu else None
        if varlen is not None and arr.dtype != md_dtype:
            varlen = None
        if varlen is None and (
            arr.dtype.kind not in _KINDS or not arr.dtype.isnative or arr.dtype != md_dtype
        ):
            return "a data type zarrbuf does not decode (non-native order, objects, ...)"
        if not writing and not on_gpu and not arr.flags.writeable:
            return "a read-only output array"
        try:
            # The grid zarr-python's keys address: shards for sharded arrays.
            md = self.metadata
            shards = getattr(md, "shards", None)
            chunk_shape = tuple(shards if shards is not None else md.chunks)
        except (AttributeError, NotImplementedError, ValueError, TypeError):
            return "an irregular chunk grid"
        ndim = len(chunk_shape)
        lo = [math.inf] * ndim
        hi = [-math.inf] * ndim
        delta: list[int | None] = [None] * ndim
        ints: list[int | None] = [None] * ndim
        volume = 0
        prefix = None
        for byte_getter, _spec, chunk_sel, out_sel, _complete in batch_info:
            if getattr(byte_getter, "store", None) is not self.store:
                return "chunks of another store in the batch"
            split = self._split_key(byte_getter.path)
            if split is None:
                return "a chunk key zarrbuf does not parse"
            key_prefix, coords = split
            if prefix is None:
                prefix = key_prefix
            elif prefix != key_prefix:
                return "chunks of several arrays in the batch"
            if not isinstance(chunk_sel, tuple) or len(chunk_sel) != ndim:
                return _NOT_A_BOX
            if not isinstance(out_sel, tuple):
                out_sel = (out_sel,)
            out_iter = iter(out_sel)
            n = 1
            for k, s in enumerate(chunk_sel):
                origin = coords[k] * chunk_shape[k]
                if isinstance(s, slice):
                    start, stop, step = s.indices(chunk_shape[k])
                    if step != 1 or stop <= start:
                        return _NOT_A_BOX
                    a0, a1 = origin + start, origin + stop
                    o = next(out_iter, None)
                    if not isinstance(o, slice) or o.step not in (None, 1) or o.start is None:
                        return _NOT_A_BOX
                    d = a0 - o.start
                    if delta[k] is None:
                        delta[k] = d
                    elif delta[k] != d:
                        return _NOT_A_BOX
                    if ints[k] is not None:
                        return _NOT_A_BOX
                elif isinstance(s, (int, np.integer)) and not isinstance(s, (bool, np.bool_)):
                    a0 = origin + int(s)
                    a1 = a0 + 1
                    if ints[k] is None:
                        ints[k] = a0
                    elif ints[k] != a0:
                        return _NOT_A_BOX
                    if delta[k] is not None:
                        return _NOT_A_BOX
                else:
                    return _NOT_A_BOX  # arrays, masks: fancy indexing
                lo[k] = min(lo[k], a0)
                hi[k] = max(hi[k], a1)
                n *= a1 - a0
            if next(out_iter, None) is not None:
                return _NOT_A_BOX
            volume += n
        ranges = [(int(a), int(b)) for a, b in zip(lo, hi, strict=True)]
        if volume != math.prod(b - a for a, b in ranges):
            return _NOT_A_BOX  # chunks of a box are disjoint, so their volumes add up
        drop = [k for k in range(ndim) if ints[k] is not None]
        window = tuple(
            slice(ranges[k][0] - delta[k], ranges[k][1] - delta[k])  # type: ignore[operator]
            for k in range(ndim)
            if ints[k] is None
        )
        expected = tuple(b - a for k, (a, b) in enumerate(ranges) if ints[k] is None)
        if arr.ndim == len(window):
            target = arr[window + (Ellipsis,)]  # a view, also for 0-d outputs
        elif writing and arr.ndim == 0:
            xp = type(arr).__module__.split(".")[0] if on_gpu else "numpy"
            broadcast = np.broadcast_to if xp == "numpy" else _cupy().broadcast_to
            target = broadcast(arr, expected)  # a scalar written to a region
        else:
            return "a buffer whose shape does not match the selection"
        if target.shape != expected:
            return "a buffer whose shape does not match the selection"
        array, why = self._array(prefix or "")
        if array is None:
            return why or "an array zarrbuf cannot open"
        if getattr(array, "kind", None) != varlen:
            return "an output whose NumPy type does not match the array's elements"
        if writing and varlen is not None and not array.writable:
            return "strings written to an object store (zarrbuf writes them to local stores)"
        return _Plan(array, ranges, drop, target)

    async def read(
        self,
        batch_info: Iterable[tuple[Any, ArraySpec, Any, Any, bool]],
        out: NDBuffer,
        drop_axes: tuple[int, ...] = (),
    ) -> tuple[dict[str, str], ...]:
        batch = list(batch_info)
        plan = self._plan(batch, out, drop_axes, writing=False)
        if isinstance(plan, str):
            _count(self, "fallback", plan)
            return await self.python_impl.read(batch, out, drop_axes)
        _count(self, "zarrbuf")
        if _is_cupy(plan.target):
            # zarrbuf decodes into CuPy's memory on its own streams: CuPy's work on it
            # (zarr-python allocating and filling `out`) is finished first. zarrbuf's own
            # work is finished when read_into returns.
            _cupy().cuda.get_current_stream().synchronize()
        cache = pipeline_cache()
        prefix = pipeline_prefix_decode()
        io = pipeline_io_concurrency()
        if len(batch) <= _INLINE_CHUNKS and plan.target.nbytes <= _INLINE_BYTES:
            # A patch of a few chunks decodes in about the time a hand-off to a thread and
            # back takes: read it here (the GIL released) instead.
            plan.array.read_into(
                plan.ranges, plan.drop, plan.target, cache=cache, prefix_decode=prefix,
                io_concurrency=io,
            )
        else:
            await asyncio.to_thread(
                plan.array.read_into,
                plan.ranges,
                plan.drop,
                plan.target,
                cache=cache,
                prefix_decode=prefix,
                io_concurrency=io,
            )
        # zarr-python looks at the statuses only with array.read_missing_chunks = False,
        # which _plan hands to its own pipeline.
        return tuple({"status": "present"} for _ in batch)

    def _invalidate(self, batch: list[Any]) -> None:
        """Drops from the pipeline's cache the arrays a write zarr-python made touched
        (zarrbuf's own writes drop what they replace themselves)."""
        cache = _CACHE
        if cache is None:
            return
        prefixes = set()
        for byte_getter, *_ in batch:
            split = self._split_key(getattr(byte_getter, "path", ""))
            if split is None:
                cache.clear()  # a key zarrbuf does not parse: forget everything
                return
            prefixes.add(split[0])
        for prefix in prefixes:
            array, _why = self._array(prefix)
            if array is not None:
                array.invalidate_cache(cache)

    async def write(
        self,
        batch_info: Iterable[tuple[Any, ArraySpec, Any, Any, bool]],
        value: NDBuffer,
        drop_axes: tuple[int, ...] = (),
    ) -> None:
        batch = list(batch_info)
        plan = self._plan(batch, value, drop_axes, writing=True)
        if isinstance(plan, str):
            _count(self, "fallback", plan)
            await self.python_impl.write(batch, value, drop_axes)
            self._invalidate(batch)
            # zarrbuf's arrays keep the shard indexes they read: open them again for the
            # shards zarr-python just rewrote.
            self._arrays.clear()
            return
        _count(self, "zarrbuf")
        if _is_cupy(plan.target):
            _cupy().cuda.get_current_stream().synchronize()  # the values are written
        data = plan.target
        kind = getattr(plan.array, "kind", None)
        if kind is not None:
            from .strings import to_varlen

            data = to_varlen(data, kind, data.shape)
        await asyncio.to_thread(plan.array.write, plan.ranges, plan.drop, data)


def _register() -> None:
    from zarr.registry import register_pipeline

    register_pipeline(ZarrbufCodecPipeline)  # "zarrbuf.ZarrbufCodecPipeline"


_register()
