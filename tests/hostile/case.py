"""One hostile case: a zarrbuf command on a crafted store and the outcome it must have."""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

#: Outcomes a case may expect.
CORRECT = "correct"  # exit 0 and the expected data (or a passing verify)
ERROR = "error"  # exit 1 with an `error:` line (or, for check, a damage report)

#: Branches expected to fix what fails (issue 26's split).
BOUNDED_DECODE = "bounded-decode"  # items 1-2: decode bounds and size checks
SAFE_WRITES = "safe-writes"  # items 3-6: repair safety, check/read agreement, special files, lock, output
STORE_FLOOR = "store-floor"  # copy overlap refusal, traversal keys
ZIP_VLEN = "zip-vlen"  # issue 36: zip integrity, strings under the bound, memory limits, no hang

MiB = 1 << 20


@dataclass
class Case:
    """A command and its expectation. `args` are zarrbuf's arguments; `{out}` in them is
    replaced by a fresh .npy path whose contents are compared with `data` on exit 0."""

    name: str
    cls: str
    args: list[str]
    expect: set[str]
    fixer: str
    #: What the command is: "read" (returns data: exit 0 where an error belongs is silent
    #: wrong data), "check" (exit 0 on damage is a miss) or "other".
    kind: str = "read"
    data: np.ndarray | None = None
    #: Called on exit 0 (after the data comparison) with the result; False means wrong.
    verify: Callable[["Result"], bool] | None = None
    #: Decoded bytes of the largest chunk the command legitimately decodes.
    chunk_bytes: int = 0
    #: Paths whose contents must be the same after the command (intact data).
    protect: list[Path] = field(default_factory=list)
    timeout: float = 10.0
    stdout: str = "file"  # file | head1 | devfull
    stderr: str = "file"  # file | devfull
    #: Commands started at the same time as `args` (two writers).
    parallel: list[list[str]] = field(default_factory=list)
    setup: Callable[[], None] | None = None
    teardown: Callable[[], None] | None = None
    #: Cases with the same tag must agree: one correct and another a clean error is a
    #: disagreement (check says clean where read fails, or the reverse).
    agree: str | None = None
    #: Run as this user id (permission cases when the suite runs as root).
    user: int | None = None
    note: str = ""

    def bound(self) -> int:
        """The peak memory the issue allows: 256 MiB + 2 x the largest legit chunk."""
        return 256 * MiB + 2 * self.chunk_bytes


@dataclass
class Result:
    case: Case
    outcome: str
    rc: int | None
    seconds: float
    peak: int  # max RSS in bytes over the case's processes
    stdout: str
    stderr: str
    detail: str = ""

    @property
    def failed(self) -> bool:
        return self.outcome not in self.case.expect


def snapshot(paths: list[Path]) -> dict[str, tuple]:
    """Everything under `paths` (not following symlinks): type, size and content hash."""
    seen: dict[str, tuple] = {}

    def one(p: Path) -> None:
        try:
            st = os.lstat(p)
        except FileNotFoundError:
            seen[str(p)] = ("missing",)
            return
        if stat.S_ISLNK(st.st_mode):
            seen[str(p)] = ("link", os.readlink(p))
        elif stat.S_ISDIR(st.st_mode):
            seen[str(p)] = ("dir",)
            for child in sorted(os.listdir(p)):
                one(p / child)
        elif stat.S_ISREG(st.st_mode):
            h = hashlib.sha256()
            try:
                with open(p, "rb") as f:
                    while block := f.read(1 << 20):
                        h.update(block)
                seen[str(p)] = ("file", st.st_size, h.hexdigest())
            except PermissionError:
                seen[str(p)] = ("file", st.st_size, "unreadable")
        else:
            seen[str(p)] = ("special", stat.S_IFMT(st.st_mode))

    for p in paths:
        one(Path(p))
    return seen


def lost(before: dict, after: dict) -> list[str]:
    """Paths present before that are gone or changed after (additions are not losses)."""
    return [p for p, v in before.items() if after.get(p) != v and v != ("missing",)]
