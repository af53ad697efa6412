"""``ZarrbufCodecPipeline``: zarr-python's reads and writes through zarrbuf.

    zarr.config.set({"codec_pipeline.path": "zarrbuf.ZarrbufCodecPipeline"})

zarr-python hands a codec pipeline one batch per read or write: for every chunk the
selection touches, its store key, the part of the chunk and the part of the output. When the
batch is a box of the array (basic slicing with step 1, integers), the array sits in a local
directory store (``LocalStore``) or in S3 (``FsspecStore`` over s3fs: zarrbuf reads and
writes the same ``s3://bucket/prefix`` through object_store, with s3fs's endpoint, region
and credentials, else the ``AWS_*`` environment), and the output is a native-order NumPy
array — or a CuPy array with ``zarr.config.enable_gpu()``, which zarrbuf writes on the
device, without zarr-python's host round trips — of a type DLPack knows, zarrbuf decodes the whole box straight into the output
(``read_into``: no per-chunk temporaries) or encodes it from the input, off the event loop
and without the GIL. Everything else — other stores (memory, zip, obstore, other fsspec
filesystems, wrapped or mocked stores), fancy and strided indexing, variable-length and
other types, ``array.read_missing_chunks = False``, processes forked
after zarrbuf started its threads — goes to zarr-python's own ``BatchedCodecPipeline``, as
zarrs-python does. Modelled on zarrs-python's ``ZarrsCodecPipeline``.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from zarr.abc.codec import CodecPipeline
from zarr.codecs._v2 import V2Codec
from zarr.core.codec_pipeline import BatchedCodecPipeline
from zarr.core.config import config
from zarr.core.metadata import ArrayMetadata, ArrayV2Metadata, ArrayV3Metadata
from zarr.storage import LocalStore

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

#: Batches zarrbuf handled and batches handed to zarr-python, over every pipeline of this
#: process (``stats`` on a pipeline counts its own). Tests read it to check that zarrbuf's
#: Rust path really ran.
STATS: dict[str, int] = {"zarrbuf": 0, "fallback": 0}


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


def _store_location(store: Any) -> tuple[str, list[tuple[str, str]] | None] | None:
    """Where zarrbuf finds ``store``'s keys: a directory (LocalStore) or an s3:// URL with
    object_store options (FsspecStore over s3fs); None for every other store."""
    # type(), not isinstance: a mock or proxy with a store's spec passes isinstance.
    if issubclass(type(store), LocalStore):
        return str(store.root), None
    if type(store).__name__ == "FsspecStore" and type(store).__module__.startswith("zarr."):
        fs = store.fs
        protocol = fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)
        if "s3" not in protocol or type(fs).__module__.split(".")[0] != "s3fs":
            return None
        path = str(store.path).strip("/")
        if not path or "://" in path:
            return None
        options = _s3_options(fs)
        if options is None:
            return None
        return f"s3://{path}", options
    return None


def _is_cupy(arr: Any) -> bool:
    """A CuPy array (zarr-python's GPU buffers, ``zarr.config.enable_gpu()``)."""
    return type(arr).__module__.split(".")[0] == "cupy" and hasattr(
        arr, "__cuda_array_interface__"
    )


def _cupy() -> Any:
    import cupy

    return cupy


def _count(pipeline: ZarrbufCodecPipeline, path: str) -> None:
    pipeline.stats[path] += 1
    STATS[path] += 1


def _codecs(metadata: ArrayMetadata) -> tuple[Codec, ...]:
    if isinstance(metadata, ArrayV3Metadata):
        return tuple(metadata.codecs)
    return (V2Codec(filters=metadata.filters, compressor=metadata.compressor),)


@dataclass
class _Plan:
    """One batch as a box of the array: zarrbuf reads or writes it in one call."""

    array: Any  # _zarrbuf.Array
    ranges: list[tuple[int, int]]
    drop: list[int]
    target: np.ndarray  # the part of the output (or input) the box maps to


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

    def _location(self) -> tuple[str, list[tuple[str, str]] | None] | None:
        if self._where is _UNKNOWN:
            self._where = _store_location(self.store)
        return self._where  # type: ignore[return-value]

    def _array(self, prefix: str) -> Any:
        if prefix not in self._arrays:
            try:
                location = self._location()
                if location is None:
                    raise TypeError("not a store zarrbuf reaches")
                root, options = location
                meta = json.dumps(self.metadata.to_dict())
                self._arrays[prefix] = _zarrbuf.open_with_metadata(root, prefix, meta, options)
            except (_zarrbuf.ZarrbufError, TypeError, ValueError):
                # Metadata zarrs cannot use (a codec or type it lacks): zarr-python reads it.
                self._arrays[prefix] = None
        return self._arrays[prefix]

    def _plan(self, batch_info: list[Any], data: NDBuffer, drop_axes: tuple[int, ...], writing: bool) -> _Plan | None:
        """The batch as one box of the array, or None when zarr-python must handle it."""
        if not batch_info or drop_axes or _FORKED:
            return None
        if self._location() is None:
            return None
        if writing and self.store.read_only:
            return None  # zarr-python raises its own error
        if not writing and config.get("array.read_missing_chunks", True) is False:
            return None  # zarr-python reports missing chunks; zarrbuf reads them as fill
        arr = data.as_ndarray_like()
        on_gpu = _is_cupy(arr)
        if type(arr) is not np.ndarray and not on_gpu:
            return None
        md_dtype = self.metadata.dtype.to_native_dtype()
        if arr.dtype.kind not in _KINDS or not arr.dtype.isnative or arr.dtype != md_dtype:
            return None
        if not writing and not on_gpu and not arr.flags.writeable:
            return None
        try:
            # The grid zarr-python's keys address: shards for sharded arrays.
            md = self.metadata
            shards = getattr(md, "shards", None)
            chunk_shape = tuple(shards if shards is not None else md.chunks)
        except (AttributeError, NotImplementedError, ValueError, TypeError):
            return None  # an irregular chunk grid
        ndim = len(chunk_shape)
        lo = [math.inf] * ndim
        hi = [-math.inf] * ndim
        delta: list[int | None] = [None] * ndim
        ints: list[int | None] = [None] * ndim
        volume = 0
        prefix = None
        for byte_getter, _spec, chunk_sel, out_sel, _complete in batch_info:
            if getattr(byte_getter, "store", None) is not self.store:
                return None
            split = self._split_key(byte_getter.path)
            if split is None:
                return None
            key_prefix, coords = split
            if prefix is None:
                prefix = key_prefix
            elif prefix != key_prefix:
                return None
            if not isinstance(chunk_sel, tuple) or len(chunk_sel) != ndim:
                return None
            if not isinstance(out_sel, tuple):
                out_sel = (out_sel,)
            out_iter = iter(out_sel)
            n = 1
            for k, s in enumerate(chunk_sel):
                origin = coords[k] * chunk_shape[k]
                if isinstance(s, slice):
                    start, stop, step = s.indices(chunk_shape[k])
                    if step != 1 or stop <= start:
                        return None
                    a0, a1 = origin + start, origin + stop
                    o = next(out_iter, None)
                    if not isinstance(o, slice) or o.step not in (None, 1) or o.start is None:
                        return None
                    d = a0 - o.start
                    if delta[k] is None:
                        delta[k] = d
                    elif delta[k] != d:
                        return None
                    if ints[k] is not None:
                        return None
                elif isinstance(s, (int, np.integer)) and not isinstance(s, (bool, np.bool_)):
                    a0 = origin + int(s)
                    a1 = a0 + 1
                    if ints[k] is None:
                        ints[k] = a0
                    elif ints[k] != a0:
                        return None
                    if delta[k] is not None:
                        return None
                else:
                    return None  # arrays, masks: fancy indexing
                lo[k] = min(lo[k], a0)
                hi[k] = max(hi[k], a1)
                n *= a1 - a0
            if next(out_iter, None) is not None:
                return None
            volume += n
        ranges = [(int(a), int(b)) for a, b in zip(lo, hi, strict=True)]
        if volume != math.prod(b - a for a, b in ranges):
            return None  # not a box (chunks of a box are disjoint, so volumes add up)
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
            return None
        if target.shape != expected:
            return None
        array = self._array(prefix or "")
        if array is None:
            return None
        return _Plan(array, ranges, drop, target)

    async def read(
        self,
        batch_info: Iterable[tuple[Any, ArraySpec, Any, Any, bool]],
        out: NDBuffer,
        drop_axes: tuple[int, ...] = (),
    ) -> tuple[dict[str, str], ...]:
        batch = list(batch_info)
        plan = self._plan(batch, out, drop_axes, writing=False)
        if plan is None:
            _count(self, "fallback")
            return await self.python_impl.read(batch, out, drop_axes)
        _count(self, "zarrbuf")
        if _is_cupy(plan.target):
            # zarrbuf decodes into CuPy's memory on its own streams: CuPy's work on it
            # (zarr-python allocating and filling `out`) is finished first. zarrbuf's own
            # work is finished when read_into returns.
            _cupy().cuda.get_current_stream().synchronize()
        await asyncio.to_thread(plan.array.read_into, plan.ranges, plan.drop, plan.target)
        # zarr-python looks at the statuses only with array.read_missing_chunks = False,
        # which _plan hands to its own pipeline.
        return tuple({"status": "present"} for _ in batch)

    async def write(
        self,
        batch_info: Iterable[tuple[Any, ArraySpec, Any, Any, bool]],
        value: NDBuffer,
        drop_axes: tuple[int, ...] = (),
    ) -> None:
        batch = list(batch_info)
        plan = self._plan(batch, value, drop_axes, writing=True)
        if plan is None:
            _count(self, "fallback")
            await self.python_impl.write(batch, value, drop_axes)
            return
        _count(self, "zarrbuf")
        if _is_cupy(plan.target):
            _cupy().cuda.get_current_stream().synchronize()  # the values are written
        await asyncio.to_thread(plan.array.write, plan.ranges, plan.drop, plan.target)


def _register() -> None:
    from zarr.registry import register_pipeline

    register_pipeline(ZarrbufCodecPipeline)  # "zarrbuf.ZarrbufCodecPipeline"


_register()
