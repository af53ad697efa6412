"""What every class's generator gets: where to write, the bomb cache, the bomb size."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from bombs import Cache


@dataclass
class Ctx:
    work: Path
    cache: Cache
    bomb: int  # decoded bytes of each decompression bomb
    bin: Path  # the zarrbuf binary (setups and verifications run it too)

    def store(self, name: str) -> Path:
        """A fresh, empty directory for one store."""
        path = self.work / "stores" / name
        if path.is_symlink() or path.is_file():
            path.unlink()
        elif path.exists():
            _rmtree(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def dst(self, name: str) -> Path:
        """A destination path that does not exist yet (copies)."""
        path = self.work / "dst" / name
        if path.exists() or path.is_symlink():
            _rmtree(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        return path


def _rmtree(path: Path) -> None:
    """Removes a tree that may hold FIFOs, unreadable files and directory symlinks."""
    if path.is_symlink() or not path.is_dir():
        path.unlink()
        return
    for p in path.rglob("*"):
        if not p.is_symlink():
            try:
                p.chmod(0o755 if p.is_dir() else 0o644)
            except OSError:
                pass
    path.chmod(0o755)
    shutil.rmtree(path)
