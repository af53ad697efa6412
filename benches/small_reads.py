"""Small random reads: many 1×64×64 patches read one at a time, the fixed cost of one read.

The arrays are the whole-array benchmark's (``benches/python_read.py``): 256 MiB of float32
(256×512×512), 64³ chunks, zstd 1, plain and sharded (256³ shards of 64³ inner chunks),
written by zarr-python into ``--dir``. ``--patches`` random patches (a seeded generator:
every reader reads the same ones, in the same order) of one plane by 64×64, at any offset,
so one touches one to four chunks, are read one at a time by

- the Rust API: ``zarrbuf bench --subsets FILE`` (the release CLI, ``cargo build
  --release``), which reads the same patches through ``ArrayReadExt::read``,
- the Rust API over a ``file://`` URL: the same, through the async store and
  ``ArrayReadAsyncExt::read_opt_async`` (the route object stores take),
- ``zarrbuf.open(...).read(...)`` (``np.asarray`` of the result), and the same over the
  directory's ``file://`` URL (the async route),
- zarr-python through zarrbuf's pipeline and through zarrs-python's,
- tensorstore (``zarr3`` driver, the default context: no cache).

Every reader's first patches are checked against the data written; then the Python readers
take turns, round-robin, ``--rounds`` times (after one warm-up round), data in the page
cache. A round reads every patch once; its rate is patches ÷ the round's time. The table
shows the median round's reads/s, the median time of one read in µs, the CPU time one read
takes (the process's user and system time over the timed rounds, every thread counted; for
the Rust reader the child's, warm-up included), and the ratio of medians to tensorstore (for
zarrbuf.open and the Rust API) or to zarrs-python's pipeline (for zarrbuf's pipeline). On a
machine shared with other work, wall-clock rates follow how much of the CPU each reader's
threads get; CPU time per read does not.

    .venv/bin/python benches/small_reads.py [--patches 300] [--rounds 5] [--seed 0]
        [--dir target/bench-python] [--readers rust,zarrbuf-read,...] [--zarrbuf PATH]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import zarr

sys.path.insert(0, str(Path(__file__).resolve().parent))
import python_read  # noqa: E402  (the arrays, their data and the zarr-python readers' setup)

import zarrbuf  # noqa: E402

VARIANTS = {"zstd1": "plain", "zstd1-sharded": "sharded"}
READERS = ("rust", "rust-url", "zarrbuf-read", "zarrbuf-read-url", "zarrbuf-pipeline", "zarrs-python", "tensorstore")
#: The readers run by the Rust CLI (the rest run in this process).
CLI_READERS = ("rust", "rust-url")
TITLES = {
    "rust": "Rust `ArrayReadExt::read`",
    "rust-url": "Rust `ArrayReadAsyncExt::read_opt_async`, `file://`",
    "zarrbuf-read": "`zarrbuf.open(...).read(...)`",
    "zarrbuf-read-url": "`zarrbuf.open(\"file://...\").read(...)`",
    "zarrbuf-pipeline": "zarr-python + zarrbuf's pipeline",
    "zarrs-python": "zarr-python + zarrs-python's pipeline",
    "tensorstore": "tensorstore, no cache",
}
#: Which reader each one is compared with.
BASE = {
    "rust": "tensorstore",
    "rust-url": "tensorstore",
    "zarrbuf-read": "tensorstore",
    "zarrbuf-read-url": "tensorstore",
    "zarrbuf-pipeline": "zarrs-python",
}
PATCH = (1, 64, 64)


def patches(shape: tuple[int, ...], n: int, seed: int) -> list[tuple[int, int, int]]:
    rng = np.random.default_rng(seed)
    return [tuple(int(rng.integers(0, s - p + 1)) for s, p in zip(shape, PATCH)) for _ in range(n)]  # type: ignore[misc]


def window(origin: tuple[int, int, int]) -> tuple[slice, ...]:
    return tuple(slice(o, o + p) for o, p in zip(origin, PATCH))


def zarr_reader(path: Path, pipeline: str) -> Callable[[tuple[slice, ...]], np.ndarray]:
    cfg = {"codec_pipeline.path": pipeline}
    with zarr.config.set(cfg):
        z = zarr.open_array(zarr.storage.LocalStore(path, read_only=True), mode="r")
    impl = z._async_array.codec_pipeline
    got = type(impl).__name__
    if got != pipeline.rpartition(".")[2]:
        raise RuntimeError(f"asked for {pipeline}, zarr-python made a {got}")

    def read(sel: tuple[slice, ...]) -> np.ndarray:
        with zarr.config.set(cfg):
            return z[sel]

    def checked(sel: tuple[slice, ...]) -> np.ndarray:
        out = read(sel)
        stats = getattr(impl, "stats", None)
        if stats is not None and stats["fallback"]:
            raise RuntimeError(f"zarrbuf's pipeline sent batches to its fallback: {impl.reasons}")
        return out

    read.checked = checked  # type: ignore[attr-defined]
    return read


def make_reader(name: str, path: Path) -> Callable[[tuple[slice, ...]], np.ndarray]:
    if name in ("zarrbuf-pipeline", "zarrs-python"):
        return zarr_reader(path, python_read.PIPELINES[name])
    if name == "tensorstore":
        import tensorstore as ts

        t = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": str(path)}}, read=True).result()
        return lambda sel: t[sel].read().result()
    a = zarrbuf.open(path.as_uri() if name == "zarrbuf-read-url" else str(path))
    return lambda sel: np.asarray(a.read(sel))


def rust_rates(cli: Path, path: Path, origins: list, rounds: int, tmp: Path, url: bool = False) -> tuple[list[float], float, float]:
    """Reads/s of each round, the median µs of one read and the CPU µs per read (warm-up
    included), from ``zarrbuf bench --subsets``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    listing = tmp / f"{path.name}.subsets"
    listing.write_text("".join(",".join(f"{o}:{o + p}" for o, p in zip(org, PATCH)) + "\n" for org in origins))
    out = subprocess.run(
        [str(cli), "bench", path.as_uri() if url else str(path), "--subsets", str(listing), "--reps", str(rounds)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    # "...: 300 subsets ...: reads/s r1 r2 ...; median read N µs"
    rates = [float(x) for x in out.split("reads/s ")[1].split(";")[0].split()]
    micros = float(out.split("median read ")[1].split()[0])
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) / (len(origins) * (rounds + 1))
    return rates, micros, cpu * 1e6


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--patches", type=int, default=300)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--bytes", type=int, default=256 << 20)
    p.add_argument("--dir", default=str(Path(__file__).resolve().parent.parent / "target" / "bench-python"))
    p.add_argument("--readers", default=",".join(READERS))
    p.add_argument(
        "--zarrbuf",
        default=str(Path(__file__).resolve().parent.parent / "target" / "release" / "zarrbuf"),
        help="the release CLI for the Rust reader",
    )
    args = p.parse_args()
    readers = [r for r in args.readers.split(",") if r]
    for r in readers:
        if r not in READERS:
            p.error(f"unknown reader {r!r} (known: {', '.join(READERS)})")

    shape = python_read.shape_for(args.bytes)
    root = Path(args.dir)
    root.mkdir(parents=True, exist_ok=True)
    print(f"generating the data {shape} float32...", flush=True)
    values = python_read.data(shape)
    origins = patches(shape, args.patches, args.seed)
    sels = [window(o) for o in origins]

    rates: dict[tuple[str, str], list[float]] = {}
    micros: dict[tuple[str, str], float] = {}
    cpu: dict[tuple[str, str], float] = {}
    loads = []
    for v in VARIANTS:
        path = python_read.store_path(root, v, shape)
        if not (path / "zarr.json").exists():
            print(f"writing {path} with zarr-python...", flush=True)
            python_read.create(path, v, values)
        fns = {r: make_reader(r, path) for r in readers if r not in CLI_READERS}
        for r, f in fns.items():  # exactness, and the warm-up round
            check = getattr(f, "checked", f)
            for sel in sels[:20]:
                got = np.asarray(check(sel))
                if not np.array_equal(got.view(np.uint32), values[sel].view(np.uint32)):
                    raise SystemExit(f"{TITLES[r]} read {v} {sel} wrongly")
            for sel in sels:
                f(sel)
        print(f"{v}: every reader's patches equal the data written", flush=True)
        loads.append(os.getloadavg()[0])
        times: dict[str, list[float]] = {r: [] for r in fns}
        spent: dict[str, float] = {r: 0.0 for r in fns}
        for k in range(args.rounds):
            order = list(fns)[k % len(fns) :] + list(fns)[: k % len(fns)] if fns else []
            for r in order:
                f = fns[r]
                gc.collect()
                c0 = time.process_time()
                t0 = time.perf_counter()
                for sel in sels:
                    t = time.perf_counter()
                    f(sel)
                    times[r].append(time.perf_counter() - t)
                rates.setdefault((v, r), []).append(len(sels) / (time.perf_counter() - t0))
                spent[r] += time.process_time() - c0
        for r in fns:
            micros[(v, r)] = statistics.median(times[r]) * 1e6
            cpu[(v, r)] = spent[r] / len(times[r]) * 1e6
        del fns
        for r in CLI_READERS:
            if r in readers:
                rates[(v, r)], micros[(v, r)], cpu[(v, r)] = rust_rates(
                    Path(args.zarrbuf), path, origins, args.rounds, root, url=r == "rust-url"
                )
        loads.append(os.getloadavg()[0])

    print(
        f"\n{args.patches} random {'×'.join(map(str, PATCH))} float32 patches read one at a time from "
        f"{values.nbytes / 2**20:.0f} MiB {shape}, 64³ chunks, zstd 1 (sharded: 256³ shards); "
        f"median of {args.rounds} rounds, readers round-robin (the Rust readers after them); "
        f"{platform.node()}, {os.cpu_count()} CPUs; load average {min(loads):.1f}–{max(loads):.1f}\n"
    )
    print(
        "| reader | "
        + " | ".join(f"{VARIANTS[v]}: reads/s (median µs per read) | CPU µs per read | ratio" for v in VARIANTS)
        + " |"
    )
    print("|---|" + "---|---|---|" * len(VARIANTS))
    for r in readers:
        cells = []
        for v in VARIANTS:
            m = statistics.median(rates[(v, r)])
            base = BASE.get(r)
            ratio = ""
            if base in readers:
                ratio = f"{m / statistics.median(rates[(v, base)]):.2f}× {base}"
            cells.append(f"{m:.0f} ({micros[(v, r)]:.0f}) | {cpu[(v, r)]:.0f} | {ratio}")
        print(f"| {TITLES[r]} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        main()
