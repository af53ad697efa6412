"""Shard indexes that lie (with a valid crc32c, so only their values are wrong): an entry
claiming 2^63-1 bytes or an offset of 2^63-1, an entry past the end of the file, an index of
4 GiB (2^28 inner chunks) in a small file and in a sparse 4 GiB file; and a valid shard in
a 16 GiB sparse file, which check must read by range, not whole."""

from __future__ import annotations



from case import BOUNDED_DECODE, CORRECT, ERROR, Case
from stores import chunk_path, sharded_1d, v3_array, v3_codecs, write_shard

CLS = "shard-index"
BIG = 2**63 - 1


def cases(ctx):
    c = dict(cls=CLS, fixer=BOUNDED_DECODE, chunk_bytes=8000)
    out = []
    # One entry of a 10-chunk shard (1000 float64, inner chunks of 100) replaced.
    for name, entry in {
        "length-2^63": lambda size: (0, BIG),
        "offset-2^63": lambda size: (BIG, 800),
        "past-end": lambda size: (size + 4096, 800),
        "length-past-end": lambda size: (0, size + 4096),
    }.items():
        root = ctx.store(f"shard-{name}")
        data, shards = sharded_1d(root)
        path = chunk_path(root, 3, 0)
        entries = write_shard(path, shards[0])
        entries[3] = entry(path.stat().st_size)
        write_shard(path, shards[0], entries)
        s = str(root)
        out += [
            Case(f"{CLS}/{name}/read", args=["read", s, "--out", "{out}"], expect={ERROR}, **c),
            Case(f"{CLS}/{name}/read-subset", args=["read", s, "--subset", "300:303", "--out", "{out}"], expect={ERROR}, **c),
            Case(f"{CLS}/{name}/read-beside", args=["read", s, "--subset", "0:10", "--out", "{out}"], expect={CORRECT, ERROR}, data=data[0:10], **c),
            Case(f"{CLS}/{name}/read-async", args=["read", s, "--async", "--out", "{out}"], expect={ERROR}, **c),
            Case(f"{CLS}/{name}/check", args=["check", s], expect={ERROR}, kind="check", **c),
        ]
    # 2^28 inner chunks of one uint8 each: a 4 GiB index, in a 100-byte file and in a
    # sparse file long enough to hold it (every entry then reads as offset 0, length 0).
    for sparse in (False, True):
        name = "index-4GiB" + ("-sparse" if sparse else "")
        root = ctx.store(f"shard-{name}")
        n = 1 << 28
        codecs = [
            {
                "name": "sharding_indexed",
                "configuration": {
                    "chunk_shape": [1],
                    "codecs": v3_codecs(None),
                    "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}],
                    "index_location": "end",
                },
            }
        ]
        v3_array(root, [n], [n], data_type="uint8", codecs=codecs, fill=0)
        path = chunk_path(root, 3, 0)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as f:
            if sparse:
                f.truncate(n * 16 + 4)
            else:
                f.write(b"\x01" * 100)
        s = str(root)
        out += [
            Case(f"{CLS}/{name}/read-subset", args=["read", s, "--subset", "0:10", "--out", "{out}"], expect={ERROR}, chunk_bytes=0, **{k: v for k, v in c.items() if k != "chunk_bytes"}),
            Case(f"{CLS}/{name}/check", args=["check", s], expect={ERROR}, kind="check", chunk_bytes=0, **{k: v for k, v in c.items() if k != "chunk_bytes"}),
        ]
    # A valid shard whose file is 16 GiB: the inner chunks at the start, a hole, the index
    # at the end.
    root = ctx.store("shard-sparse-16GiB")
    data, shards = sharded_1d(root)
    write_shard(chunk_path(root, 3, 0), shards[0], pad_to=16 << 30)
    s = str(root)
    out += [
        Case(f"{CLS}/sparse-16GiB/read", args=["read", s, "--out", "{out}"], expect={CORRECT}, data=data, timeout=30, **c),
        Case(f"{CLS}/sparse-16GiB/read-subset", args=["read", s, "--subset", "300:303", "--out", "{out}"], expect={CORRECT}, data=data[300:303], timeout=30, **c),
        Case(f"{CLS}/sparse-16GiB/check", args=["check", s], expect={CORRECT, ERROR}, kind="check", timeout=30, **c),
    ]
    return out
