"""Reads into GPU memory from Python, every reader in one run (scripts/gpu-test run-python).

The arrays (float32, 64^3 chunks, written here by zarr-python into a temporary directory):
uncompressed, zstd 1, blosc lz4 + shuffle, and zstd 1 sharded (256^3 shards of 64^3 inner
chunks). Readers, each timed on `arr[:]` of the whole array into device memory:

- zarr-python's GPU mode (`zarr.config.enable_gpu()`: CuPy buffers, CPU decompression);
- the same with `codec_pipeline.path` set to zarrbuf's pipeline, which decodes into the
  CuPy buffers itself (python/zarrbuf/pipeline.py);
- `zarrbuf.open(...).read(device="cuda")` handed to `torch.from_dlpack` (no copy), with the
  CPU decoders, and with nvCOMP when it can be found (`ZARRBUF_NVCOMP`).

Every result is compared once with the array written, then each reader is timed `--reps`
times, readers taking turns; the table gives median GB/s (decoded bytes) and the ratio to
zarr-python's GPU mode.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np


def write_arrays(root: Path, mib: int) -> dict[str, Path]:
    import zarr
    from zarr.codecs import BloscCodec, ZstdCodec

    n = int(round((mib * 2**20 / 4) ** (1 / 3) / 64)) * 64 or 64
    shape = (n, n, n)
    rng = np.random.default_rng(0)
    # Smooth data with noise: compresses like measurements do, not like zeros.
    base = np.linspace(0, 1, n, dtype=np.float32)
    data = (base[:, None, None] + base[None, :, None] * 2 + base[None, None, :] * 3).astype(
        np.float32
    )
    data += rng.standard_normal(shape, dtype=np.float32) * 0.01
    variants = {
        "uncompressed": dict(compressors=None),
        "zstd 1": dict(compressors=ZstdCodec(level=1)),
        "blosc lz4 + shuffle": dict(
            compressors=BloscCodec(cname="lz4", clevel=5, shuffle="shuffle")
        ),
        "zstd 1, sharded": dict(compressors=ZstdCodec(level=1), shards=(256, 256, 256)),
    }
    out = {}
    for name, kw in variants.items():
        path = root / (name.replace(" ", "_").replace(",", "").replace("+", "") + ".zarr")
        if "shards" in kw and n < 256:
            kw = dict(kw, shards=(n, n, n))
        a = zarr.create_array(
            store=str(path), shape=shape, chunks=(64, 64, 64), dtype="float32", **kw
        )
        a[:] = data
        out[name] = path
    np.save(root / "expected.npy", data)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--mib", type=int, default=1024, help="array size in MiB (default 1024)")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()

    import cupy
    import torch
    import zarr

    import zarrbuf

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        arrays = write_arrays(root, args.mib)
        expected = np.load(root / "expected.npy")
        nbytes = expected.nbytes

        def zarr_gpu(path: Path, pipeline: str | None):
            def read():
                cfg = {"codec_pipeline.path": pipeline} if pipeline else {}
                with zarr.config.enable_gpu(), zarr.config.set(cfg):
                    a = zarr.open_array(str(path), mode="r")
                    out = a[:]
                    cupy.cuda.runtime.deviceSynchronize()
                    return out

            return read

        def zarrbuf_torch(path: Path, decode: str):
            a = zarrbuf.open(str(path))

            def read():
                t = torch.from_dlpack(a.read(device="cuda", decode=decode))
                torch.cuda.synchronize()
                return t

            return read

        readers = {
            "zarr-python GPU mode (CuPy)": lambda p: zarr_gpu(p, None),
            "zarr-python GPU mode + zarrbuf pipeline": lambda p: zarr_gpu(
                p, "zarrbuf.ZarrbufCodecPipeline"
            ),
            "zarrbuf.open().read(cuda) -> torch, decode cpu": lambda p: zarrbuf_torch(p, "cpu"),
            "zarrbuf.open().read(cuda) -> torch, decode gpu": lambda p: zarrbuf_torch(p, "gpu"),
        }
        print(
            f"array float32 {expected.shape} = {nbytes} bytes, 64^3 chunks; "
            f"torch {torch.__version__}, CuPy {cupy.__version__}, zarr {zarr.__version__}; "
            f"median of {args.reps}, GB/s"
        )
        print("\n| variant | " + " | ".join(readers) + " |")
        print("|---|" + "---|" * len(readers))
        for variant, path in arrays.items():
            runs = {}
            for name, make in readers.items():
                try:
                    read = make(path)
                    got = read()
                    host = cupy.asnumpy(got) if isinstance(got, cupy.ndarray) else got.cpu().numpy()
                    if not np.array_equal(host, expected):
                        raise AssertionError(f"{name} on {variant}: result differs")
                    runs[name] = (read, [])
                except TypeError as e:
                    # A reader that cannot take this variant (e.g. no `decode` argument).
                    runs[name] = (None, str(e))
            for _ in range(args.reps):
                for name, (read, times) in runs.items():
                    if read is None:
                        continue
                    t = time.perf_counter()
                    read()
                    times.append(time.perf_counter() - t)
            cells = []
            base = None
            for name, (read, times) in runs.items():
                if read is None:
                    cells.append(f"n/a ({times})")
                    continue
                gbs = nbytes / statistics.median(times) / 1e9
                if base is None:
                    base = gbs
                cells.append(f"{gbs:.2f} ({gbs / base:.2f}x)")
            print(f"| {variant} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
