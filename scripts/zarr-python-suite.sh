#!/usr/bin/env bash
# zarr-python 3.4.2's own test suite, run with zarrbuf's codec pipeline
# (codec_pipeline.path = zarrbuf.ZarrbufCodecPipeline), compared with the committed list of
# expected failures (python/zarr_suite_expected_failures.txt).
#
#   scripts/zarr-python-suite.sh            # extra arguments go to pytest, e.g. -x
#
# - Downloads zarr-python's source distribution once (pip download, checked against the
#   sha256 below) and unpacks it under target/zarr-suite/ (kept as a cache).
# - Runs its tests from the unpacked tree, so its own conftest and pytest settings apply
#   (filterwarnings = error, strict markers/xfail, asyncio_mode = auto); only its addopts
#   are replaced, because they need pytest-benchmark. The pipeline comes from our plugin
#   python/zarr_suite/zarrbuf_zarr_suite.py (-p), which sets ZARR_CODEC_PIPELINE__PATH (its
#   conftest resets zarr.config around every test, and a reset re-reads the environment),
#   checks the configuration before every test and counts the batches each test sends
#   through zarrbuf's Rust path and through the fallback to zarr-python's pipeline.
# - Fails if a test fails that the list does not name, if a listed test passes, or if fewer
#   than $min_on_zarrbuf tests sent a batch through zarrbuf.
#
# Modules: the ones about buffers, arrays, indexing, codecs and sharding —
# tests/test_buffer.py, tests/test_array.py, tests/test_indexing.py and tests/test_codecs/
# (which holds test_sharding.py and test_sharding_unit.py): ~6,500 tests, ~1.5-2 min on 2
# cores. Left out: stores (test_store/: zarrbuf does not provide stores), groups, the API and
# metadata modules (they do not reach a codec pipeline's read/write), the stateful and
# property-based hypothesis suites (minutes each), and the remote-store tests (they start
# their own servers).
#
# Needs the package built into .venv (scripts/python-tests.sh, which CI runs first) and
# python/requirements.txt installed (same). Talks to PyPI only to fetch the sdist when it
# is not cached.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py="$root/.venv/bin/python"
version=3.4.2
sha256=645d64f292f457120fc0ca18dbe38f665b4c21aaea38a2a88b5eead8f06f3d28
cache="$root/target/zarr-suite"
src="$cache/zarr-$version"
expected="$root/python/zarr_suite_expected_failures.txt"
min_on_zarrbuf=600
modules=(tests/test_buffer.py tests/test_array.py tests/test_indexing.py tests/test_codecs)

[ -x "$py" ] || { echo "no .venv: run scripts/python-tests.sh first" >&2; exit 1; }
"$py" -c 'import zarrbuf._zarrbuf, zarr, hypothesis, pytest_asyncio' || {
    echo "zarrbuf, zarr-python or the test tools are missing from .venv: run scripts/python-tests.sh first" >&2
    exit 1
}
installed=$("$py" -c 'import zarr; print(zarr.__version__)')
if [ "$installed" != "$version" ]; then
    echo "the suite is zarr-python $version's, but .venv has zarr-python $installed" >&2
    exit 1
fi

mkdir -p "$cache"
tarball="$cache/zarr-$version.tar.gz"
if [ ! -f "$tarball" ] || [ "$(sha256sum "$tarball" | cut -d' ' -f1)" != "$sha256" ]; then
    rm -f "$tarball"
    "$py" -m pip download --quiet --disable-pip-version-check --no-deps --no-binary :all: \
        -d "$cache" "zarr==$version"
    got=$(sha256sum "$tarball" | cut -d' ' -f1)
    if [ "$got" != "$sha256" ]; then
        echo "zarr-$version.tar.gz has sha256 $got, expected $sha256" >&2
        exit 1
    fi
    rm -rf "$src"
fi
if [ ! -f "$src/.unpacked" ]; then
    rm -rf "$src"
    tar -xzf "$tarball" -C "$cache"
    touch "$src/.unpacked"
fi

report="$cache/report.json"
rm -f "$report"
cd "$src"
set +e
PYTHONPATH="$root/python/zarr_suite${PYTHONPATH:+:$PYTHONPATH}" ZARRBUF_SUITE_REPORT="$report" \
    "$py" -m pytest -o addopts="" -p zarrbuf_zarr_suite -p no:cacheprovider -q -rfE \
    --durations=5 "${modules[@]}" "$@"
status=$?
set -e
if [ ! -f "$report" ]; then
    echo "pytest exited with $status and wrote no report" >&2
    exit 1
fi
if [ "$status" -ne 0 ] && [ "$status" -ne 1 ]; then
    echo "pytest exited with $status (interrupted, internal error or usage error)" >&2
    exit 1
fi
"$py" "$root/python/zarr_suite/compare.py" "$report" "$expected" "$min_on_zarrbuf"
