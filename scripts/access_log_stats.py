#!/usr/bin/env python3
"""Requests, bytes and the peak of requests in flight, from the latency server's access log.

    access_log_stats.py LOG [--since EPOCH_SECONDS] [--until EPOCH_SECONDS] [--prefix /PATH] [--json]

Each line of the log (scripts/latency-server.sh) is `$msec $request_time $connection
$body_bytes_sent "$http_range" $method $status $uri`: the time a request ended and how long
it took, so it was in flight from `msec - request_time` to `msec`. The peak is the largest
number of requests in flight at one moment (millisecond resolution, nginx's own).
"""

import argparse
import json
import sys


def parse(path, since=None, until=None, prefix=None):
    rows = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            parts = line.split()
            if len(parts) < 8:
                continue
            try:
                end, took, sent = float(parts[0]), float(parts[1]), int(parts[3])
            except ValueError:
                continue
            start = end - took
            if since is not None and start < since:
                continue
            if until is not None and end > until:
                continue
            if prefix is not None and not parts[7].startswith(prefix):
                continue
            rows.append({"start": start, "end": end, "bytes": sent, "method": parts[5],
                         "status": parts[6], "range": parts[4] != '"-"'})
    return rows


def stats(rows):
    events = []
    for r in rows:
        events.append((r["start"], 1))
        events.append((r["end"], -1))
    # Ends before starts at the same millisecond: back-to-back requests are not overlapping.
    events.sort(key=lambda e: (e[0], e[1]))
    peak = now = 0
    for _, step in events:
        now += step
        peak = max(peak, now)
    methods = {}
    for r in rows:
        methods[r["method"]] = methods.get(r["method"], 0) + 1
    return {
        "requests": len(rows),
        "bytes": sum(r["bytes"] for r in rows),
        "peak_in_flight": peak,
        "methods": methods,
        "errors": sum(1 for r in rows if not r["status"].startswith(("2", "3"))),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log")
    ap.add_argument("--since", type=float)
    ap.add_argument("--until", type=float)
    ap.add_argument("--prefix", help="only requests whose path starts with this, e.g. /data.zarr/")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    s = stats(parse(args.log, args.since, args.until, args.prefix))
    if args.json:
        json.dump(s, sys.stdout)
        print()
    else:
        print(f"requests={s['requests']} bytes={s['bytes']} peak_in_flight={s['peak_in_flight']} "
              f"errors={s['errors']} methods={s['methods']}")


if __name__ == "__main__":
    main()
