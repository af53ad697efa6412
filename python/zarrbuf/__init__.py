"""zarrbuf: read and write zarr arrays (v2 and v3) into host or CUDA memory, from Python.

    >>> import zarrbuf, numpy, torch
    >>> a = zarrbuf.open("data.zarr", "group/temperature")
    >>> x = a.read((slice(0, 64), ...), device="cuda")   # decoded on the way into the GPU
    >>> t = torch.from_dlpack(x)                          # no copy
    >>> h = numpy.asarray(a.read(...))                    # host memory, no copy

Results are :class:`NDArray` objects: they implement ``__dlpack__`` /
``__dlpack_device__`` and ``__array_interface__`` (host) or ``__cuda_array_interface__``
(device), so numpy, torch, CuPy and JAX take them without copying. Arrays of
variable-length strings or bytes read into :class:`VarLenArray` objects (Arrow's layout:
``numpy.asarray`` gives ``StringDType``, ``pyarrow.array`` takes them without a copy).

zarr-python uses zarrbuf for its reads and writes with::

    zarr.config.set({"codec_pipeline.path": "zarrbuf.ZarrbufCodecPipeline"})
"""

from __future__ import annotations

import json
import operator
import os
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from ._zarrbuf import (
    ChunkCache,
    NDArray,
    VarLenArray,
    ZarrbufError,
    check,
    cuda_device_count,
    from_dlpack,
    nvcomp_compression,
    nvcomp_library,
)
from ._zarrbuf import list_hierarchy as _list_hierarchy
from ._zarrbuf import open as _open

__all__ = [
    "Array",
    "ChunkCache",
    "NDArray",
    "VarLenArray",
    "ZarrbufCodecPipeline",
    "ZarrbufError",
    "check",
    "cuda_device_count",
    "from_dlpack",
    "list_hierarchy",
    "nvcomp_compression",
    "nvcomp_library",
    "open",
    "rank_slice",
]


def normalize_selection(
    selection: Any, shape: tuple[int, ...]
) -> tuple[list[tuple[int, int]], list[int]]:
    """Basic numpy indexing (integers, slices with step 1, one Ellipsis) as array ranges.

    Returns one ``(start, stop)`` per dimension and the axes indexed by an integer (which the
    result drops).
    """
    if not isinstance(selection, tuple):
        selection = (selection,)
    ellipses = [k for k, s in enumerate(selection) if s is Ellipsis]
    if len(ellipses) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if ellipses:
        k = ellipses[0]
        fill = len(shape) - (len(selection) - 1)
        if fill < 0:
            raise IndexError(
                f"too many indices: the array has {len(shape)} dimensions, "
                f"{len(selection) - 1} were indexed"
            )
        selection = selection[:k] + (slice(None),) * fill + selection[k + 1 :]
    if len(selection) > len(shape):
        raise IndexError(
            f"too many indices: the array has {len(shape)} dimensions, "
            f"{len(selection)} were indexed"
        )
    selection = selection + (slice(None),) * (len(shape) - len(selection))
    ranges: list[tuple[int, int]] = []
    drop: list[int] = []
    for axis, (s, n) in enumerate(zip(selection, shape, strict=True)):
        if isinstance(s, slice):
            start, stop, step = s.indices(n)
            if step != 1:
                raise IndexError(
                    f"zarrbuf reads slices with step 1; axis {axis} has step {step} "
                    "(read the range, then step through the result)"
                )
            ranges.append((start, max(start, stop)))
        elif isinstance(s, (bool, np.bool_)):
            raise IndexError(f"boolean index on axis {axis}: zarrbuf supports basic slicing only")
        else:
            try:
                i = operator.index(s)
            except TypeError:
                raise IndexError(
                    f"unsupported index {s!r} on axis {axis}: zarrbuf supports integers, "
                    "slices with step 1 and one Ellipsis (use zarr-python for fancy indexing)"
                ) from None
            if i < 0:
                i += n
            if not 0 <= i < n:
                raise IndexError(f"index {s} is out of bounds for axis {axis} with size {n}")
            ranges.append((i, i + 1))
            drop.append(axis)
    return ranges, drop


def _dlpack_device(obj: Any) -> tuple[int, int] | None:
    f = getattr(obj, "__dlpack_device__", None)
    if f is None:
        return None
    try:
        return tuple(f())
    except Exception:
        return None


_CPU_DEVICES = {1, 3}  # kDLCPU, kDLCUDAHost


class Array:
    """A zarr array opened by :func:`open`."""

    def __init__(self, inner: Any) -> None:
        self._opened = inner
        self._opened_in = os.getpid()

    @property
    def _inner(self) -> Any:
        # An open array belongs to the process that opened it: its connections and locks
        # are its threads', and a forked child using it could wait on them forever.
        if self._opened_in != os.getpid():
            raise ZarrbufError(
                f"this array was opened in process {self._opened_in}, and this is a forked "
                f"process ({os.getpid()}): open it again here with zarrbuf.open(...) (a "
                "DataLoader or multiprocessing worker opens its own; zarrbuf.torch's "
                "datasets do)"
            )
        return self._opened

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._inner.shape)

    @property
    def dtype(self) -> str:
        """numpy's type string (``"<f4"``); ``numpy.dtype(a.dtype)`` is the numpy dtype.
        Strings are ``"T"`` (``StringDType``), variable-length bytes ``"O"`` (``bytes``)."""
        return self._inner.dtype

    @property
    def chunks(self) -> tuple[int, ...]:
        return tuple(self._inner.chunks)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def io_concurrency(self) -> int:
        """Requests to an object store this array's reads keep in flight (``open(...,
        io_concurrency=N)``, else ``ZARRBUF_IO_CONCURRENCY``, else 128)."""
        return int(self._inner.io_concurrency)

    @property
    def prefix_decode(self) -> bool:
        """Whether small reads decode zstd chunks only as far as they need (the default;
        ``open(..., prefix_decode=False)`` decodes them whole)."""
        return bool(getattr(self._inner, "prefix_decode", False))

    @property
    def cache(self) -> ChunkCache | None:
        """The :class:`ChunkCache` every read of this array goes through (``open(...,
        cache=...)`` or ``cache_bytes=...``), or None."""
        return self._inner.cache

    def invalidate_cache(self) -> None:
        """Drops this array's chunks from its cache: for changes made to the store other
        than through zarrbuf (another process, zarr-python's own writes), which a cache does
        not see. Writes through zarrbuf need no call."""
        self._inner.invalidate_cache()

    def read(
        self, selection: Any = Ellipsis, device: str = "cpu", decode: str = "auto"
    ) -> NDArray | VarLenArray:
        """Reads ``selection`` (basic slicing) into new memory on ``device`` (``"cpu"``,
        ``"cuda"``, ``"cuda:N"``). ``decode`` says where reads into a GPU decompress:
        ``"auto"`` (the CPU today), ``"cpu"``, ``"gpu"`` (nvCOMP, when it is installed) or
        ``"both"``. Arrays of strings or bytes give a :class:`VarLenArray`."""
        ranges, drop = normalize_selection(selection, self.shape)
        return self._inner.read(ranges, drop, device, decode)

    def read_stream(
        self, selections: Iterable[Any], device: str = "cpu", prefetch: int = 4
    ) -> Iterator[NDArray] | Iterator[VarLenArray]:
        """Reads many selections (a training loop's minibatches) ahead of the caller and
        yields their results in order, as :meth:`read` would return them (a
        :class:`VarLenArray` each for arrays of strings or bytes).

        At most ``prefetch`` selections are read at once (counting results not yet taken);
        ``selections`` is pulled lazily, so it may be endless. Chunks needed by several
        selections in flight are fetched once (strings too: one stream for both kinds).
        ``next()`` waits with the GIL released. A failed selection raises
        :class:`ZarrbufError` naming it (its position and ranges); calling ``next()`` again
        goes on with the next one. ``close()`` (or dropping the iterator) cancels the reads
        in flight. Wrap it in a ``torch.utils.data.IterableDataset`` to feed a training loop
        (see the README).

            >>> batches = a.read_stream(((slice(i, i + 64), ...) for i in starts), device="cuda")
            >>> for x in batches: train_step(torch.from_dlpack(x))
        """
        if isinstance(prefetch, bool) or not isinstance(prefetch, (int, np.integer)) or prefetch < 1:
            raise ValueError(f"prefetch must be an integer >= 1, got {prefetch!r}")
        shape = self.shape
        normalized = (normalize_selection(s, shape) for s in selections)
        return self._inner.read_stream(normalized, device, int(prefetch))

    def __getitem__(self, selection: Any) -> np.ndarray:
        """``a[sel]``: a numpy array over zarrbuf's host memory (no copy)."""
        return np.asarray(self.read(selection))

    def write(self, selection: Any, data: Any) -> None:
        """Writes ``data`` into ``selection``: numpy arrays and anything numpy.asarray takes
        (cast to the array's dtype and broadcast as numpy would), or device arrays (torch,
        CuPy, JAX) of exactly the selection's shape and dtype, read in place. Arrays of
        strings or bytes take what :func:`zarrbuf.strings.to_varlen` takes (``str`` lists,
        ``StringDType``, ``<U`` and object arrays, pyarrow arrays; ``bytes`` likewise)."""
        ranges, drop = normalize_selection(selection, self.shape)
        shape = tuple(b - a for k, (a, b) in enumerate(ranges) if k not in drop)
        kind = getattr(self._inner, "kind", None)
        if kind is not None:
            from .strings import to_varlen

            self._inner.write(ranges, drop, to_varlen(data, kind, shape))
            return
        device = _dlpack_device(data)
        if device is not None and device[0] not in _CPU_DEVICES:
            self._inner.write(ranges, drop, data)
            return
        dtype = np.dtype(self.dtype)
        value = np.asarray(data)
        if value.dtype != dtype:
            value = value.astype(dtype)
        while value.ndim > len(shape) and value.shape[0] == 1:
            value = value[0]  # numpy's assignment drops leading length-1 axes
        if value.shape != shape:
            value = np.broadcast_to(value, shape)
        if not value.dtype.isnative:
            value = value.astype(value.dtype.newbyteorder("="))
        if dtype.kind in "MmSUV":
            # No DLPack code for these: hand over their bytes, which the Rust side retypes.
            value = np.ascontiguousarray(value)
            value = value.view(np.uint8).reshape(value.shape + (dtype.itemsize,))
            self._inner.write_raw(ranges, drop, value)
            return
        self._inner.write(ranges, drop, value)

    def __setitem__(self, selection: Any, data: Any) -> None:
        self.write(selection, data)

    def __repr__(self) -> str:
        return repr(self._inner)


def rank_slice(length: int, chunk: int, rank: int, world_size: int) -> slice:
    """The part of an axis of ``length`` elements in chunks of ``chunk`` that rank ``rank`` of
    ``world_size`` reads: whole chunks only (no chunk is read by two ranks), as even as whole
    chunks allow (the first ``n_chunks % world_size`` ranks take one chunk more). A rank
    with no chunk left gets an empty slice.

    >>> [rank_slice(100, 10, r, 3) for r in range(3)]
    [slice(0, 40, None), slice(40, 70, None), slice(70, 100, None)]
    """
    for name, v in (("length", length), ("chunk", chunk), ("rank", rank), ("world_size", world_size)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"{name} must be an integer, got {v!r}")
    if length < 0 or chunk < 1 or world_size < 1:
        raise ValueError(
            f"need length >= 0, chunk >= 1 and world_size >= 1; got length={length}, "
            f"chunk={chunk}, world_size={world_size}"
        )
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is outside 0..{world_size - 1} (world_size {world_size})")
    n_chunks = -(-length // chunk)
    base, extra = divmod(n_chunks, world_size)
    first = rank * base + min(rank, extra)
    count = base + (1 if rank < extra else 0)
    return slice(min(first * chunk, length), min((first + count) * chunk, length))


def open(  # noqa: A001 - mirrors zarr.open
    location: str,
    path: str = "",
    *,
    branch: str | None = None,
    tag: str | None = None,
    snapshot: str | None = None,
    virtual_access: list[str] | None = None,
    cache: ChunkCache | None = None,
    cache_bytes: int | None = None,
    prefix_decode: bool = True,
    io_concurrency: int | None = None,
) -> Array:
    """Opens the zarr array at ``path`` in the store at ``location``: a directory, a zip file
    (read-only), a ``file://`` URL, or an object-store URL (``s3://``, ``gs://``, ``az://``,
    ``http(s)://``) with credentials from the usual environment variables. A group raises
    ``ZarrbufError`` naming the arrays under it.

    An icechunk repository (a local directory or an ``s3://``/``gs://``/``az://`` prefix
    holding one) opens read-only at the tip of ``branch`` (default ``"main"``), at ``tag``,
    or at ``snapshot`` (an id); give at most one. ``virtual_access`` lists the URL prefixes
    of its virtual chunk containers that reads may fetch from (credentials from the
    environment); a virtual chunk elsewhere raises ``ZarrbufError`` naming it.

        >>> t = zarrbuf.open("repo", "temperature", tag="v1")

    Every read of the array goes through a cache of decoded chunks when one is given:
    ``cache_bytes=N`` makes a new one of ``N`` bytes for this array, ``cache=c`` shares the
    :class:`ChunkCache` ``c`` with the other arrays opened with it (give one or neither).
    Repeated reads of the same chunks (a training loop's epochs) then skip fetching and
    decoding; writes through zarrbuf drop the chunks they replace; changes by other
    processes are not seen (see ``Array.invalidate_cache``).

        >>> cache = zarrbuf.ChunkCache(1 << 30)
        >>> a = zarrbuf.open("data.zarr", "images", cache=cache)
        >>> cache.stats()["hits"]
        0

    Small reads (a few chunks, such as a training loop's patches) decode a zstd or blosc
    (LZ4, zstd) chunk only up to the last element they need: about half of it for a random
    plane (blosc: the blocks that hold it). The bytes decoded from an intact prefix are the
    bytes written (zstd blocks refer only to earlier data, blosc blocks are independent), and
    the frame's header, declared size and block layout are still checked; damage inside the
    compressed contents of later blocks is reported by reads that need them and by ``zarrbuf
    check``. ``prefix_decode=False`` decodes every chunk whole. Chunks with a crc32c codec or
    a zstd content checksum, and reads through a cache, decode whole either way; gzip and
    zlib chunks (whose trailers are content checksums) decode by prefix only when checksums
    are not validated.

    Reads from object stores keep many requests in flight ahead of the decoders: each waits a
    round trip (20-80 ms on S3) before its bytes come. ``io_concurrency=N`` sets how many
    (default: the environment variable ``ZARRBUF_IO_CONCURRENCY``, else 128 for a store 80 ms
    or more away, fewer for a nearer one as measured on its answers, and more for small
    chunks); local stores ignore it.
    """
    a = Array(_open(str(location), path, branch=branch, tag=tag, snapshot=snapshot,
                    virtual_access=virtual_access, cache=cache, cache_bytes=cache_bytes,
                    prefix_decode=bool(prefix_decode),
                    io_concurrency=None if io_concurrency is None else int(io_concurrency)))
    # What another process needs to open it again (zarrbuf.torch's datasets pickle this;
    # the cache stays behind: caches are per process).
    a._open_args = (str(location), path, {k: v for k, v in (
        ("branch", branch), ("tag", tag), ("snapshot", snapshot),
        ("virtual_access", virtual_access), ("prefix_decode", None if prefix_decode else False),
        ("io_concurrency", io_concurrency))
        if v is not None})
    return a


def list_hierarchy(
    location: str,
    path: str = "",
    *,
    branch: str | None = None,
    tag: str | None = None,
    snapshot: str | None = None,
) -> dict[str, Any]:
    """The groups and arrays at and under ``path`` in the store at ``location`` (as
    :func:`open` takes it), from consolidated metadata where the group has it, else from
    listing the store: the same as ``zarrbuf info --json``.

    Returns ``{"location", "path", "consolidated", "nodes"}``; each node has ``path`` (what
    :func:`open` takes), ``zarr_format`` and ``node_type`` (``"group"`` or ``"array"``), and
    an array also ``shape``, ``data_type``, ``chunks``, ``shards`` (``None`` unless sharded),
    ``codecs``, ``fill_value``, ``chunks_stored``, ``chunks_total``, ``stored_bytes`` and
    ``unreadable`` (why zarrbuf cannot read it, else ``None``). ``branch``, ``tag`` and
    ``snapshot`` choose the version of an icechunk repository, as in :func:`open`.

        >>> h = zarrbuf.list_hierarchy("data.zarr")
        >>> [n["path"] for n in h["nodes"] if n["node_type"] == "array"]
        ['g/labels', 'temperature']
    """
    return json.loads(_list_hierarchy(str(location), path, branch=branch, tag=tag,
                                      snapshot=snapshot))


def __getattr__(name: str) -> Any:
    # The codec pipeline imports zarr-python: only when asked for.
    if name == "ZarrbufCodecPipeline":
        from .pipeline import ZarrbufCodecPipeline

        return ZarrbufCodecPipeline
    raise AttributeError(f"module 'zarrbuf' has no attribute {name!r}")
