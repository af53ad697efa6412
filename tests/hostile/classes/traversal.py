"""Keys that leave the store: consolidated metadata (v3 inline, v2 .zmetadata) naming
`../` and absolute paths, `--path` and `--dst-path` arguments with `..`. Every route must
refuse them; nothing outside the store is listed, read or written."""

from __future__ import annotations

import json


from case import ERROR, STORE_FLOOR, Case
from stores import dense_1d, v3_group, v3_meta, write_json

CLS = "traversal"


def cases(ctx):
    c = dict(cls=CLS, fixer=STORE_FLOOR, chunk_bytes=800, timeout=15)
    out = []
    victim = ctx.store("traversal-victim")
    dense_1d(victim, 3, "none")
    victim_meta = v3_meta(victim)
    keys = {
        "dotdot": "../traversal-victim",
        "inner-dotdot": "a/../../traversal-victim",
        "absolute": str(victim),
    }
    for name, key in keys.items():
        root = ctx.store(f"traversal-v3-{name}")
        v3_group(root, consolidated={key: victim_meta})
        s = str(root)
        out += [
            Case(f"{CLS}/v3-consolidated-{name}/info", args=["info", s], expect={ERROR}, kind="other", **c),
            Case(f"{CLS}/v3-consolidated-{name}/info-json", args=["info", s, "--json"], expect={ERROR}, kind="other", **c),
            Case(f"{CLS}/v3-consolidated-{name}/read-path", args=["read", s, "--path", key, "--out", "{out}"], expect={ERROR}, **c),
            Case(f"{CLS}/v3-consolidated-{name}/check", args=["check", s], expect={ERROR}, kind="check", **c),
        ]
    # v2: .zmetadata naming the victim's metadata through `..`.
    v2victim = ctx.store("traversal-v2-victim")
    dense_1d(v2victim, 2, "none")
    root = ctx.store("traversal-v2-zmetadata")
    write_json(root / ".zgroup", {"zarr_format": 2})
    zarray = json.loads((v2victim / ".zarray").read_text())
    write_json(
        root / ".zmetadata",
        {"zarr_consolidated_format": 1, "metadata": {".zgroup": {"zarr_format": 2}, "../traversal-v2-victim/.zarray": zarray}},
    )
    s = str(root)
    out += [
        Case(f"{CLS}/v2-zmetadata-dotdot/info", args=["info", s], expect={ERROR}, kind="other", **c),
        Case(f"{CLS}/v2-zmetadata-dotdot/info-json", args=["info", s, "--json"], expect={ERROR}, kind="other", **c),
        Case(f"{CLS}/v2-zmetadata-dotdot/read-path", args=["read", s, "--path", "../traversal-v2-victim", "--out", "{out}"], expect={ERROR}, **c),
        Case(f"{CLS}/v2-zmetadata-dotdot/check", args=["check", s], expect={ERROR}, kind="check", **c),
    ]
    # Arguments: a --path or --dst-path climbing out of the store.
    plain = ctx.store("traversal-plain")
    plain.mkdir()
    v3_group(plain)
    s = str(plain)
    escape = ctx.work / "stores" / "traversal-escaped"
    out += [
        Case(f"{CLS}/arg-path-dotdot/read", args=["read", s, "--path", "../traversal-victim", "--out", "{out}"], expect={ERROR}, **c),
        Case(f"{CLS}/arg-path-absolute/read", args=["read", s, "--path", str(victim), "--out", "{out}"], expect={ERROR}, **c),
        Case(f"{CLS}/arg-path-dotdot/info", args=["info", s, "--path", "../traversal-victim"], expect={ERROR}, kind="other", **c),
        Case(f"{CLS}/arg-path-dotdot/check", args=["check", s, "--path", "../traversal-victim"], expect={ERROR}, kind="check", **c),
        Case(
            f"{CLS}/arg-dst-path-dotdot/copy",
            args=["copy", str(victim), s, "--dst-path", "../traversal-escaped"],
            expect={ERROR},
            kind="other",
            verify=lambda r: not escape.exists(),
            setup=lambda: _remove(escape),
            **c,
        ),
    ]
    return out


def _remove(path):
    import shutil

    if path.exists():
        shutil.rmtree(path)
