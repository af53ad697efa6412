"""zarrbuf.nvcomp_library / nvcomp_compression: where nvCOMP was found, or why not.

nvCOMP is looked up once per process, so each case runs in a fresh Python with its own
ZARRBUF_NVCOMP (the one place zarrbuf then looks).
"""

from __future__ import annotations

import ctypes.util
import os
import subprocess
import sys

import pytest

PROBE = """
import zarrbuf
for ask in (zarrbuf.nvcomp_library, zarrbuf.nvcomp_compression):
    try:
        print("ok", ask())
    except zarrbuf.ZarrbufError as e:
        print("error", e)
"""


def probe(library: str) -> list[str]:
    env = dict(os.environ, ZARRBUF_NVCOMP=library)
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True
    )
    lines = done.stdout.splitlines()
    assert len(lines) == 2, done
    return lines


def test_a_missing_library_says_how_to_install_nvcomp(tmp_path):
    missing = str(tmp_path / "libnvcomp.so.6")
    for line in probe(missing):
        assert line.startswith("error "), line
        assert "nvCOMP was not found" in line and missing in line, line
        assert "pip install nvidia-libnvcomp-cu13" in line, line


def test_a_library_that_is_not_nvcomp_6_is_refused():
    libz = ctypes.util.find_library("z")
    assert libz, "zlib's shared library should be on every Linux machine"
    for line in probe(libz):
        assert line.startswith("error "), line
        assert "has no nvcompGetProperties" in line and "needs nvCOMP 6" in line, line


def test_nvcomp_6_is_found_where_zarrbuf_nvcomp_points():
    # As the Rust tests: the library ZARRBUF_NVCOMP names (.ci/run sets it from
    # scripts/fetch-nvcomp.sh, with ZARRBUF_REQUIRE_NVCOMP=1).
    library = os.environ.get("ZARRBUF_NVCOMP")
    if not library:
        why = "ZARRBUF_NVCOMP does not name libnvcomp.so.6 (scripts/fetch-nvcomp.sh fetches it)"
        assert os.environ.get("ZARRBUF_REQUIRE_NVCOMP") != "1", why
        pytest.skip(why)
    assert probe(library) == [f"ok {library}"] * 2
