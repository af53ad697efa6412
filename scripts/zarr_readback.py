#!/usr/bin/env python3
"""Cross-check zarr arrays with zarr-python (used by CI on arrays written by zarrbuf).

Read mode (default)::

    python scripts/zarr_readback.py STORE ARRAY_PATH EXPECTED.npy [--endpoint-url URL]

opens ``ARRAY_PATH`` ('' for the store root) in ``STORE`` with zarr-python, reads the whole
array and compares it with ``EXPECTED.npy``: same shape, same dtype up to byte order, and
the same bytes element by element (so NaN payloads and the sign of -0.0 count). Structured
records compare with raw records of the same size (``|V<n>``, how zarrbuf stores them) byte
for byte. Variable-length strings and bytes (``string``, ``variable_length_bytes``, v2
object arrays) compare element by element with a fixed-width ``<U`` / ``|S`` .npy. Prints
``ok STORE SHAPE DTYPE`` and exits 0 on a match; otherwise prints what differs and exits 1.

Many arrays in one process (CI reads back every store the tests wrote)::

    python scripts/zarr_readback.py --many LIST [--endpoint-url URL]

reads each line of LIST, ``STORE<TAB>ARRAY_PATH<TAB>EXPECTED.npy``, as read mode does,
prints each result, then on stderr how many matched and which did not; exits 1 if any did
not (or LIST names none).

Write mode::

    python scripts/zarr_readback.py --write STORE DATA.npy --format 2|3 --chunks a,b,c \
        [--codec zstd|gzip|blosc|none] [--path ARRAY_PATH] [--shards a,b,c] \
        [--endian little|big] [--fill-value V] [--endpoint-url URL]

writes the .npy with zarr-python as a new array (overwriting), so tests can read
foreign-written data of arbitrary content. ``--chunks ''`` is the chunk shape of a 0-d
array. ``--shards`` (v3 only) makes ``--chunks`` the inner chunk shape.

STORE may be a local directory or an ``s3://bucket/prefix`` URL; for S3, pass
``--endpoint-url http://127.0.0.1:PORT`` for a local S3 server. Credentials come from
AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN, AWS_REGION /
AWS_DEFAULT_REGION) in the environment.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

EXIT_OK = 0
EXIT_MISMATCH = 1


# --------------------------------------------------------------------------------------
# comparison (also imported by fixtures/generate.py)
# --------------------------------------------------------------------------------------


def canonical(a) -> np.ndarray:
    """Contiguous copy in native byte order (byte swaps preserve NaN payloads)."""
    a = np.asarray(a)
    if a.dtype.byteorder not in ("=", "|") and not a.dtype.isnative:
        a = a.astype(a.dtype.newbyteorder("="))
    return np.asarray(a, order="C")  # unlike ascontiguousarray, keeps 0-d arrays 0-d


def _fmt_elem(x: np.ndarray) -> str:
    """repr of one element plus its raw bits for floating types."""
    v = x.item() if x.ndim == 0 else x
    if x.dtype.kind == "f":
        bits = x.view(f"u{x.dtype.itemsize}").item()
        return f"{v!r} (bits 0x{bits:0{2 * x.dtype.itemsize}x})"
    if x.dtype.kind == "c":
        return f"{v!r} (re {_fmt_elem(x.real.copy())}, im {_fmt_elem(x.imag.copy())})"
    return repr(v)


def compare_strings(got, expected, max_report: int = 10) -> list[str]:
    """Variable-length strings or bytes (NumPy StringDType or object arrays, as zarr-python
    reads ``string`` / ``variable_length_bytes`` arrays) against the fixed-width ``<U`` /
    ``|S`` array zarrbuf's .npy files hold them in: element by element, as Python values
    (fixed-width types drop trailing NULs, so elements ending in NUL cannot be compared)."""
    got, expected = np.asarray(got), np.asarray(expected)
    if got.shape != expected.shape:
        return [f"shape mismatch: read {got.shape}, expected {expected.shape}"]
    g, e = got.reshape(-1).tolist(), expected.reshape(-1).tolist()
    diff = [i for i, (a, b) in enumerate(zip(g, e)) if a != b or type(a) is not type(b)]
    problems = []
    if diff:
        problems.append(f"{len(diff)} of {len(g)} elements differ")
        for flat in diff[:max_report]:
            idx = tuple(int(i) for i in np.unravel_index(flat, got.shape)) if got.ndim else ()
            problems.append(f"  at {idx}: read {g[flat]!r}, expected {e[flat]!r}")
    return problems


def compare_arrays(got, expected, max_report: int = 10) -> list[str]:
    """Return a list of human-readable differences; empty when equal bit for bit."""
    if np.asarray(got).dtype.kind in "OT" and np.asarray(expected).dtype.kind in "US":
        return compare_strings(got, expected, max_report)
    got = canonical(got)
    expected = canonical(expected)
    problems: list[str] = []
    if got.shape != expected.shape:
        problems.append(f"shape mismatch: read {got.shape}, expected {expected.shape}")
    if (
        got.dtype != expected.dtype
        and got.dtype.kind == expected.dtype.kind == "V"
        and got.dtype.itemsize == expected.dtype.itemsize
    ):
        # Structured records against raw records (zarrbuf reads structs as raw bytes, and its
        # .npy files hold them as |V<n>): the same bytes make the same records.
        raw = np.dtype(f"V{got.dtype.itemsize}")
        got, expected = got.view(raw), expected.view(raw)
    if got.dtype != expected.dtype:
        problems.append(f"dtype mismatch: read {got.dtype.str}, expected {expected.dtype.str}")
    if problems:
        return problems
    n = got.size
    isz = got.dtype.itemsize
    gb = got.reshape(-1).view(np.uint8).reshape(n, isz)
    eb = expected.reshape(-1).view(np.uint8).reshape(n, isz)
    diff = np.flatnonzero((gb != eb).any(axis=1))
    if diff.size:
        problems.append(
            f"{diff.size} of {n} elements differ (bitwise; NaN payloads and -0.0 count)"
        )
        for flat in diff[:max_report]:
            idx = np.unravel_index(flat, got.shape) if got.ndim else ()
            idx = tuple(int(i) for i in idx)
            g = got.reshape(-1)[flat : flat + 1].reshape(())
            e = expected.reshape(-1)[flat : flat + 1].reshape(())
            problems.append(f"  at {idx}: read {_fmt_elem(g)}, expected {_fmt_elem(e)}")
        if diff.size > max_report:
            problems.append(f"  ... and {diff.size - max_report} more")
    return problems


# --------------------------------------------------------------------------------------
# stores
# --------------------------------------------------------------------------------------


def _storage_options(endpoint_url: str | None) -> dict:
    opts: dict = {"anon": False}
    if endpoint_url:
        opts["endpoint_url"] = endpoint_url
    key = os.environ.get("AWS_ACCESS_KEY_ID")
    secret = os.environ.get("AWS_SECRET_ACCESS_KEY")
    token = os.environ.get("AWS_SESSION_TOKEN")
    if key:
        opts["key"] = key
    if secret:
        opts["secret"] = secret
    if token:
        opts["token"] = token
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if region:
        opts["client_kwargs"] = {"region_name": region}
    return opts


def open_store(location: str, endpoint_url: str | None, read_only: bool):
    import zarr.storage

    if "://" in location:
        if not location.startswith("s3://"):
            raise SystemExit(f"unsupported URL scheme in {location!r} (only s3:// and paths)")
        return zarr.storage.FsspecStore.from_url(
            location, storage_options=_storage_options(endpoint_url), read_only=read_only
        )
    if read_only and not os.path.isdir(location):
        raise FileNotFoundError(f"store directory {location!r} does not exist")
    return zarr.storage.LocalStore(location, read_only=read_only)


# --------------------------------------------------------------------------------------
# modes
# --------------------------------------------------------------------------------------


def read_mode(store_loc: str, path: str, npy: str, endpoint_url: str | None) -> int:
    import zarr

    try:
        expected = np.load(npy, allow_pickle=False)
    except Exception as e:  # noqa: BLE001
        print(f"FAIL cannot load expected array {npy!r}: {type(e).__name__}: {e}")
        return EXIT_MISMATCH
    try:
        store = open_store(store_loc, endpoint_url, read_only=True)
        arr = zarr.open_array(store=store, path=path, mode="r")
        got = arr[...]
    except Exception as e:  # noqa: BLE001
        print(
            f"FAIL zarr-python could not read array {path!r} in store {store_loc!r}: "
            f"{type(e).__name__}: {e}"
        )
        return EXIT_MISMATCH
    got = np.asarray(got)
    problems = compare_arrays(got, expected)
    if problems:
        print(f"MISMATCH {store_loc} path={path!r} vs {npy}:")
        for p in problems:
            print(p)
        return EXIT_MISMATCH
    shape = "x".join(str(s) for s in got.shape) if got.shape else "()"
    print(f"ok {store_loc} {shape} {canonical(got).dtype.name}")
    return EXIT_OK


def many_mode(listing: str, endpoint_url: str | None) -> int:
    failed, count = [], 0
    with open(listing, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            count += 1
            fields = line.split("\t")
            if len(fields) != 3:
                print(f"FAIL line {count} of {listing!r} is not STORE<TAB>PATH<TAB>NPY: {line!r}")
                failed.append(line)
                continue
            if read_mode(*fields, endpoint_url) != EXIT_OK:
                failed.append(fields[0])
    print(f"{count - len(failed)} of {count} arrays read back exactly", file=sys.stderr)
    for store in failed:
        print(f"not read back exactly: {store}", file=sys.stderr)
    return EXIT_MISMATCH if failed or count == 0 else EXIT_OK


def _parse_shape(s: str | None) -> tuple[int, ...] | None:
    if s is None:
        return None
    s = s.strip().strip("()[]")
    if s == "":
        return ()
    return tuple(int(x) for x in s.split(",") if x.strip() != "")


def _parse_fill(s: str | None, dtype: np.dtype):
    if s is None:
        return None
    if dtype.kind == "b":
        return s.strip().lower() in ("1", "true", "yes")
    if dtype.kind in "iu":
        return int(s)
    if dtype.kind == "c":
        return complex(s)
    return float(s)  # accepts nan, inf, -inf, -0.0


def _v3_compressors(codec: str):
    from zarr.codecs import BloscCodec, GzipCodec, ZstdCodec

    return {
        "zstd": [ZstdCodec(level=3)],
        "gzip": [GzipCodec(level=5)],
        "blosc": [BloscCodec(cname="lz4", clevel=5, shuffle="shuffle")],
        "none": None,
    }[codec]


def _v2_compressor(codec: str):
    import numcodecs

    return {
        "zstd": numcodecs.Zstd(level=3),
        "gzip": numcodecs.GZip(level=5),
        "blosc": numcodecs.Blosc(cname="lz4", clevel=5, shuffle=numcodecs.Blosc.SHUFFLE),
        "none": None,
    }[codec]


def write_mode(args) -> int:
    import zarr
    from zarr.codecs import BytesCodec, ShardingCodec

    store_loc, npy = args.write
    data = canonical(np.load(npy, allow_pickle=False))
    chunks = _parse_shape(args.chunks)
    if chunks is None:
        chunks = data.shape
    if len(chunks) != data.ndim:
        print(f"FAIL --chunks {args.chunks!r} has {len(chunks)} dims, data has {data.ndim}")
        return 2
    fill = _parse_fill(args.fill_value, data.dtype)
    store = open_store(store_loc, args.endpoint_url, read_only=False)
    kw: dict = dict(
        store=store,
        name=args.path or None,
        shape=data.shape,
        zarr_format=args.format,
        overwrite=True,
        config={"write_empty_chunks": True},
    )
    if fill is not None:
        kw["fill_value"] = fill
    if args.format == 2:
        if args.shards:
            print("FAIL --shards needs --format 3")
            return 2
        dt = data.dtype
        if args.endian == "big" and dt.itemsize > 1 and dt.kind != "b":
            dt = dt.newbyteorder(">")
        kw.update(dtype=dt, chunks=chunks, compressors=_v2_compressor(args.codec), filters=None)
    else:
        endian = args.endian
        inner_codecs = [BytesCodec(endian=endian)]
        comps = _v3_compressors(args.codec)
        if args.shards:
            shards = _parse_shape(args.shards)
            if shards is None or len(shards) != data.ndim:
                print(f"FAIL --shards {args.shards!r} does not match data ndim {data.ndim}")
                return 2
            serializer = ShardingCodec(chunk_shape=chunks, codecs=inner_codecs + (comps or []))
            kw.update(dtype=data.dtype, chunks=shards, serializer=serializer, compressors=None,
                      filters=None)
        else:
            kw.update(dtype=data.dtype, chunks=chunks, serializer=inner_codecs[0],
                      compressors=comps, filters=None)
    arr = zarr.create_array(**kw)
    arr[...] = data
    shape = "x".join(str(s) for s in data.shape) if data.shape else "()"
    print(f"wrote {store_loc} path={args.path!r} {shape} {data.dtype.name} zarr_format={args.format}")
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description="Read a zarr array with zarr-python and compare it with an .npy "
        "(or, with --write, write an .npy as a zarr array).",
    )
    p.add_argument("args", nargs="*", help="STORE ARRAY_PATH EXPECTED.npy (read mode)")
    p.add_argument("--endpoint-url", help="S3 endpoint, e.g. http://127.0.0.1:9000")
    p.add_argument("--write", nargs=2, metavar=("STORE", "NPY"), help="write mode")
    p.add_argument("--many", metavar="LIST", help="read mode for every line of LIST (tab-separated)")
    p.add_argument("--format", type=int, choices=(2, 3), default=3)
    p.add_argument("--chunks", help="chunk shape a,b,c (inner chunk shape with --shards)")
    p.add_argument("--shards", help="v3 shard shape a,b,c")
    p.add_argument("--codec", choices=("zstd", "gzip", "blosc", "none"), default="zstd")
    p.add_argument("--path", default="", help="array path inside the store (write mode)")
    p.add_argument("--endian", choices=("little", "big"), default="little")
    p.add_argument("--fill-value", help="fill value (nan, inf, -0.0, 1+2j, true ...)")
    args = p.parse_args(argv)

    if args.many:
        if args.args or args.write:
            p.error("--many takes no positional arguments and no --write")
        return many_mode(args.many, args.endpoint_url)
    if args.write:
        if args.args:
            p.error("--write takes no positional arguments")
        return write_mode(args)
    if len(args.args) != 3:
        p.error("read mode needs exactly STORE ARRAY_PATH EXPECTED.npy (use '' for the root)")
    store_loc, path, npy = args.args
    return read_mode(store_loc, path, npy, args.endpoint_url)


if __name__ == "__main__":
    sys.exit(main())
