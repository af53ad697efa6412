"""Two `zarrbuf copy` runs into one destination at once, and --overwrite of an array with
another of a different shape: what is left must read as one writer's array (check clean),
and a writer that loses must say so."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np

from case import CORRECT, SAFE_WRITES, Case
from stores import put, v3_array, v3_codecs

CLS = "two-writers"


def source(ctx, name, data: np.ndarray, chunks, data_type):
    root = ctx.store(name)
    v3_array(root, list(data.shape), list(chunks), data_type=data_type, codecs=v3_codecs("zstd"))
    import numcodecs

    z = numcodecs.Zstd(level=1)
    grid = [range(0, n, c) for n, c in zip(data.shape, chunks)]
    for idx in np.ndindex(*[len(g) for g in grid]):
        sl = tuple(slice(i * c, (i + 1) * c) for i, c in zip(idx, chunks))
        put(root.joinpath("c", *map(str, idx)), bytes(z.encode(np.ascontiguousarray(data[sl]).tobytes())))
    return root


def reads_as_one_of(binary, dst, datas):
    """Whether `zarrbuf read dst` gives exactly one of `datas` and check finds it clean."""

    def verify(res) -> bool:
        out = dst.parent / (dst.name + ".verify.npy")
        out.unlink(missing_ok=True)
        r = subprocess.run([str(binary), "read", str(dst), "--out", str(out)], capture_output=True)
        if r.returncode != 0 or not out.exists():
            return False
        got = np.load(out)
        if not any(got.dtype == d.dtype and got.shape == d.shape and np.array_equal(got, d) for d in datas):
            return False
        return subprocess.run([str(binary), "check", str(dst)], capture_output=True).returncode == 0

    return verify


def cases(ctx):
    rng = np.random.default_rng(26)
    a_data = rng.random((2000, 2000))
    b_data = rng.random((2000, 2000)).astype("<f4")
    c_data = rng.random((2000, 2000))
    a = source(ctx, "writers-a", a_data, (100, 100), "float64")
    b = source(ctx, "writers-b-f4", b_data, (100, 100), "float32")
    g = source(ctx, "writers-c-grid", c_data, (125, 125), "float64")
    c = dict(cls=CLS, fixer=SAFE_WRITES, chunk_bytes=125 * 125 * 8, kind="other", expect={CORRECT}, timeout=60)
    out = []
    for name, other, other_data in (("other-dtype", b, b_data), ("other-grid", g, c_data)):
        for overwrite in (False, True):
            flag = ["--overwrite"] if overwrite else []
            dst = ctx.dst(f"writers-{name}{'-overwrite' if overwrite else ''}")
            prepare = _prepare(ctx.bin, a, dst, overwrite)
            out.append(
                Case(
                    f"{CLS}/{name}{'-overwrite' if overwrite else ''}/copy-x2",
                    args=["copy", str(a), str(dst)] + flag,
                    parallel=[["copy", str(other), str(dst)] + flag],
                    verify=reads_as_one_of(ctx.bin, dst, [a_data, other_data]),
                    setup=prepare,
                    **c,
                )
            )
    # --overwrite of a 3-D array by a 1-D one must leave nothing of the 3-D array.
    three = source(ctx, "writers-3d", rng.random((20, 20, 20)), (10, 10, 10), "float64")
    one_data = np.arange(1000, dtype="<f8")
    one = source(ctx, "writers-1d", one_data, (100,), "float64")
    dst = ctx.dst("writers-3d-then-1d")

    def three_then(n_one: int):
        def setup():
            _rm(dst)
            subprocess.run([str(ctx.bin), "copy", str(three), str(dst)], check=True, capture_output=True)
            for _ in range(n_one):
                subprocess.run([str(ctx.bin), "copy", str(one), str(dst), "--overwrite"], capture_output=True)

        return setup

    o = dict(c, expect={CORRECT}, chunk_bytes=8000, timeout=20)
    out += [
        Case(f"{CLS}/overwrite-3d-with-1d/copy", args=["copy", str(one), str(dst), "--overwrite"], setup=three_then(0), verify=reads_as_one_of(ctx.bin, dst, [one_data]), **o),
        Case(f"{CLS}/overwrite-3d-with-1d/rerun", args=["copy", str(one), str(dst), "--overwrite"], setup=three_then(1), verify=reads_as_one_of(ctx.bin, dst, [one_data]), **o),
    ]
    return out


def _rm(path):
    if path.exists():
        shutil.rmtree(path)


def _prepare(binary, a, dst, overwrite):
    def setup():
        _rm(dst)
        if overwrite:
            subprocess.run([str(binary), "copy", str(a), str(dst)], check=True, capture_output=True)

    return setup
