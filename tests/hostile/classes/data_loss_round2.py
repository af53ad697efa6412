"""The data-loss cases of issue 36, part of the data-loss class (`data_loss.py` adds them):
a copy into a bind mount of its source (the same directory by identity, which no path
comparison sees), a copy into or out of `memory://`, `check --repair` of a shard whose index
(its checksum intact) gives one inner chunk an impossible size — numbers and strings —, and a
second writer started after the first one's lock file was deleted."""

from __future__ import annotations

import os
import signal
import struct
import subprocess
import time

import numpy as np

from case import CORRECT, ERROR, SAFE_WRITES, STORE_FLOOR, Case
from stores import chunk_path, dense_1d, sharded_1d, v3_array, v3_group, write_shard
from classes.two_writers import source as dense_2d

CLS = "data-loss"
FILL = -1.0


def bind_mount_cases(ctx, c):
    """Copies whose destination is a bind mount of the source (or lies in one). Mounting
    needs root, as the suite has in CI; elsewhere these cases are not generated."""
    if os.geteuid() != 0:
        return []
    out = []

    def mounted(src, name):
        point = ctx.work / "mnt" / name
        point.mkdir(parents=True, exist_ok=True)
        umount(point)

        def setup():
            subprocess.run(["mount", "--bind", str(src), str(point)], check=True)

        def teardown():
            umount(point)

        return point, dict(setup=setup, teardown=teardown)

    for name, args in (
        ("onto-source", lambda own, m: ["copy", str(own / "inner"), str(m / "inner"), "--overwrite"]),
        ("onto-holder", lambda own, m: ["copy", str(own / "inner"), str(m), "--overwrite"]),
        ("into-source", lambda own, m: ["copy", str(own / "inner"), str(m / "inner" / "sub"), "--overwrite"]),
        ("onto-source-resume", lambda own, m: ["copy", str(own / "inner"), str(m), "--dst-path", "inner", "--resume"]),
    ):
        # Each case its own source: one that destroys it must not spoil the next.
        own = ctx.store(f"loss-bind-{name}")
        own.mkdir()
        v3_group(own)
        dense_1d(own / "inner", 3, "zstd")
        point, hooks = mounted(own, f"bind-{name}")
        out.append(Case(f"{CLS}/copy-onto-bind-mount/{name}", args=args(own, point), expect={ERROR}, protect=[own], **hooks, **c))
    return out


def umount(point) -> None:
    """Unmounts every mount stacked on `point` (a run killed before its teardown left one).
    os.path.ismount misses a bind mount within one file system (same device), so the mount
    table says."""
    while is_mount_point(point):
        subprocess.run(["umount", str(point)], check=True)


def is_mount_point(point) -> bool:
    """Whether something is mounted on `point`: field 5 of /proc/self/mountinfo (octal
    escapes for spaces and the like, which the suite's paths do not have)."""
    target = os.path.realpath(point)
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == target for line in f)


def memory_cases(ctx, c):
    a = ctx.store("loss-memory.zarr")
    dense_1d(a, 3, "zstd")
    return [
        Case(f"{CLS}/copy-into-memory/plain", args=["copy", str(a), "memory://x"], expect={ERROR}, protect=[a], **c),
        Case(f"{CLS}/copy-into-memory/overwrite", args=["copy", str(a), "memory://", "--overwrite"], expect={ERROR}, protect=[a], **c),
        Case(f"{CLS}/copy-out-of-memory/overwrite", args=["copy", "memory://", str(a), "--overwrite"], expect={ERROR}, protect=[a], **c),
    ]


def damaged_numeric_shard(root):
    """Shard 0 of a float64 array of two shards of 5 zstd inner chunks with inner chunk 2's
    size 2^62 in an index whose crc32c holds; returns the data a repair must leave (inner
    chunk 2 the fill value)."""
    data, shards = sharded_1d(root, n=1000, shard=500, inner=100, inner_compressor="zstd", fill=FILL)
    entries, off = [], 0
    for b in shards[0]:
        entries.append((off, len(b)))
        off += len(b)
    entries[2] = (entries[2][0], 1 << 62)
    write_shard(chunk_path(root, 3, 0), shards[0], entries=entries)
    want = data.copy()
    want[200:300] = FILL
    return want


def vlen_utf8(values) -> bytes:
    """A vlen-utf8 inner chunk: the element count, then each element's length and bytes."""
    parts = [struct.pack("<I", len(values))]
    for v in values:
        b = v.encode()
        parts.append(struct.pack("<I", len(b)) + b)
    return b"".join(parts)


def damaged_string_shard(root):
    """A string array of two shards of 4 vlen-utf8 inner chunks of 4 elements; shard 0's
    index gives inner chunk 1 an impossible size under a valid crc32c. Returns the values a
    repair must leave (inner chunk 1 the fill value "")."""
    values = [f"s{i}-{'é' * (i % 5)}" for i in range(32)]
    values[0] = "the longest value, in a kept inner chunk"
    codecs = [
        {
            "name": "sharding_indexed",
            "configuration": {
                "chunk_shape": [4],
                "codecs": [{"name": "vlen-utf8", "configuration": {}}],
                "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}],
                "index_location": "end",
            },
        }
    ]
    v3_array(root, [32], [16], data_type="string", codecs=codecs, fill="")
    for s in range(2):
        blobs = [vlen_utf8(values[s * 16 + i * 4 : s * 16 + i * 4 + 4]) for i in range(4)]
        entries, off = [], 0
        for b in blobs:
            entries.append((off, len(b)))
            off += len(b)
        if s == 0:
            entries[1] = (entries[1][0], (1 << 63) - 1)
        write_shard(chunk_path(root, 3, s), blobs, entries=entries)
    want = list(values)
    want[4:8] = [""] * 4
    return np.array(want)


def repair_cases(ctx):
    """check --repair keeps every intact inner chunk of a shard with one impossible index
    entry: the repair itself (it repairs all it found, so it exits 0, saying what it kept and
    dropped; the other shard untouched), and a read after it (only the damaged inner chunk is
    the fill value)."""
    out = []
    r = dict(cls=CLS, fixer=SAFE_WRITES, chunk_bytes=4000)
    for kind, build, kept in (("numbers", damaged_numeric_shard, 4), ("strings", damaged_string_shard, 3)):
        fixed = ctx.store(f"loss-repair-shard-{kind}")
        build(fixed)
        said = f"rewrote c/0: kept {kept} intact inner chunk(s), dropped 1 damaged"
        out.append(Case(f"{CLS}/repair-shard-index-entry-{kind}/check-repair", args=["check", str(fixed), "--repair"], expect={CORRECT}, kind="check", verify=lambda res, said=said: said in res.stdout, protect=[chunk_path(fixed, 3, 1)], setup=rebuild(fixed, build), **r))
        after = ctx.store(f"loss-repaired-shard-{kind}")
        want = build(after)
        out.append(Case(f"{CLS}/repair-shard-index-entry-{kind}/read-after", args=["read", str(after), "--out", "{out}"], expect={CORRECT}, data=want, setup=rebuild(after, build, repair=ctx.bin), **r))
    return out


def rebuild(root, build, repair=None):
    """A setup that writes the damaged store anew (and, with `repair`, the binary, runs
    `check --repair` on it), so each case starts from the damage whatever ran before."""

    def setup():
        build(root)
        if repair is not None:
            subprocess.run([str(repair), "check", str(root), "--repair"], capture_output=True, timeout=60)

    return setup


def deleted_lock_case(ctx):
    """Writer 1 copies into an array and holds its lock (stopped by SIGSTOP mid-copy); the
    lock file is deleted; writer 2 (`copy --overwrite` of another array) must be refused and
    touch nothing."""
    rng = np.random.default_rng(36)
    first = dense_2d(ctx, "loss-lock-first", rng.random((2000, 2000)), (100, 100), "float64")
    second = dense_2d(ctx, "loss-lock-second", rng.random((200, 200)).astype("<f4"), (100, 100), "float32")
    dst = ctx.dst("loss-lock-dst")
    lock = dst / ".zarrbuf.lock"
    writer: dict = {}

    def setup():
        if dst.exists():
            subprocess.run(["rm", "-rf", str(dst)], check=True)
        p = subprocess.Popen([str(ctx.bin), "copy", str(first), str(dst), "--sync"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        writer["p"] = p
        deadline = time.monotonic() + 30
        while not lock.exists() and p.poll() is None and time.monotonic() < deadline:
            time.sleep(0.001)
        os.kill(p.pid, signal.SIGSTOP)
        if p.poll() is not None or not lock.exists():
            raise RuntimeError("writer 1 ended (or never locked) before it could be stopped mid-copy")
        lock.unlink()

    def teardown():
        p = writer.pop("p", None)
        if p is None:
            return
        os.kill(p.pid, signal.SIGCONT)
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()

    return Case(f"{CLS}/second-writer-after-lock-file-deleted/copy", args=["copy", str(second), str(dst), "--overwrite"], expect={ERROR}, protect=[dst], setup=setup, teardown=teardown, cls=CLS, fixer=SAFE_WRITES, chunk_bytes=80000, kind="other", timeout=30)


def cases(ctx):
    c = dict(cls=CLS, fixer=STORE_FLOOR, chunk_bytes=800, kind="other")
    return bind_mount_cases(ctx, c) + memory_cases(ctx, c) + repair_cases(ctx) + [deleted_lock_case(ctx)]
