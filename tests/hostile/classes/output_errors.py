"""Output that cannot be written: a closed stdout (`| head -1`) ends quietly (exit 0 or
SIGPIPE), a full disk (`> /dev/full`) is one `error:` line and exit 1, a failing stderr
is no panic either."""

from __future__ import annotations

from case import CORRECT, ERROR, SAFE_WRITES, Case
from stores import dense_1d, put, v3_group

CLS = "output-errors"


def cases(ctx):
    many = ctx.store("output-many-arrays")
    many.mkdir()
    v3_group(many)
    template = ctx.store("output-template")
    dense_1d(template, 3, "none")
    meta = (template / "zarr.json").read_bytes()
    # Enough output (hundreds of KiB) that `head -1` closes the pipe while zarrbuf writes.
    for i in range(1000):
        put(many / f"array_with_a_name_long_enough_to_fill_the_pipe_{i:04d}" / "zarr.json", meta)
    one = ctx.store("output-one")
    data = dense_1d(one, 3, "zstd")
    m, s = str(many), str(one)
    c = dict(cls=CLS, fixer=SAFE_WRITES, chunk_bytes=800, kind="other")
    return [
        Case(f"{CLS}/info-json-head", args=["info", m, "--json"], expect={CORRECT}, stdout="head1", **c),
        Case(f"{CLS}/info-tree-head", args=["info", m], expect={CORRECT}, stdout="head1", **c),
        Case(f"{CLS}/info-devfull", args=["info", s], expect={ERROR}, stdout="devfull", **c),
        Case(f"{CLS}/info-json-devfull", args=["info", m, "--json"], expect={ERROR}, stdout="devfull", **c),
        Case(f"{CLS}/read-summary-devfull", args=["read", s], expect={ERROR}, stdout="devfull", **c),
        Case(f"{CLS}/check-json-devfull", args=["check", s, "--json"], expect={ERROR}, stdout="devfull", **c),
        Case(f"{CLS}/read-stderr-devfull", args=["read", s, "--out", "{out}"], expect={CORRECT, ERROR}, stderr="devfull", data=data, **c),
        Case(f"{CLS}/check-stderr-devfull", args=["check", s], expect={CORRECT, ERROR}, stderr="devfull", **c),
    ]
