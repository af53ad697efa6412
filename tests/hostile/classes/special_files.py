"""Chunk keys that are not regular files of the store: a directory, a FIFO, a dangling
symlink, a symlink to a chunk outside the store, and a `c/` directory that is a symlink out
of the store. None may hang; read and check must agree; nothing outside the store is read;
check --repair removes none of them."""

from __future__ import annotations

import os

import numpy as np

from case import CORRECT, ERROR, SAFE_WRITES, Case
from stores import chunk_path, dense_1d, put

CLS = "special-files"


def cases(ctx):
    out = []
    outside = ctx.store("special-outside")
    outside.mkdir(parents=True)
    other = np.full(100, 42.0)
    put(outside / "3", other.tobytes())
    outside_c = outside / "c"
    for i in range(10):
        put(outside_c / str(i), other.tobytes())
    kinds = {
        "directory": (SAFE_WRITES, {ERROR}, lambda p: p.mkdir()),
        "fifo": (SAFE_WRITES, {ERROR}, lambda p: os.mkfifo(p)),
        "dangling-symlink": (SAFE_WRITES, {ERROR, CORRECT}, lambda p: os.symlink(str(outside / "nothing-here"), p)),
        "symlink-out": (SAFE_WRITES, {ERROR}, lambda p: os.symlink(str(outside / "3"), p)),
    }
    for name, (fixer, expect, make) in kinds.items():
        root = ctx.store(f"special-{name}")
        data = dense_1d(root, 3, "none")
        key = chunk_path(root, 3, 3)
        key.unlink()
        make(key)
        filled = data.copy()
        filled[300:400] = 0.0
        out += commands(name, root, key, fixer, expect, filled)
    # `c/` itself a symlink to a directory of chunks outside the store.
    root = ctx.store("special-c-symlink-out")
    data = dense_1d(root, 3, "none")
    c_dir = root / "c"
    for p in c_dir.iterdir():
        p.unlink()
    c_dir.rmdir()
    os.symlink(str(outside_c), c_dir)
    out += commands("c-symlink-out", root, c_dir, SAFE_WRITES, {ERROR}, None)
    return out


def commands(name, root, key, fixer, expect, filled):
    s = str(root)
    c = dict(cls=CLS, fixer=fixer, chunk_bytes=800, timeout=5, agree=f"{CLS}/{name}")
    return [
        Case(f"{CLS}/{name}/read", args=["read", s, "--out", "{out}"], expect=expect, data=filled, **c),
        Case(f"{CLS}/{name}/read-subset", args=["read", s, "--subset", "300:303", "--out", "{out}"], expect=expect, data=None if filled is None else filled[300:303], **c),
        Case(f"{CLS}/{name}/read-async", args=["read", s, "--async", "--out", "{out}"], expect=expect, data=filled, **c),
        Case(f"{CLS}/{name}/check", args=["check", s], expect=expect, kind="check", **c),
        Case(
            f"{CLS}/{name}/check-repair",
            args=["check", s, "--repair"],
            expect={CORRECT, ERROR},
            kind="check",
            protect=[key, key.parent],
            **{**c, "fixer": SAFE_WRITES, "agree": None},
        ),
    ]
