"""Python data → zarrbuf's variable-length layout (Arrow's large string/binary: int64 offsets
and one values buffer), for writes to string and bytes arrays.

Accepted, for a string array (``kind="utf8"``): ``str``, lists (nested as the shape) of
``str``, NumPy ``StringDType``, ``<U`` and object arrays of ``str``, pyarrow ``string`` /
``large_string`` / ``string_view`` arrays and chunked arrays, and zarrbuf's own
:class:`~zarrbuf.VarLenArray`. For a bytes array (``kind="bytes"``): ``bytes``, lists of
``bytes``, object arrays of ``bytes``, ``|S`` arrays (NumPy drops their trailing NUL
bytes), pyarrow ``binary`` / ``large_binary`` / ``binary_view`` arrays. Values broadcast to
the selection as NumPy would; anything else (``None``, numbers, ``str`` into bytes or
``bytes`` into strings, Arrow nulls) is a ``TypeError`` / ``ValueError`` naming the element.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ._zarrbuf import VarLenArray, varlen_from

_ARROW_TYPES = {
    "utf8": ("string", "large_string", "string_view"),
    "bytes": ("binary", "large_binary", "binary_view"),
}


def _from_arrow(data: Any, kind: str, shape: tuple[int, ...]) -> VarLenArray:
    import pyarrow as pa

    if isinstance(data, pa.ChunkedArray):
        data = data.combine_chunks()
    name = str(data.type)
    if name not in _ARROW_TYPES[kind]:
        want = " / ".join(_ARROW_TYPES[kind])
        raise TypeError(f"a pyarrow {name} array cannot be written to a {kind} array (want {want})")
    if data.null_count:
        first = data.is_null().index(True).as_py()
        raise ValueError(
            f"element {first} of the pyarrow array is null; zarr string arrays have no missing "
            "elements (fill them first, e.g. pyarrow.compute.fill_null)"
        )
    large = pa.large_string() if kind == "utf8" else pa.large_binary()
    if data.type != large:
        data = data.cast(large)  # copies the offsets (to 64 bits), shares the values
    n = len(data)
    if n != math.prod(shape):
        raise ValueError(
            f"a pyarrow array of {n} elements cannot be written to a selection of shape {shape}"
        )
    buffers = data.buffers()
    offsets = np.frombuffer(buffers[1], dtype="<i8")[data.offset : data.offset + n + 1]
    values = np.frombuffer(buffers[2], dtype=np.uint8) if buffers[2] is not None else np.empty(0, np.uint8)
    first, last = int(offsets[0]), int(offsets[-1])
    if first:
        offsets = offsets - first
    values = values[first:last]
    return varlen_from(kind, list(shape), "arrow", np.ascontiguousarray(offsets), values)


def _is_arrow(data: Any) -> bool:
    return type(data).__module__.split(".")[0] == "pyarrow" and hasattr(data, "type")


def to_varlen(data: Any, kind: str, shape: tuple[int, ...]) -> VarLenArray:
    """``data`` as a :class:`VarLenArray` of ``kind`` (``"utf8"`` or ``"bytes"``) and
    ``shape`` (see the module docs for what is accepted)."""
    if isinstance(data, VarLenArray):
        if data.kind != kind:
            raise TypeError(f"a {data.kind} VarLenArray cannot be written to a {kind} array")
        if tuple(data.shape) == tuple(shape):
            return data
        data = np.asarray(data)  # broadcast below
    if _is_arrow(data):
        return _from_arrow(data, kind, shape)
    if isinstance(data, np.ndarray):
        value = data
    elif isinstance(data, (str, bytes)):
        value = np.empty((), dtype=object)
        value[()] = data
    else:
        value = np.asarray(data, dtype=object)  # lists: elements are checked one by one
    while value.ndim > len(shape) and value.shape[0] == 1:
        value = value[0]  # numpy's assignment drops leading length-1 axes
    if value.shape != shape:
        value = np.broadcast_to(value, shape)
    shape_list = list(shape)
    if kind == "utf8" and value.dtype.kind == "U":
        value = value.astype(np.dtypes.StringDType())
    if kind == "utf8" and value.dtype.kind == "T":
        return varlen_from(kind, shape_list, "numpy", value)
    if value.dtype.kind == "O" or (kind == "bytes" and value.dtype.kind == "S"):
        return varlen_from(kind, shape_list, "objects", value.reshape(-1).tolist())
    want = "str (or a StringDType / <U array)" if kind == "utf8" else "bytes (or an object / |S array)"
    raise TypeError(f"a {value.dtype} array cannot be written to a {kind} array: it takes {want}")
