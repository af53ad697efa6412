"""Reading one million short strings: zarr-python against zarrbuf (issue 29's targets).

The array: ``--n`` (default 1,000,000) strings ``s<i>``, every fifth one multi-byte
(``é<i>東``), zarr v3 ``string`` (vlen-utf8) with zstd level 1, ``--chunk`` (default 65,536)
strings per chunk, written once by zarr-python into ``--dir``. Readers, each in a fresh
Python process (so that peak memory is its own), data in the page cache:

- ``zarr-python``: ``zarr.open_array(...)[:]`` (NumPy ``StringDType``),
- ``zarrbuf-pipeline``: the same with ``zarrbuf.ZarrbufCodecPipeline`` (strings packed
  straight into zarr-python's output),
- ``zarrbuf numpy``: ``numpy.asarray(zarrbuf.open(...).read())`` (NumPy ``StringDType``),
- ``zarrbuf arrow``: ``pyarrow.array(zarrbuf.open(...).read())`` — the result's
  ``__arrow_c_array__`` hands Arrow its offsets and values without a copy.

Each reader reads ``--reps`` times (median and min–max wall time; one untimed warm-up
first); every result is checked against the strings written. Peak memory is the growth of
the process's peak RSS (``VmHWM``, reset through ``/proc/self/clear_refs`` before the
first read) over its RSS before it; "result" is the Arrow size of the strings (8-byte
offsets + UTF-8 values), the measure of the target "peak ≤ 2 × result + staging budget".

    .venv/bin/python benches/strings.py [--n 1000000] [--chunk 65536] [--reps 3]
        [--dir target/bench-strings] [--readers zarr-python,zarrbuf-pipeline,zarrbuf-numpy,zarrbuf-arrow]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

READERS = ("zarr-python", "zarrbuf-pipeline", "zarrbuf-numpy", "zarrbuf-arrow")
LABELS = {
    "zarr-python": "zarr-python arr[:]",
    "zarrbuf-pipeline": "zarr-python arr[:], zarrbuf's pipeline",
    "zarrbuf-numpy": "zarrbuf read() -> numpy StringDType",
    "zarrbuf-arrow": "zarrbuf read() -> pyarrow.array",
}


def strings(n: int) -> list[str]:
    return [f"é{i}東" if i % 5 == 0 else f"s{i}" for i in range(n)]


def arrow_bytes(values: list[str]) -> int:
    return 8 * (len(values) + 1) + sum(len(s.encode()) for s in values)


def make_array(path: Path, n: int, chunk: int) -> None:
    """Writes the array once (a marker file holds its parameters)."""
    import numpy as np
    import zarr
    from zarr.codecs import ZstdCodec

    marker = path / "bench.json"
    want = {"n": n, "chunk": chunk, "version": 1}
    if marker.is_file() and json.loads(marker.read_text()) == want:
        return
    arr = zarr.create_array(store=str(path), shape=(n,), chunks=(chunk,), dtype=str,
                            compressors=ZstdCodec(level=1), zarr_format=3, overwrite=True)
    arr[:] = np.array(strings(n), dtype=np.dtypes.StringDType())
    marker.write_text(json.dumps(want))


def rss_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def child(reader: str, path: str, reps: int) -> dict:
    """Runs in a fresh process: imports, opens, reads `reps` + 1 times, checks the result."""
    import numpy as np

    if reader in ("zarr-python", "zarrbuf-pipeline"):
        import zarr

        if reader == "zarrbuf-pipeline":
            zarr.config.set({"codec_pipeline.path": "zarrbuf.ZarrbufCodecPipeline"})
        arr = zarr.open_array(path, mode="r")

        def read():
            return arr[:]
    else:
        import zarrbuf

        arr = zarrbuf.open(path)
        if reader == "zarrbuf-numpy":
            def read():
                return np.asarray(arr.read())
        else:
            import pyarrow as pa

            def read():
                return pa.array(arr.read())

    before = rss_kib("VmRSS")
    try:
        Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS
        reset = True
    except OSError:
        reset = False
    result = read()
    peak = rss_kib("VmHWM")
    n = len(result)
    got = result.to_pylist() if reader == "zarrbuf-arrow" else result.tolist()
    expected = strings(n)
    if got != expected:
        bad = next(i for i, (a, b) in enumerate(zip(got, expected)) if a != b)
        raise SystemExit(f"{reader}: element {bad} is {got[bad]!r}, expected {expected[bad]!r}")
    kind = type(result).__name__ + ("" if reader == "zarrbuf-arrow" else f" {result.dtype}")
    if reader == "zarrbuf-pipeline":
        from zarrbuf import pipeline

        if pipeline.STATS["fallback"] or not pipeline.STATS["zarrbuf"]:
            raise SystemExit(f"zarrbuf's pipeline fell back: {pipeline.STATS_REASONS}")
    del result, got, expected
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        r = read()
        times.append(time.perf_counter() - t)
        del r
    return {"times": times, "peak_kib": peak - before if reset else None, "n": n, "kind": kind}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--chunk", type=int, default=65_536)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--dir", type=Path,
                    default=Path(__file__).resolve().parent.parent / "target" / "bench-strings")
    ap.add_argument("--readers", default=",".join(READERS))
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    path = args.dir / f"strings_{args.n}_{args.chunk}.zarr"
    if args.child:
        print(json.dumps(child(args.child, str(path), args.reps)))
        return 0

    make_array(path, args.n, args.chunk)
    result_mib = arrow_bytes(strings(args.n)) / 2**20
    print(f"{args.n} strings, {args.chunk} per chunk, zstd 1; result {result_mib:.1f} MiB "
          f"(Arrow: offsets + values); {os.cpu_count()} CPUs, {platform.machine()}, "
          f"load {os.getloadavg()[0]:.2f}")
    rows = {}
    for reader in args.readers.split(","):
        if reader not in READERS:
            raise SystemExit(f"unknown reader {reader!r}; choose from {', '.join(READERS)}")
        out = subprocess.run([sys.executable, __file__, "--child", reader, "--n", str(args.n),
                              "--chunk", str(args.chunk), "--reps", str(args.reps),
                              "--dir", str(args.dir)], capture_output=True, text=True)
        if out.returncode != 0:
            msg = (out.stderr.strip().splitlines() or ["failed"])[-1]
            print(f"  {reader}: {msg}")
            continue
        rows[reader] = json.loads(out.stdout.strip().splitlines()[-1])
    base = statistics.median(rows["zarr-python"]["times"]) if "zarr-python" in rows else None
    print(f"\n| reader | result | median s | min–max s | vs zarr-python | peak MiB | "
          f"peak / result |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for reader, r in rows.items():
        med = statistics.median(r["times"])
        ratio = f"{base / med:.1f}×" if base else "–"
        peak = r["peak_kib"]
        peak_s = f"{peak / 1024:.0f}" if peak is not None else "n/a"
        peak_r = f"{peak / 1024 / result_mib:.2f}" if peak is not None else "n/a"
        print(f"| {LABELS[reader]} | {r['kind']} | {med:.3f} | {min(r['times']):.3f}–"
              f"{max(r['times']):.3f} | {ratio} | {peak_s} | {peak_r} |")
    print(f"\nload {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
