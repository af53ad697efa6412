#!/usr/bin/env bash
# Puts nvCOMP's library, libnvcomp.so.6, into DIR (default .gpu), taken from the
# `nvidia-libnvcomp-cu13` 6.x pip wheel (downloaded into .whl/ once; ~29 MB): the nvCOMP
# whose headers zarrbuf's declarations follow. zarrbuf loads it at run time and never
# commits or bundles it. Used by `scripts/gpu-test build` (the GPU machine has no network)
# and by `.ci/run`, whose tests load it without a GPU to check its version and every
# function zarrbuf declares. Prints the library's path.
#   scripts/fetch-nvcomp.sh [DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-.gpu}
python=python3
[ -x .venv/bin/python ] && python=.venv/bin/python
mkdir -p "$dir"
if [ ! -f "$dir/libnvcomp.so.6" ]; then
    if ! ls .whl/nvidia_libnvcomp_cu13-*.whl >/dev/null 2>&1; then
        mkdir -p .whl
        "$python" -m pip download --quiet --no-deps -d .whl "nvidia-libnvcomp-cu13>=6,<7"
    fi
    wheel=$(ls .whl/nvidia_libnvcomp_cu13-*.whl | sort | tail -n 1)
    "$python" -c 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); open(sys.argv[2], "wb").write(z.read("nvidia/libnvcomp/lib64/libnvcomp.so.6"))' "$wheel" "$dir/libnvcomp.so.6"
fi
echo "$PWD/$dir/libnvcomp.so.6"
