#!/usr/bin/env bash
# Build the Python package (python/: PyO3 + maturin) into the repository's .venv and run its
# pytest suite (python/tests). What CI runs for the Python side of zarrbuf.
#
#   scripts/python-tests.sh               # extra arguments go to pytest, e.g. -k pipeline
#
# Uses .venv from scripts/setup-python-env.sh (Python >= 3.12, zarr-python 3.4), installs the
# pinned build and test tools of python/requirements.txt into it when they change, and
# builds the extension with `maturin develop --release` into the workspace's target/ dir,
# so it reuses the release build of zarrbuf. Needs no GPU (device tests check
# zarrbuf.cuda_device_count()).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
req="$root/python/requirements.txt"
stamp="$venv/.python-requirements.sha256"

"$root/scripts/setup-python-env.sh"

want="$(sha256sum "$req" | cut -d' ' -f1)"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" || ! -x "$venv/bin/maturin" ]]; then
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$req"
    echo "$want" > "$stamp"
fi

cd "$root/python"
VIRTUAL_ENV="$venv" CARGO_TARGET_DIR="$root/target" "$venv/bin/maturin" develop --release
"$venv/bin/python" -m pytest -q -rs "$root/python/tests" "$@"
