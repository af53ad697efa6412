#!/usr/bin/env bash
# Compiles every CUDA kernel (codecs/kernels/*.cu) with NVRTC for the GPU architectures
# zarrbuf targets, on a machine without a GPU: NVRTC is a plain library, fetched here from
# its pip wheel (nvidia-cuda-nvrtc, ~58 MB) into target/nvrtc the first time. A kernel that
# does not compile would break every device path at run time, so CI fails on it.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=target/nvrtc
if [ ! -f "$dir/libnvrtc.so" ]; then
    mkdir -p "$dir/wheel"
    python=.venv/bin/python
    [ -x "$python" ] || python=python3
    "$python" -m pip download --quiet --no-deps -d "$dir/wheel" 'nvidia-cuda-nvrtc>=13,<14'
    wheel=$(ls "$dir"/wheel/nvidia_cuda_nvrtc-*.whl | sort | tail -n 1)
    "$python" - "$wheel" "$dir" <<'PY'
import os, sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        if "/lib/libnvrtc" in name and ".so" in name:
            with open(os.path.join(out, os.path.basename(name)), "wb") as f:
                f.write(z.read(name))
PY
    lib=$(ls "$dir"/libnvrtc.so.* | grep -v builtins | sort | tail -n 1)
    ln -sf "$(basename "$lib")" "$dir/libnvrtc.so"
    rm -rf "$dir/wheel"
fi
LD_LIBRARY_PATH="$PWD/$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ZARRBUF_REQUIRE_NVRTC=1 \
    cargo test -p zarrbuf-codecs --test it nvrtc_compile:: -- --nocapture
