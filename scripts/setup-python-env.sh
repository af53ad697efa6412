#!/usr/bin/env bash
# Create (if missing) the repository's Python environment at .venv/ and install
# fixtures/requirements.txt into it. Idempotent: reruns are quick no-ops once the
# installed requirements match (a hash of the requirements file is kept in the venv).
#
#   scripts/setup-python-env.sh            # then: .venv/bin/python fixtures/generate.py
#   PYTHON=python3.12 scripts/setup-python-env.sh
#
# Needs Python >= 3.12 (zarr-python 3.4) and pip access to PyPI. No GPU needed. A .venv made
# with an older Python is recreated.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
req="$root/fixtures/requirements.txt"
stamp="$venv/.requirements.sha256"

if [[ -z "${PYTHON:-}" ]]; then
    # python3.12 / python3.13 on PATH, else a pyenv-installed 3.12+ (pyenv's shims only run the
    # versions its configuration selects), else python3.
    PYTHON=python3
    pyenv_root=$(pyenv root 2>/dev/null || true)
    for candidate in python3.12 python3.13 ${pyenv_root:+"$pyenv_root"/versions/3.1[2-9]*/bin/python3}; do
        if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c 'import sys' >/dev/null 2>&1; then
            PYTHON=$candidate
            break
        fi
    done
fi

new_enough='import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)'
if ! "$PYTHON" -c "$new_enough"; then
    echo "setup-python-env: $PYTHON is $("$PYTHON" --version 2>&1); zarr-python 3.4 needs Python >= 3.12" >&2
    exit 1
fi

if [[ ! -x "$venv/bin/python" ]] || ! "$venv/bin/python" -c "$new_enough" >/dev/null 2>&1; then
    echo "setup-python-env: creating $venv with $("$PYTHON" --version 2>&1)"
    rm -rf "$venv"
    "$PYTHON" -m venv "$venv"
fi

want="$(sha256sum "$req" | cut -d' ' -f1)"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    echo "setup-python-env: $venv is up to date"
    exit 0
fi

"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$req"
"$venv/bin/python" -c 'import zarr, numcodecs, numpy, tensorstore, s3fs, crc32c, obstore'
echo "$want" > "$stamp"
echo "setup-python-env: installed $(wc -l < "$req") lines of fixtures/requirements.txt into $venv"
