"""Object stores at latency: zarrbuf against tensorstore and zarr-python over HTTP, with a
local nginx (scripts/latency-server.sh) answering every request after a delay, the way S3
does, and capping each connection's rate.

Profiles (``--profiles``): ``0`` (no delay, no cap), ``20:100m`` (20 ms to the first byte,
100 MiB/s per connection: same region), ``80:50m`` (80 ms, 50 MiB/s: cross region).
Arrays: float32 ``mib × 512 × 512`` (``--mib``, 256 by default), zstd level 1, written once
by zarr-python under ``--dir``: v3 64³ chunks, v3 32³ chunks, v3 256³ shards of 64³ inner
chunks, v2 64³ chunks.

Readers, interleaved round by round (``--rounds``), each opening the array once per round
(opening is not timed) and reading it whole; every result is compared with the source:

- ``zarrbuf.open``: ``zarrbuf.open(url).read(...)`` (Python);
- ``zarrbuf CLI``: ``zarrbuf read URL`` (the throughput it prints, open excluded), a new
  process per read: its allocator, output and connections start cold, where every other
  reader runs in this long-lived Python process;
- ``zarrbuf bench``: the CLI in a warm process, as the others: ``zarrbuf bench URL --reps 1``
  (one read to warm up, then the timed read; nginx's log counts both, so its requests and
  bytes are halved);
- ``zarr+zarrbuf``: zarr-python over obstore's ``HTTPStore`` with zarrbuf's codec pipeline;
- ``zarr (c=10)`` / ``zarr (c=128)``: zarr-python's own pipeline, ``async.concurrency`` 10
  (its default) and 128;
- ``tensorstore`` / ``tensorstore (128)``: tensorstore's ``http`` kvstore at its default
  ``http_request_concurrency`` (32) and at 128.

Then ``--patches`` random 1×64×64 patches (seeded; 100 by default), one read at a time, of
the 64³ and the sharded arrays (reads/s; the readers at their default concurrency, which a
read of one patch does not use), and a copy of the 64³ array from disk into the server (GB/s):
``zarrbuf copy`` against zarr-python reading it and writing through obstore's ``HTTPStore``
(tensorstore's ``http`` kvstore is read-only). The server's access log gives each reader's requests, bytes and peak
of requests in flight. Prints a markdown table (and ``--json`` writes every figure).

    .venv/bin/python benches/remote.py [--mib 256] [--rounds 3] [--profiles 0,20:100m,80:50m]
        [--patches 100] [--readers zarrbuf.open,tensorstore,...] [--json FILE]

Needs the Python package built into .venv (scripts/python-tests.sh does it), the release CLI
(``cargo build --release``), nginx with the lua module, and tensorstore, obstore and
zarr-python in .venv (fixtures/requirements.txt).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import zarr
from zarr.codecs import ZstdCodec

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import access_log_stats  # noqa: E402

import zarrbuf  # noqa: E402

CLI = ROOT / "target" / "release" / "zarrbuf"
ARRAYS = {
    "v3 64³": ("v3_64.zarr", dict(chunks=(64, 64, 64))),
    "v3 32³": ("v3_32.zarr", dict(chunks=(32, 32, 32))),
    "v3 sharded 256³/64³": ("v3_sharded.zarr", dict(chunks=(64, 64, 64), shards=(256, 256, 256))),
    "v2 64³": ("v2_64.zarr", dict(chunks=(64, 64, 64), zarr_format=2)),
}
READERS = ["zarrbuf.open", "zarrbuf CLI", "zarrbuf bench", "zarr+zarrbuf", "zarr (c=10)", "zarr (c=128)",
           "tensorstore", "tensorstore (128)"]


def source(mib: int) -> np.ndarray:
    rng = np.random.default_rng(0)
    # Smooth data with noise: zstd 1 compresses it to about 0.9 of its size, like real floats.
    base = np.cumsum(rng.standard_normal((mib, 512, 512), dtype=np.float32), axis=2)
    return np.round(base, 2).astype(np.float32)


def write_arrays(dir_: Path, data: np.ndarray) -> None:
    stamp = dir_ / f"written-{data.shape[0]}"
    if stamp.exists():
        return
    for name, kw in ARRAYS.values():
        path = dir_ / name
        shutil.rmtree(path, ignore_errors=True)
        kw = dict(kw)
        if kw.get("zarr_format") == 2:
            from numcodecs import Zstd
            a = zarr.create_array(str(path), shape=data.shape, dtype="f4", compressors=Zstd(level=1), **kw)
        else:
            a = zarr.create_array(str(path), shape=data.shape, dtype="f4", compressors=ZstdCodec(level=1), **kw)
        a[...] = data
    stamp.touch()


class Server:
    def __init__(self, root: Path, profile: str) -> None:
        delay, _, rate = profile.partition(":")
        args = ["bash", str(ROOT / "scripts" / "latency-server.sh"), "--root", str(root),
                "--delay-ms", delay or "0", "--rate", rate or "0", "--name", f"bench-{profile.replace(':', '-')}"]
        out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
        env = dict(re.findall(r"export (\w+)=(\S+)", out))
        self.url, self.pid, self.log = env["ZARRBUF_LATENCY_URL"], int(env["ZARRBUF_LATENCY_PID"]), env["ZARRBUF_LATENCY_LOG"]

    def mark(self) -> float:
        return time.time()

    def traffic(self, since: float, prefix: str) -> dict:
        time.sleep(0.1)  # nginx logs a request after answering it
        rows = access_log_stats.parse(self.log, since=since - 0.001, prefix=f"/{prefix}")
        return access_log_stats.stats(rows)

    def stop(self) -> None:
        try:
            os.kill(self.pid, 15)
        except ProcessLookupError:
            pass


# Each opener returns read(selection) -> numpy array, or for the CLI a function that
# returns (array, seconds it reports).

def open_zarrbuf(url: str):
    a = zarrbuf.open(url)
    return lambda sel: np.asarray(a.read(sel))


def open_zarr(url: str, pipeline: str | None, concurrency: int):
    from obstore.store import HTTPStore
    from zarr.storage import ObjectStore

    cfg = {"async.concurrency": concurrency}
    if pipeline:
        cfg["codec_pipeline.path"] = pipeline
    setter = zarr.config.set(cfg)
    z = zarr.open_array(store=ObjectStore(HTTPStore.from_url(url, client_options={"allow_http": True}), read_only=True), mode="r")
    read = lambda sel: z[sel]  # noqa: E731
    read.close = lambda: setter.__exit__(None, None, None)
    return read


def open_tensorstore(url: str, concurrency: int | None, v2: bool):
    import tensorstore as ts

    ctx = {} if concurrency is None else {"http_request_concurrency": {"limit": concurrency}}
    spec = {"driver": "zarr" if v2 else "zarr3", "kvstore": {"driver": "http", "base_url": url},
            "recheck_cached_data": False}
    t = ts.open(spec, read=True, context=ts.Context(ctx)).result()
    return lambda sel: t[sel].read().result()


def opener(name: str, url: str, v2: bool):
    if name == "zarrbuf.open":
        return open_zarrbuf(url)
    if name == "zarr+zarrbuf":
        return open_zarr(url, "zarrbuf.ZarrbufCodecPipeline", 10)
    if name == "zarr (c=10)":
        return open_zarr(url, None, 10)
    if name == "zarr (c=128)":
        return open_zarr(url, None, 128)
    if name == "tensorstore":
        return open_tensorstore(url, None, v2)
    if name == "tensorstore (128)":
        return open_tensorstore(url, 128, v2)
    raise ValueError(name)


def run_cli(args: list[str], data: np.ndarray) -> str:
    """Runs the CLI with ``args`` and returns what it printed, after checking the CRC-32 it
    printed of what it read against ``data``'s."""
    out = subprocess.run([str(CLI), *args], check=True, capture_output=True, text=True)
    text = out.stdout + out.stderr
    crc = re.search(r"crc32 ([0-9a-f]+)", text)
    import zlib
    want = format(zlib.crc32(np.ascontiguousarray(data).tobytes()) & 0xFFFFFFFF, "08x")
    if not crc or crc.group(1) != want:
        raise AssertionError(f"zarrbuf {args[0]} read a different array ({crc and crc.group(1)} != {want})")
    return text


def read_cli(url: str, data: np.ndarray) -> float:
    """``zarrbuf read URL``: seconds of the read, as it printed them."""
    m = re.search(r"in ([0-9.]+) s\)", run_cli(["read", url], data))
    return float(m.group(1))


def read_cli_warm(url: str, data: np.ndarray) -> float:
    """``zarrbuf bench URL --reps 1``: seconds of the timed read, from the rate it printed."""
    m = re.search(r"median ([0-9.]+) GB/s", run_cli(["bench", url, "--reps", "1"], data))
    if not m:
        raise AssertionError("zarrbuf bench printed no median")
    return data.nbytes / (float(m.group(1)) * 1e9)


def whole(server: Server, readers: list[str], arrays: list[str], data: np.ndarray, results: dict, profile: str) -> None:
    full = tuple(slice(0, n) for n in data.shape)
    for label in arrays:
        name, kw = ARRAYS[label]
        url = f"{server.url}/{name}"
        for reader in readers:
            since = server.mark()
            try:
                if reader == "zarrbuf CLI":
                    seconds = read_cli(url, data)
                elif reader == "zarrbuf bench":
                    seconds = read_cli_warm(url, data)
                else:
                    read = opener(reader, url, kw.get("zarr_format") == 2)
                    since = server.mark()
                    start = time.perf_counter()
                    got = read(full)
                    seconds = time.perf_counter() - start
                    if hasattr(read, "close"):
                        read.close()
                    if not np.array_equal(np.asarray(got), data):
                        raise AssertionError(f"{reader} read {label} wrong")
                    del got
            except Exception as e:  # a reader that cannot read an array is reported, not fatal
                results.setdefault((profile, "whole", label, reader), []).append({"error": str(e)[:200]})
                continue
            t = server.traffic(since, name)
            if reader == "zarrbuf bench":  # the warm-up read and the timed one
                t = {**t, "requests": t["requests"] / 2, "bytes": t["bytes"] / 2}
            results.setdefault((profile, "whole", label, reader), []).append(
                {"gbps": data.nbytes / seconds / 1e9, **t})


def patches(server: Server, readers: list[str], data: np.ndarray, n: int, results: dict, profile: str) -> None:
    rng = np.random.default_rng(1)
    origins = [(int(rng.integers(0, data.shape[0])), int(rng.integers(0, data.shape[1] - 64)),
                int(rng.integers(0, data.shape[2] - 64))) for _ in range(n)]
    sels = [(slice(a, a + 1), slice(b, b + 64), slice(c, c + 64)) for a, b, c in origins]
    for label in ("v3 64³", "v3 sharded 256³/64³"):
        name, _ = ARRAYS[label]
        url = f"{server.url}/{name}"
        for reader in readers:
            # One request per patch whatever the concurrency: the peers at their defaults.
            if reader in ("zarrbuf CLI", "zarrbuf bench", "zarr (c=128)", "tensorstore (128)"):
                continue
            read = opener(reader, url, False)
            since = server.mark()
            start = time.perf_counter()
            for sel in sels:
                got = np.asarray(read(sel))
            seconds = time.perf_counter() - start
            if hasattr(read, "close"):
                read.close()
            if not np.array_equal(got, data[sels[-1]]):
                raise AssertionError(f"{reader} read a patch of {label} wrong")
            t = server.traffic(since, name)
            results.setdefault((profile, "patches", label, reader), []).append(
                {"reads_per_s": n / seconds, **t})


def copies(server: Server, root: Path, data: np.ndarray, results: dict, profile: str) -> None:
    src = root / ARRAYS["v3 64³"][0]
    for writer in ("zarrbuf copy", "zarr (c=128)"):
        dst = f"copy-{writer.split()[0]}.zarr"
        shutil.rmtree(root / dst, ignore_errors=True)
        since = server.mark()
        start = time.perf_counter()
        if writer == "zarrbuf copy":
            subprocess.run([str(CLI), "copy", str(src), f"{server.url}/{dst}"], check=True, capture_output=True)
        else:
            from obstore.store import HTTPStore
            from zarr.storage import ObjectStore
            with zarr.config.set({"async.concurrency": 128}):
                # A copy: the source is read from disk too, as `zarrbuf copy` reads it.
                values = zarr.open_array(str(src), mode="r")[...]
                z = zarr.create_array(store=ObjectStore(HTTPStore.from_url(f"{server.url}/{dst}", client_options={"allow_http": True})),
                                      shape=data.shape, dtype="f4", chunks=(64, 64, 64),
                                      compressors=ZstdCodec(level=1))
                z[...] = values
        seconds = time.perf_counter() - start
        back = zarr.open_array(str(root / dst), mode="r")[...]
        if not np.array_equal(back, data):
            raise AssertionError(f"{writer} wrote a different array")
        t = server.traffic(since, dst)
        results.setdefault((profile, "copy", "v3 64³", writer), []).append(
            {"gbps": data.nbytes / seconds / 1e9, **t})


def median(rows: list[dict], key: str) -> float | None:
    vals = [r[key] for r in rows if key in r]
    return statistics.median(vals) if vals else None


def is_zarrbuf(reader: str) -> bool:
    """zarrbuf's own readers: its Python API, its CLI, its copy and zarr-python with its pipeline."""
    return "zarrbuf" in reader


def report(results: dict) -> str:
    lines = []
    for kind, unit, key in (("whole", "GB/s", "gbps"), ("patches", "reads/s", "reads_per_s"), ("copy", "GB/s", "gbps")):
        rows = {k: v for k, v in results.items() if k[1] == kind}
        if not rows:
            continue
        lines.append(f"\n{kind} ({unit}, median of rounds; requests, MB and peak in flight from nginx's log)\n")
        lines.append("| profile | array | reader | " + unit + " | ÷ best peer | requests | MB | peak in flight |")
        lines.append("|---|---|---|---|---|---|---|---|")
        groups: dict = {}
        for (profile, _, label, reader), v in rows.items():
            groups.setdefault((profile, label), {})[reader] = v
        for (profile, label), readers in groups.items():
            peers = [median(v, key) for r, v in readers.items() if not is_zarrbuf(r) and median(v, key)]
            best = max(peers) if peers else None
            for reader, v in readers.items():
                m = median(v, key)
                if m is None:
                    err = next((r["error"] for r in v if "error" in r), "?")
                    lines.append(f"| {profile} | {label} | {reader} | error: {err[:60]} | | | | |")
                    continue
                ratio = f"{m / best:.2f}×" if best and is_zarrbuf(reader) else ""
                lines.append(
                    f"| {profile} | {label} | {reader} | {m:.3f} | {ratio} | {median(v, 'requests'):.0f} | "
                    f"{median(v, 'bytes') / 1e6:.0f} | {median(v, 'peak_in_flight'):.0f} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default=str(ROOT / "target" / "bench-remote"))
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--profiles", default="0,20:100m,80:50m")
    ap.add_argument("--patches", type=int, default=100)
    ap.add_argument("--readers", default=",".join(READERS))
    ap.add_argument("--arrays", default=",".join(ARRAYS))
    ap.add_argument("--no-copy", action="store_true")
    ap.add_argument("--json")
    ap.add_argument("--report", metavar="JSON", help="print the tables of an earlier run's --json file and stop")
    args = ap.parse_args()
    if args.report:
        saved = json.loads(Path(args.report).read_text())
        print(report({tuple(k.split(" | ")): v for k, v in saved.items()}))
        return
    root = Path(args.dir)
    root.mkdir(parents=True, exist_ok=True)
    data = source(args.mib)
    write_arrays(root, data)
    readers = [r for r in args.readers.split(",") if r]
    arrays = [a for a in args.arrays.split(",") if a]
    results: dict = {}
    started = time.strftime("%Y-%m-%d %H:%M")
    for profile in args.profiles.split(","):
        server = Server(root, profile)
        try:
            for round_ in range(args.rounds):
                print(f"profile {profile}, round {round_ + 1}/{args.rounds}", file=sys.stderr, flush=True)
                whole(server, readers, arrays, data, results, profile)
                if args.patches:
                    patches(server, readers, data, args.patches, results, profile)
                if not args.no_copy:
                    copies(server, root, data, results, profile)
        finally:
            server.stop()
    print(f"benches/remote.py, {started}, {args.mib} MiB float32 zstd 1, {args.rounds} rounds, "
          f"io concurrency default {zarrbuf.open(str(root / ARRAYS['v3 64³'][0])).io_concurrency}")
    print(report(results))
    if args.json:
        Path(args.json).write_text(json.dumps({" | ".join(k): v for k, v in results.items()}, indent=1))


if __name__ == "__main__":
    main()
