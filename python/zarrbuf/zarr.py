"""zarr-python buffers in zarrbuf's page-locked (pinned) host memory.

``pinned_prototype`` is a zarr-python ``BufferPrototype`` whose ``NDBuffer`` and ``Buffer``
are NumPy arrays over pinned memory that zarrbuf allocated and registered with CUDA. Reads
with it decode into pinned memory (with ``ZarrbufCodecPipeline``, straight into it), so a
later host-to-device copy is a DMA the GPU runs asynchronously::

    import torch, zarr
    from zarrbuf.zarr import pinned_prototype

    a = zarr.open_array("data.zarr", mode="r")
    x = a.get_basic_selection((slice(0, 64), ...), prototype=pinned_prototype)  # numpy, pinned
    t = torch.from_numpy(x).to("cuda", non_blocking=True)                        # async DMA

Pinned memory needs the CUDA driver and a GPU: without them the first allocation raises
:class:`zarrbuf.ZarrbufError` saying so (importing this module and building the prototype
do not need a GPU). Types NumPy holds as Python objects (variable-length strings, objects)
cannot live in pinned memory; their buffers are ordinary NumPy arrays.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, Literal

import numpy as np
from zarr.core.buffer import BufferPrototype, cpu

from . import _zarrbuf

__all__ = ["PinnedBuffer", "PinnedNDBuffer", "is_pinned", "pinned_empty", "pinned_prototype"]


def _holds_objects(dtype: np.dtype) -> bool:
    return dtype.hasobject or dtype.kind == "T"  # object, StringDType


def pinned_empty(
    shape: Iterable[int] | int, dtype: Any, order: Literal["C", "F"] = "C", device: int = 0
) -> np.ndarray:
    """A zeroed NumPy array over new pinned host memory (registered with CUDA device
    ``device``). Raises ``zarrbuf.ZarrbufError`` without a GPU, ``ValueError``/``TypeError``
    for a bad shape, dtype or order."""
    if order not in ("C", "F"):
        raise ValueError(f"order must be 'C' or 'F', got {order!r}")
    dt = np.dtype(dtype)
    if _holds_objects(dt):
        raise TypeError(f"dtype {dt} holds Python objects, which cannot live in pinned memory")
    dims = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    for n in dims:
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise ValueError(f"shape must be non-negative integers, got {dims!r}")
    dims = tuple(int(n) for n in dims)
    nbytes = math.prod(dims) * dt.itemsize
    # One byte at least: a zero-size request still says whether pinned memory is available.
    try:
        raw = np.asarray(_zarrbuf.empty_pinned(max(nbytes, 1), device))
    except _zarrbuf.ZarrbufError as e:
        raise _zarrbuf.ZarrbufError(
            f"pinned host memory ({nbytes} bytes for zarrbuf.zarr's pinned buffers) needs "
            f"CUDA device {device}: {e}. Without a GPU use zarr-python's default prototype."
        ) from e
    flat = raw[:nbytes].view(dt)
    out = flat.reshape(dims, order=order)
    if dt.kind in "mM":
        out = out.view(dt)  # keep a generic time unit's scale factor (as zarr-python does)
    return out


def is_pinned(array: Any) -> bool:
    """Whether ``array`` (a NumPy array or a zarr-python buffer) lies in memory zarrbuf pinned."""
    if hasattr(array, "as_array_like"):
        array = array.as_array_like()
    base = array
    while base is not None:
        if isinstance(base, _zarrbuf.NDArray):
            return base.memory == "pinned"
        base = getattr(base, "base", None)
    return False


class PinnedNDBuffer(cpu.NDBuffer):
    """zarr-python's CPU ``NDBuffer``, allocated in pinned memory."""

    @classmethod
    def create(
        cls,
        *,
        shape: Iterable[int],
        dtype: Any,
        order: Literal["C", "F"] = "C",
        fill_value: Any | None = None,
    ) -> PinnedNDBuffer:
        dt = np.dtype(dtype)
        if _holds_objects(dt):
            return super().create(shape=shape, dtype=dtype, order=order, fill_value=fill_value)
        data = pinned_empty(tuple(shape), dt, order)
        if not (fill_value is None or (isinstance(fill_value, int) and fill_value == 0)):
            data[...] = fill_value
        return cls(data)

    @classmethod
    def empty(
        cls, shape: tuple[int, ...], dtype: Any, order: Literal["C", "F"] = "C"
    ) -> PinnedNDBuffer:
        dt = np.dtype(dtype)
        if _holds_objects(dt):
            return super().empty(shape, dtype, order)
        return cls(pinned_empty(shape, dt, order))


class PinnedBuffer(cpu.Buffer):
    """zarr-python's CPU ``Buffer`` (bytes), copied into pinned memory when made from bytes
    or from another buffer."""

    @classmethod
    def from_bytes(cls, bytes_like: Any) -> PinnedBuffer:
        src = np.frombuffer(bytes_like, dtype="B")
        dst = pinned_empty(src.shape, "B")
        dst[...] = src
        return cls(dst)

    @classmethod
    def from_buffer(cls, buffer: Any) -> PinnedBuffer:
        src = buffer.as_numpy_array()
        if is_pinned(src):
            return cls(src)
        dst = pinned_empty(src.shape, src.dtype)
        dst[...] = src
        return cls(dst)


#: zarr-python's ``BufferPrototype`` over pinned memory (pass ``prototype=pinned_prototype``).
pinned_prototype = BufferPrototype(buffer=PinnedBuffer, nd_buffer=PinnedNDBuffer)
