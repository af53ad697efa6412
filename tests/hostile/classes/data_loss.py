"""Commands that must not destroy what they were not asked to: copies whose destination
overlaps their source (inside it, around it, the same directory by another spelling, a
symlink to it, a bind mount of it), copies into memory://, check --repair on files it must
leave alone (an intact chunk it cannot open, a user's `draft#2`, a live writer's temporary
file) and on a shard with one impossible index entry, and a second writer after the lock
file was deleted (the last four: `data_loss_round2.py`, issue 36)."""

from __future__ import annotations

import os
import socket
import subprocess

from case import CORRECT, ERROR, SAFE_WRITES, STORE_FLOOR, Case
from classes import data_loss_round2
from stores import chunk_path, dense_1d, v3_group

CLS = "data-loss"


def host_name() -> str:
    """The host part of zarrbuf's temporary names ('.' and the like replaced by '_')."""
    raw = open("/proc/sys/kernel/hostname").read().strip() or socket.gethostname()
    clean = "".join(ch if ch.isalnum() or ch == "-" else "_" for ch in raw)
    return clean or "host"


def cases(ctx):
    out = []
    c = dict(cls=CLS, fixer=STORE_FLOOR, chunk_bytes=800, kind="other")
    # Each copy gets its own source: a command that destroys it must not spoil the next.
    def group(name):
        own = ctx.store(f"loss-{name}")
        own.mkdir()
        v3_group(own)
        dense_1d(own / "inner", 3, "zstd")
        return own

    def array(name):
        a = ctx.store(f"loss-{name}.zarr")
        dense_1d(a, 3, "zstd")
        return a

    own = group("into-parent")
    out.append(Case(f"{CLS}/copy-into-parent/overwrite", args=["copy", str(own / "inner"), str(own), "--overwrite"], expect={ERROR}, protect=[own], **c))
    own = group("into-parent-plain")
    out.append(Case(f"{CLS}/copy-into-parent/plain", args=["copy", str(own / "inner"), str(own)], expect={ERROR}, protect=[own], **c))
    own = group("dst-path")
    out.append(Case(f"{CLS}/copy-onto-self-dst-path/overwrite", args=["copy", str(own), str(own), "--src-path", "inner", "--dst-path", "inner", "--overwrite"], expect={ERROR}, protect=[own], **c))
    a = array("into-child")
    out.append(Case(f"{CLS}/copy-into-child/overwrite", args=["copy", str(a), str(a / "sub"), "--overwrite"], expect={ERROR}, protect=[a], **c))
    a = array("self")
    out.append(Case(f"{CLS}/copy-onto-self/overwrite", args=["copy", str(a), str(a), "--overwrite"], expect={ERROR}, protect=[a], **c))
    a = array("self-resume")
    out.append(Case(f"{CLS}/copy-onto-self/resume", args=["copy", str(a), str(a), "--resume"], expect={ERROR}, protect=[a], **c))
    a = array("self-dotdot")
    out.append(Case(f"{CLS}/copy-onto-self-dotdot/overwrite", args=["copy", str(a), str(a.parent / ".." / a.parent.name / a.name), "--overwrite"], expect={ERROR}, protect=[a], **c))
    a = array("self-url")
    out.append(Case(f"{CLS}/copy-onto-self-url/overwrite", args=["copy", str(a), f"file://{a}", "--overwrite"], expect={ERROR}, protect=[a], **c))
    a = array("url-self")
    out.append(Case(f"{CLS}/copy-url-onto-self/overwrite", args=["copy", f"file://{a}", str(a), "--overwrite"], expect={ERROR}, protect=[a], **c))
    a = array("link-target")
    link = ctx.work / "stores" / "loss-link.zarr"
    if link.is_symlink() or link.exists():
        link.unlink()
    os.symlink(str(a), link)
    out.append(Case(f"{CLS}/copy-onto-symlink-of-source/overwrite", args=["copy", str(a), str(link), "--overwrite"], expect={ERROR}, protect=[a], **c))
    a = array("linkdir-target")
    linkdir = ctx.store("loss-linkdir")
    linkdir.mkdir()
    os.symlink(str(a), linkdir / "alias")
    out.append(Case(f"{CLS}/copy-onto-symlinked-parent/overwrite", args=["copy", str(a), str(linkdir / "alias" / "sub"), "--overwrite"], expect={ERROR}, protect=[a], **c))

    r = dict(cls=CLS, fixer=SAFE_WRITES, chunk_bytes=800, kind="check", expect={CORRECT, ERROR})
    # An intact chunk check cannot open (permission denied): reported, never removed.
    perm = ctx.store("loss-unreadable")
    dense_1d(perm, 3, "zstd")
    key = chunk_path(perm, 3, 3)
    user = None
    if os.geteuid() == 0:
        user = 65534
        subprocess.run(["chown", "-R", f"{user}:{user}", str(perm)], check=True)
    key.chmod(0)
    out.append(Case(f"{CLS}/repair-unreadable-chunk/check-repair", args=["check", str(perm), "--repair"], protect=[key], user=user, **r))
    # A user's file whose name merely looks like a leftover.
    draft = ctx.store("loss-draft")
    dense_1d(draft, 3, "zstd")
    (draft / "draft#2").write_text("my notes\n")
    (draft / "c" / "draft#2").write_text("more notes\n")
    out.append(Case(f"{CLS}/repair-draft#2/check-repair", args=["check", str(draft), "--repair"], protect=[draft / "draft#2", draft / "c" / "draft#2"], **r))
    # A live writer's temporary files: zarrbuf's own naming with this suite's (live) pid, and
    # object_store's staging name, both fresh.
    live = ctx.store("loss-live-writer")
    dense_1d(live, 3, "zstd")
    tmp = live / "c" / f".3.zarrbuf-tmp.{host_name()}.{os.getpid()}.0"
    tmp.write_bytes(b"half a chunk")
    staging = live / "c" / "3#1"
    staging.write_bytes(b"half a chunk")
    out.append(Case(f"{CLS}/repair-live-writer-temp/check-repair", args=["check", str(live), "--repair"], protect=[tmp, staging], **r))
    return out + data_loss_round2.cases(ctx)
