"""PyTorch datasets over a zarr array: patches read by zarrbuf, handed to torch by DLPack.

    >>> import torch, zarrbuf.torch as zt
    >>> sampler = zt.PatchSampler((512, 512, 512), (1, 64, 64), num_patches=10_000, seed=0)
    >>> ds = zt.ZarrDataset("data.zarr", (1, 64, 64), sampler, path="train/x")
    >>> loader = torch.utils.data.DataLoader(ds, batch_size=32, sampler=sampler, num_workers=4)
    >>> for epoch in range(10):
    ...     sampler.set_epoch(epoch)            # a new order each epoch, the same on every rank
    ...     for batch in loader: ...             # float32 tensors of shape (32, 1, 64, 64)

- :class:`PatchSampler` holds the patch origins (random and seeded, on a grid, or given) and
  yields indices into them: a new order each epoch (:meth:`PatchSampler.set_epoch`, as
  ``torch.utils.data.DistributedSampler``), split across ``torch.distributed`` ranks and,
  when iterated inside a DataLoader worker, across the workers. Every index is yielded
  exactly once per epoch by all ranks × workers together.
- :class:`ZarrDataset` is map-style: item ``i`` is the patch at origin ``i``. A DataLoader
  fetches each batch's patches together (``__getitems__``, concurrently).
- :class:`ZarrIterableDataset` iterates its sampler and reads ahead with
  :meth:`zarrbuf.Array.read_stream`, yielding patches or stacked batches.

Each process opens the array itself, lazily: pickling a dataset (to DataLoader worker
processes started by spawn or forkserver, or to other ranks) carries the location and the
options, never an open array. Caches are per process: with ``cache_bytes=N`` each process
(the main one and every DataLoader worker) holds its own decoded-chunk cache of up to N
bytes, so ``num_workers=4`` may hold 5 × N bytes; a ``zarrbuf.ChunkCache`` given as
``cache=`` is used as it is in the process that made it, and becomes one new cache of the
same size in each other process (shared there by the datasets that shared it). DataLoader
workers end with each epoch unless ``persistent_workers=True``, which a map-style dataset
takes (its order comes from the sampler in the main process) and which keeps their caches
warm from epoch to epoch. Workers started by ``fork`` (Linux's default), ``forkserver`` or
``spawn`` all work: zarrbuf builds its thread pool and async runtime again in a forked
process.

Errors in DataLoader worker processes reach the training loop: zarrbuf's errors (a damaged
chunk, a store that went away) cross to the main process as ``ZarrbufError`` with their
message, for both datasets and any ``num_workers``; an error whose class a worker cannot
send (one defined inside a function, raised by a ``transform``) arrives as ``RuntimeError``
naming it, instead of hanging the loader or ending an iterable epoch early.

This module imports torch; ``import zarrbuf`` does not.
"""

from __future__ import annotations

import itertools
import operator
import os
import pickle
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NoReturn

import numpy as np

try:
    import torch
    from torch.utils.data import Dataset, IterableDataset, Sampler
except ImportError as e:  # pragma: no cover - CI installs torch
    raise ImportError(
        "zarrbuf.torch needs PyTorch (`pip install torch`); the rest of zarrbuf works without it"
    ) from e

import zarrbuf

__all__ = ["PatchSampler", "ZarrDataset", "ZarrIterableDataset"]


def _ints(name: str, value: Any) -> tuple[int, ...]:
    try:
        out = tuple(operator.index(v) for v in value)
    except TypeError:
        raise TypeError(f"{name} must be a sequence of integers, got {value!r}") from None
    return out


def _shape_of(shape_or_array: Any) -> tuple[int, ...]:
    shape = getattr(shape_or_array, "shape", shape_or_array)
    return _ints("shape", shape)


def check_patch_shape(patch_shape: Any, shape: tuple[int, ...]) -> tuple[int, ...]:
    """``patch_shape`` as a tuple, after checking that it fits ``shape`` (raises
    ``ValueError`` saying what is wrong)."""
    patch = _ints("patch_shape", patch_shape)
    if len(patch) != len(shape):
        raise ValueError(
            f"patch_shape {patch} has {len(patch)} dimensions but the array has {len(shape)} "
            f"(shape {shape}); give one extent per dimension (1 for a single index)"
        )
    for axis, (p, n) in enumerate(zip(patch, shape, strict=True)):
        if not 1 <= p <= n:
            raise ValueError(
                f"patch_shape {patch} does not fit the array of shape {shape}: axis {axis} "
                f"needs 1 <= extent <= {n}, got {p}"
            )
    return patch


def check_origins(origins: Any, shape: tuple[int, ...], patch: tuple[int, ...]) -> np.ndarray:
    """``origins`` as a read-only ``(N, ndim)`` int64 array, after checking that every patch
    lies inside the array (raises ``ValueError`` naming the first that does not)."""
    o = np.asarray(origins)
    if o.size == 0:
        o = o.reshape(0, len(shape))
    if o.ndim != 2 or o.shape[1] != len(shape) or (o.size and o.dtype.kind not in "iu"):
        raise ValueError(
            f"origins must be integers of shape (N, {len(shape)}) (one row per patch), "
            f"got an array of shape {o.shape} and dtype {o.dtype}"
        )
    o = o.astype(np.int64)
    limit = np.asarray(shape, dtype=np.int64) - np.asarray(patch, dtype=np.int64)
    bad = np.flatnonzero(((o < 0) | (o > limit)).any(axis=1))
    if bad.size:
        i = int(bad[0])
        raise ValueError(
            f"patch {i} at origin {tuple(int(v) for v in o[i])} of shape {patch} lies outside "
            f"the array of shape {shape} (origins must lie in 0..={tuple(int(v) for v in limit)}"
            f"); {bad.size} of {len(o)} patches are outside"
        )
    o.setflags(write=False)
    return o


class PatchSampler(Sampler[int]):
    """Indices of patches of ``patch_shape`` in an array of ``shape``, for a DataLoader.

    The patches are ``num_patches`` random origins drawn once from ``seed`` (uniform over
    every origin where the patch fits), or ``origins`` given as an ``(N, ndim)`` array (see
    also :meth:`grid`). They are the same every epoch; the order is not: with ``shuffle``,
    epoch ``e`` (:meth:`set_epoch`) visits the indices in a permutation drawn from
    ``(seed, e)``, so every rank must use the same ``seed``.

    The indices of an epoch are split across ``world_size`` ranks (rank ``r`` takes every
    ``world_size``-th, from the ``r``-th), ``rank`` and ``world_size`` given or taken from
    ``torch.distributed`` when it is initialized (else 0 and 1). Iterated inside a
    DataLoader worker (an iterable dataset does that), a rank's indices are split again
    across the workers. Every index is yielded exactly once per epoch by all ranks and
    workers together; ranks then differ by at most one index. ``drop_last=True`` drops the
    last ``N % world_size`` indices of each epoch's order so that every rank gets the same
    count (what DDP needs to stay in step), each index still at most once.

        >>> s = PatchSampler((100, 64, 64), (1, 64, 64), num_patches=6, seed=1, rank=0, world_size=2)
        >>> len(s), s.origins.shape
        (3, (6, 3))
    """

    def __init__(
        self,
        shape: Any,
        patch_shape: Sequence[int],
        num_patches: int | None = None,
        *,
        origins: Any = None,
        seed: int = 0,
        shuffle: bool = True,
        rank: int | None = None,
        world_size: int | None = None,
        drop_last: bool = False,
    ) -> None:
        self.shape = _shape_of(shape)
        self.patch_shape = check_patch_shape(patch_shape, self.shape)
        self.seed = operator.index(seed)
        self.shuffle = bool(shuffle)
        self.drop_last = bool(drop_last)
        if (num_patches is None) == (origins is None):
            raise ValueError("give either num_patches (random origins) or origins, not both")
        if origins is None:
            if isinstance(num_patches, bool) or operator.index(num_patches) < 0:
                raise ValueError(f"num_patches must be an integer >= 0, got {num_patches!r}")
            high = np.asarray(self.shape, dtype=np.int64) - np.asarray(self.patch_shape) + 1
            rng = np.random.default_rng(self.seed)
            origins = rng.integers(0, high, size=(operator.index(num_patches), len(self.shape)))
        self.origins = check_origins(origins, self.shape, self.patch_shape)
        self.rank, self.world_size = _rank_and_world(rank, world_size)
        self.epoch = 0

    @classmethod
    def grid(
        cls, shape: Any, patch_shape: Sequence[int], stride: Sequence[int] | None = None, **kwargs: Any
    ) -> PatchSampler:
        """Patches on a regular grid, ``stride`` apart (default: ``patch_shape``, tiles that
        do not overlap), as many as fit; other keywords as for the constructor.

            >>> PatchSampler.grid((4, 6), (2, 3)).origins.tolist()
            [[0, 0], [0, 3], [2, 0], [2, 3]]
        """
        shp = _shape_of(shape)
        patch = check_patch_shape(patch_shape, shp)
        step = patch if stride is None else _ints("stride", stride)
        if len(step) != len(shp) or any(s < 1 for s in step):
            raise ValueError(f"stride must be {len(shp)} integers >= 1, got {stride!r}")
        axes = [range(0, n - p + 1, s) for n, p, s in zip(shp, patch, step, strict=True)]
        origins = np.array(list(itertools.product(*axes)), dtype=np.int64)
        return cls(shp, patch, origins=origins.reshape(-1, len(shp)), **kwargs)

    @property
    def num_patches(self) -> int:
        """How many patches there are (all ranks together)."""
        return len(self.origins)

    def set_epoch(self, epoch: int) -> None:
        """Sets the epoch whose order the next iteration yields (call it on every rank,
        before each epoch's DataLoader iteration)."""
        self.epoch = operator.index(epoch)

    def epoch_order(self) -> np.ndarray:
        """All indices of this epoch in their order (every rank's, before the split)."""
        n = self.num_patches
        order = (
            np.random.default_rng((self.seed, self.epoch)).permutation(n)
            if self.shuffle
            else np.arange(n)
        )
        if self.drop_last:
            order = order[: n - n % self.world_size]
        return order

    def rank_indices(self) -> np.ndarray:
        """This rank's indices of this epoch, in order (all its workers together)."""
        return self.epoch_order()[self.rank :: self.world_size]

    def __iter__(self) -> Iterator[int]:
        idx = self.rank_indices()
        info = torch.utils.data.get_worker_info()
        if info is not None:
            idx = idx[info.id :: info.num_workers]
        return iter(idx.tolist())

    def __len__(self) -> int:
        """This rank's count per epoch (all its workers together)."""
        return len(self.rank_indices())

    def __repr__(self) -> str:
        return (
            f"PatchSampler(shape={self.shape}, patch_shape={self.patch_shape}, "
            f"num_patches={self.num_patches}, seed={self.seed}, epoch={self.epoch}, "
            f"rank={self.rank}, world_size={self.world_size})"
        )


def _rank_and_world(rank: int | None, world_size: int | None) -> tuple[int, int]:
    dist = torch.distributed
    initialized = dist.is_available() and dist.is_initialized()
    if world_size is None:
        world_size = dist.get_world_size() if initialized else 1
    if rank is None:
        rank = dist.get_rank() if initialized else 0
    rank, world_size = operator.index(rank), operator.index(world_size)
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"need 0 <= rank < world_size, got rank={rank}, world_size={world_size}")
    return rank, world_size


# One cache per process for each ChunkCache a dataset was given in another process.
_PROCESS_CACHES: dict[str, Any] = {}
# The token that names each ChunkCache given to a dataset of this process (kept alive here,
# so that ids are not reused).
_TOKENS: dict[int, tuple[Any, str]] = {}


def _token_of(cache: Any) -> str:
    entry = _TOKENS.get(id(cache))
    if entry is None:
        entry = _TOKENS[id(cache)] = (cache, uuid.uuid4().hex)
    return entry[1]


class _CacheInOtherProcess:
    """What a pickled ``cache=`` becomes: its size and a token naming it, so that the datasets
    of one process that shared a cache share one there too."""

    def __init__(self, token: str, capacity: int) -> None:
        self.token, self.capacity = token, capacity

    def resolve(self) -> Any:
        cache = _PROCESS_CACHES.get(self.token)
        if cache is None:
            cache = _PROCESS_CACHES[self.token] = zarrbuf.ChunkCache(self.capacity)
        return cache


def _cache_capacity(cache: Any) -> int:
    capacity = getattr(cache, "capacity", None)
    if capacity is None:
        raise TypeError(f"cache must be a zarrbuf.ChunkCache, got {cache!r}")
    return int(capacity)


class _Source:
    """Where the array is and how to open it, picklable; opens it once per process."""

    def __init__(
        self,
        array_or_path: Any,
        path: str,
        open_options: dict[str, Any] | None,
        cache_bytes: int | None,
        cache: Any,
    ) -> None:
        if cache_bytes is not None and cache is not None:
            raise ValueError("give cache_bytes (a cache of its own) or cache (a shared one), not both")
        self.open_options = dict(open_options or {})
        if isinstance(array_or_path, zarrbuf.Array):
            args = getattr(array_or_path, "_open_args", None)
            if args is None:
                raise TypeError(
                    "this zarrbuf.Array was not opened by zarrbuf.open, so worker processes "
                    "cannot reopen it: give the dataset its location (and path=) instead"
                )
            self.location, self.path, opts = args
            self.open_options = {**opts, **self.open_options}
            # The array itself serves this process when no other cache was asked for; other
            # processes get a cache of the size of its cache, if it has one.
            self._array = None
            if cache_bytes is None and cache is None:
                self._array = array_or_path
                cache = getattr(array_or_path, "cache", None)
        elif isinstance(array_or_path, (str, os.PathLike)):
            self.location, self.path = os.fspath(array_or_path), path
            self._array = None
        else:
            raise TypeError(
                "array_or_path must be a location (str or os.PathLike) or a zarrbuf.Array "
                f"from zarrbuf.open, got {type(array_or_path).__name__}"
            )
        self.cache_bytes = cache_bytes
        self.cache = cache
        self._pid = os.getpid()

    def array(self) -> zarrbuf.Array:
        if self._array is None or self._pid != os.getpid():
            kwargs = dict(self.open_options)
            if self.cache_bytes is not None:
                kwargs["cache_bytes"] = self.cache_bytes
            elif self.cache is not None:
                c = self.cache
                kwargs["cache"] = c.resolve() if isinstance(c, _CacheInOtherProcess) else c
            self._array = zarrbuf.open(self.location, self.path, **kwargs)
            self._pid = os.getpid()
        return self._array

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_array"] = None
        if self.cache is not None and not isinstance(self.cache, _CacheInOtherProcess):
            state["cache"] = _CacheInOtherProcess(_token_of(self.cache), _cache_capacity(self.cache))
        return state


def _class_crosses(cls: type) -> bool:
    """Whether a DataLoader worker can send an exception of class ``cls`` to the main process:
    torch pickles the class by name (with the message as text), and a class it cannot find
    by name is lost, which hangs a map-style loader and ends an iterable epoch silently."""
    try:
        return pickle.loads(pickle.dumps(cls)) is cls
    except Exception:
        return False


def _raise_sendable(error: Exception) -> NoReturn:
    """Raises ``error`` (call it in an ``except`` block), or, in a DataLoader worker when its
    class cannot cross to the main process, a ``RuntimeError`` naming it and chained to it."""
    if torch.utils.data.get_worker_info() is None or _class_crosses(type(error)):
        raise error
    cls = type(error)
    raise RuntimeError(
        f"{cls.__module__}.{cls.__qualname__} (a class a DataLoader worker cannot send to the "
        f"main process, so it arrives as RuntimeError): {error}"
    ) from error


def _device(device: Any) -> str:
    d = str(device)
    if d != "cpu" and not d.startswith("cuda"):
        raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:N', got {device!r}")
    return d


class _PatchReader:
    """What both datasets share: the source, the patch shape and origins, the device."""

    def _setup(
        self,
        array_or_path: Any,
        patch_shape: Sequence[int],
        patches: Any,
        path: str,
        device: Any,
        cache_bytes: int | None,
        cache: Any,
        transform: Callable[[torch.Tensor], Any] | None,
        open_options: dict[str, Any] | None,
    ) -> None:
        self.source = _Source(array_or_path, path, open_options, cache_bytes, cache)
        a = self.source.array()
        self.shape = a.shape
        self.dtype = np.dtype(a.dtype)
        if self.dtype.kind not in "biufc":
            raise TypeError(
                f"zarrbuf.torch reads arrays of numbers and booleans; {a!r} holds {self.dtype}"
            )
        self.patch_shape = check_patch_shape(patch_shape, self.shape)
        if isinstance(patches, PatchSampler):
            if patches.shape != self.shape or patches.patch_shape != self.patch_shape:
                raise ValueError(
                    f"the sampler was made for patches of {patches.patch_shape} in an array of "
                    f"shape {patches.shape}; this dataset reads {self.patch_shape} from "
                    f"{self.shape}"
                )
            self.sampler: PatchSampler | None = patches
            self.origins = patches.origins
        else:
            self.sampler = None
            self.origins = check_origins(patches, self.shape, self.patch_shape)
        self.device = _device(device)
        self.transform = transform

    @property
    def array(self) -> zarrbuf.Array:
        """The array, opened in this process (on first use in a new process)."""
        return self.source.array()

    def selection(self, index: int) -> tuple[slice, ...]:
        """The selection of patch ``index``."""
        o = self.origins[index]
        return tuple(slice(int(a), int(a) + p) for a, p in zip(o, self.patch_shape, strict=True))

    def _tensor(self, x: Any) -> Any:
        t = torch.from_dlpack(x)
        return t if self.transform is None else self.transform(t)

    def _index(self, index: Any) -> int:
        i = operator.index(index)
        n = len(self.origins)
        if not -n <= i < n:
            raise IndexError(f"patch index {index} is out of range for {n} patches")
        return i % n


class ZarrDataset(_PatchReader, Dataset):
    """A map-style dataset: item ``i`` is the patch at origin ``i`` as a tensor on ``device``
    (``"cpu"``, ``"cuda"``, ``"cuda:N"``), of the array's dtype and shape ``patch_shape``,
    after ``transform`` when one is given.

    ``array_or_path`` is a location as :func:`zarrbuf.open` takes it (with ``path=`` and
    ``open_options=``, e.g. ``{"branch": "dev"}``) or an array from :func:`zarrbuf.open`.
    ``patches`` is a :class:`PatchSampler` (its origins; pass the same sampler to the
    DataLoader for epochs and ranks) or the origins as an ``(N, ndim)`` integer array.
    ``cache_bytes`` / ``cache`` give the array a decoded-chunk cache, one per process (see
    the module's notes). Reads into CUDA belong in the main process (``num_workers=0``);
    worker processes should read into ``"cpu"`` (with ``pin_memory=True``).

    A DataLoader with ``batch_size`` fetches each batch through :meth:`__getitems__`, which
    reads the batch's patches concurrently with :meth:`zarrbuf.Array.read_stream`.
    """

    def __init__(
        self,
        array_or_path: Any,
        patch_shape: Sequence[int],
        patches: Any,
        *,
        path: str = "",
        device: Any = "cpu",
        cache_bytes: int | None = None,
        cache: Any = None,
        transform: Callable[[torch.Tensor], Any] | None = None,
        open_options: dict[str, Any] | None = None,
        prefetch: int = 8,
    ) -> None:
        self._setup(array_or_path, patch_shape, patches, path, device, cache_bytes, cache,
                    transform, open_options)
        self.prefetch = prefetch

    def __len__(self) -> int:
        return len(self.origins)

    def __getitem__(self, index: int) -> Any:
        try:
            sel = self.selection(self._index(index))
            return self._tensor(self.array.read(sel, device=self.device))
        except Exception as e:
            _raise_sendable(e)

    def __getitems__(self, indices: Sequence[int]) -> list[Any]:
        """The patches of ``indices``, read concurrently (at most ``prefetch`` at once)."""
        try:
            sels = [self.selection(self._index(i)) for i in indices]
            stream = self.array.read_stream(sels, device=self.device, prefetch=self.prefetch)
            return [self._tensor(x) for x in stream]
        except Exception as e:
            _raise_sendable(e)


class ZarrIterableDataset(_PatchReader, IterableDataset):
    """An iterable dataset: iterates ``sampler`` (a :class:`PatchSampler`, which splits
    each epoch across ranks and DataLoader workers) and reads ahead of the consumer with
    :meth:`zarrbuf.Array.read_stream` (at most ``prefetch`` patches in flight), yielding each
    patch as a tensor on ``device`` — or, with ``batch_size``, batches of that many patches
    stacked into one tensor (each worker batches its own share; ``drop_last_batch`` drops
    a short last batch). Use ``DataLoader(ds, batch_size=None)`` when the dataset batches.

    ``transform`` applies to each patch before batching. :meth:`set_epoch` sets the
    sampler's epoch: call it before each epoch's iteration, with ``persistent_workers=False``
    (the default) so that workers get the new epoch. Other arguments as :class:`ZarrDataset`.
    """

    def __init__(
        self,
        array_or_path: Any,
        patch_shape: Sequence[int],
        sampler: Any,
        *,
        batch_size: int | None = None,
        drop_last_batch: bool = False,
        prefetch: int = 8,
        path: str = "",
        device: Any = "cpu",
        cache_bytes: int | None = None,
        cache: Any = None,
        transform: Callable[[torch.Tensor], Any] | None = None,
        open_options: dict[str, Any] | None = None,
    ) -> None:
        self._setup(array_or_path, patch_shape, sampler, path, device, cache_bytes, cache,
                    transform, open_options)
        if self.sampler is None:
            self.sampler = PatchSampler(self.shape, self.patch_shape, origins=self.origins,
                                        shuffle=False)
        if batch_size is not None and (isinstance(batch_size, bool) or operator.index(batch_size) < 1):
            raise ValueError(f"batch_size must be an integer >= 1 or None, got {batch_size!r}")
        if isinstance(prefetch, bool) or operator.index(prefetch) < 1:
            raise ValueError(f"prefetch must be an integer >= 1, got {prefetch!r}")
        self.batch_size = batch_size
        self.drop_last_batch = bool(drop_last_batch)
        self.prefetch = int(prefetch)

    def set_epoch(self, epoch: int) -> None:
        """The sampler's :meth:`PatchSampler.set_epoch`."""
        self.sampler.set_epoch(epoch)

    def __iter__(self) -> Iterator[Any]:
        try:
            yield from self._patches_or_batches()
        except Exception as e:
            _raise_sendable(e)

    def _patches_or_batches(self) -> Iterator[Any]:
        sels = (self.selection(i) for i in self.sampler)
        stream = self.array.read_stream(sels, device=self.device, prefetch=self.prefetch)
        patches = (self._tensor(x) for x in stream)
        if self.batch_size is None:
            yield from patches
            return
        while batch := list(itertools.islice(patches, self.batch_size)):
            if len(batch) < self.batch_size and self.drop_last_batch:
                return
            yield torch.stack(batch)
