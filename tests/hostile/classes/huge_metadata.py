"""Metadata alone asking for absurd memory: a v2 `|S8589934592` element, a 10^12-element
fill-only array, chunk shapes whose element count overflows 64 bits, and a copy into
chunks of 2^40 elements. Whole reads must be refused fast; small subsets still read."""

from __future__ import annotations

import numpy as np

from case import BOUNDED_DECODE, CORRECT, ERROR, SAFE_WRITES, ZIP_VLEN, Case
from stores import put, v2_array, v3_array, v3_codecs

CLS = "huge-metadata"
T = 10**12


def cases(ctx):
    c = dict(cls=CLS, fixer=BOUNDED_DECODE)
    out = []
    # An 8 GiB element: info must not allocate one; a stored chunk must not be decoded into one.
    big = ctx.store("huge-S8GiB")
    v2_array(big, [4], [2], dtype="|S8589934592", fill=None)
    out += [
        Case(f"{CLS}/S8GiB/info", args=["info", str(big)], expect={CORRECT, ERROR}, kind="other", **c),
        Case(f"{CLS}/S8GiB/info-json", args=["info", str(big), "--json"], expect={CORRECT, ERROR}, kind="other", **c),
        Case(f"{CLS}/S8GiB/check-empty", args=["check", str(big)], expect={CORRECT, ERROR}, kind="check", **c),
    ]
    # A 1 TiB raw element (v2 `|V`): info must describe or refuse it, never build one.
    raw = ctx.store("huge-V1TiB")
    v2_array(raw, [4], [2], dtype="|V1099511627776", fill=None)
    out += [
        Case(f"{CLS}/V1TiB/info", args=["info", str(raw)], expect={CORRECT, ERROR}, kind="other", **{**c, "fixer": ZIP_VLEN}),
        Case(f"{CLS}/V1TiB/info-json", args=["info", str(raw), "--json"], expect={CORRECT, ERROR}, kind="other", **{**c, "fixer": ZIP_VLEN}),
    ]
    big2 = ctx.store("huge-S8GiB-chunk")
    v2_array(big2, [4], [2], dtype="|S8589934592", fill=None)
    put(big2 / "0", b"\x00" * 64)
    out += [
        Case(f"{CLS}/S8GiB-chunk/check", args=["check", str(big2)], expect={ERROR}, kind="check", **c),
        Case(f"{CLS}/S8GiB-chunk/read", args=["read", str(big2), "--out", "{out}"], expect={ERROR}, **c),
    ]
    # 10^12 float64 elements, nothing stored, fill value 7.5: 8 TB if read whole.
    tera = ctx.store("huge-1e12-fill")
    v3_array(tera, [T], [10**6], fill=7.5)
    fill10 = np.full(10, 7.5)
    chunk = 8 * 10**6
    out += [
        Case(f"{CLS}/1e12-fill/read", args=["read", str(tera), "--out", "{out}"], expect={ERROR}, timeout=10, **c),
        Case(f"{CLS}/1e12-fill/read-summary", args=["read", str(tera)], expect={ERROR}, timeout=10, **c),
        Case(f"{CLS}/1e12-fill/read-async", args=["read", str(tera), "--async"], expect={ERROR}, timeout=10, **c),
        Case(f"{CLS}/1e12-fill/read-subset-head", args=["read", str(tera), "--subset", "0:10", "--out", "{out}"], expect={CORRECT}, data=fill10, chunk_bytes=chunk, timeout=10, **c),
        Case(f"{CLS}/1e12-fill/read-subset-tail", args=["read", str(tera), "--subset", f"{T - 10}:{T}", "--out", "{out}"], expect={CORRECT}, data=fill10, chunk_bytes=chunk, timeout=10, **c),
        Case(f"{CLS}/1e12-fill/info", args=["info", str(tera)], expect={CORRECT}, kind="other", timeout=10, **c),
        Case(f"{CLS}/1e12-fill/check", args=["check", str(tera)], expect={CORRECT}, kind="check", timeout=10, **c),
        Case(f"{CLS}/1e12-fill/copy-subset", args=["copy", str(tera), str(ctx.dst("huge-1e12-subset")), "--subset", "0:10"], expect={CORRECT}, kind="other", chunk_bytes=chunk, timeout=10, **c),
    ]
    # Chunk shapes whose element count overflows u64: 2^32 x 2^32 elements of 8 bytes.
    for stored in (False, True):
        name = "overflow-chunks" + ("-stored" if stored else "")
        root = ctx.store(f"huge-{name}")
        v3_array(root, [1 << 40, 1 << 40], [1 << 32, 1 << 32], codecs=v3_codecs("zstd"))
        if stored:
            put(root / "c" / "0" / "0", b"\x28\xb5\x2f\xfd\x00\x38\x01\x00\x00")
        out += [
            Case(f"{CLS}/{name}/info", args=["info", str(root)], expect={CORRECT, ERROR}, kind="other", **c),
            # check must refuse metadata that read refuses.
            Case(f"{CLS}/{name}/read-subset", args=["read", str(root), "--subset", "0:1,0:1", "--out", "{out}"], expect={ERROR}, agree=f"{CLS}/{name}", **c),
            Case(f"{CLS}/{name}/check", args=["check", str(root)], expect={ERROR} if stored else {CORRECT, ERROR}, kind="check", agree=f"{CLS}/{name}", **{**c, "fixer": SAFE_WRITES}),
            Case(f"{CLS}/{name}/copy-subset", args=["copy", str(root), str(ctx.dst(f"huge-{name}")), "--subset", "0:1,0:1"], expect={ERROR}, **c),
        ]
    # v2 spelling of the same overflow (chunks of 2^21 x 2^21 x 2^21 elements).
    v2o = ctx.store("huge-v2-overflow")
    v2_array(v2o, [1 << 22] * 3, [1 << 21] * 3, compressor="zstd")
    out += [
        Case(f"{CLS}/v2-overflow/info", args=["info", str(v2o)], expect={CORRECT, ERROR}, kind="other", **c),
        Case(f"{CLS}/v2-overflow/read-subset", args=["read", str(v2o), "--subset", "0:1,0:1,0:1", "--out", "{out}"], expect={ERROR}, **c),
    ]
    # A copy into chunks of 2^40 elements (8 TiB each) must be refused, not attempted.
    small = ctx.store("huge-copy-src")
    v3_array(small, [1000], [100])
    data = np.arange(1000, dtype="<f8")
    for i in range(10):
        put(small / "c" / str(i), data[i * 100 : (i + 1) * 100].tobytes())
    out += [
        Case(f"{CLS}/copy-chunks-2^40/copy", args=["copy", str(small), str(ctx.dst("huge-copy-2^40")), "--chunks", str(1 << 40)], expect={ERROR}, chunk_bytes=800, **c),
        Case(f"{CLS}/copy-chunks-2^40/copy-shards", args=["copy", str(small), str(ctx.dst("huge-copy-2^40-shards")), "--chunks", "100", "--shards", str(100 << 34)], expect={ERROR}, chunk_bytes=800, **c),
    ]
    return out
