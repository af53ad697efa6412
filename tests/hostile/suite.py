"""zarrbuf's hostile-store suite: generates every case's store, runs each command with the
release binary under a memory cap and a timeout, and prints one table row per class.

    python tests/hostile/suite.py [--report] [--class CLS ...] [--case REGEX] [--list]

Strict (default): exits 1 when any case's outcome is not one it allows (silent wrong data,
deletion of intact data, a panic, a hang, memory over 256 MiB + 2 x the largest chunk the
command legitimately decodes, a check that misses what read refuses, a refusal of what must
read). --report prints the same and exits 0. docs/hostile-stores.md says more.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bombs import Cache  # noqa: E402
from case import CORRECT, ERROR, MiB  # noqa: E402
from ctx import Ctx  # noqa: E402
from runner import SEVERITY, Runner  # noqa: E402

CLASSES = ["bombs", "wrong_size", "huge_metadata", "shard_index", "special_files", "traversal", "data_loss", "two_writers", "output_errors", "zip_integrity", "strings"]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin", default=os.environ.get("ZARRBUF_BIN"), help="zarrbuf binary (default: $ZARRBUF_BIN, else target/release/zarrbuf)")
    p.add_argument("--work", default=None, help="where stores are written (default: target/hostile)")
    p.add_argument("--class", dest="classes", action="append", default=[], help="run only this class (repeatable; e.g. bombs, wrong-size)")
    p.add_argument("--case", default=None, help="run only cases whose name matches this regular expression")
    p.add_argument("--report", action="store_true", help="print the table and the failing cases, exit 0")
    p.add_argument("--list", action="store_true", help="list the cases and their expected outcomes, run nothing")
    p.add_argument("--bomb-mib", type=int, default=int(os.environ.get("HOSTILE_BOMB_MIB", "1024")), help="decoded size of every bomb (default 1024)")
    p.add_argument("--cap-mib", type=int, default=int(os.environ.get("HOSTILE_CAP_MIB", "1024")), help="kill a command whose resident set passes max(this, 2 x its bound) (default 1024)")
    p.add_argument("--json", dest="json_out", default=None, help="also write every result to this JSON file")
    p.add_argument("-v", "--verbose", action="store_true", help="one line per case as it runs")
    a = p.parse_args()

    repo = HERE.parent.parent
    binary = Path(a.bin or repo / "target" / "release" / "zarrbuf").resolve()
    if not a.list and not os.access(binary, os.X_OK):
        print(f"hostile suite: no zarrbuf binary at {binary} (cargo build --release, or set ZARRBUF_BIN)", file=sys.stderr)
        return 2
    work = Path(a.work or repo / "target" / "hostile").resolve()
    work.mkdir(parents=True, exist_ok=True)
    ctx = Ctx(work=work, cache=Cache(work / "cache"), bomb=a.bomb_mib * MiB, bin=binary)

    wanted = {c.replace("-", "_") for c in a.classes}
    unknown = wanted - set(CLASSES)
    if unknown:
        print(f"unknown class(es) {sorted(unknown)}; the classes: {', '.join(c.replace('_', '-') for c in CLASSES)}", file=sys.stderr)
        return 2
    t0 = time.monotonic()
    cases = []
    for mod in CLASSES:
        if wanted and mod not in wanted:
            continue
        cases += importlib.import_module(f"classes.{mod}").cases(ctx)
    if a.case:
        cases = [c for c in cases if re.search(a.case, c.name)]
    names = Counter(c.name for c in cases)
    dup = [n for n, k in names.items() if k > 1]
    assert not dup, f"duplicate case names {dup}"
    print(f"hostile suite: {len(cases)} cases generated under {work} in {time.monotonic() - t0:.1f} s; binary {binary}", flush=True)
    if a.list:
        for c in cases:
            print(f"{c.name}\texpect {'/'.join(sorted(c.expect))}\t{c.fixer}\tzarrbuf {' '.join(c.args)}")
        return 0

    runner = Runner(binary, work, a.cap_mib * MiB)
    results = []
    for c in cases:
        r = runner.run(c)
        results.append(r)
        if a.verbose:
            mark = "FAIL" if r.failed else "ok  "
            print(f"{mark} {r.outcome:12} {r.peak / MiB:8.1f} MiB {r.seconds:6.2f} s  {c.name}  {r.detail}", flush=True)
    disagreements(results)

    print_table(results)
    failing = [r for r in results if r.failed]
    print_failing(failing)
    print(f"hostile suite: {len(results)} cases in {time.monotonic() - t0:.0f} s; {len(failing)} failing")
    if a.json_out:
        Path(a.json_out).write_text(json.dumps([as_json(r) for r in results], indent=1))
    if failing and not a.report:
        return 1
    return 0


def disagreements(results) -> None:
    """Cases tagged to agree: where one reads correctly and another is a clean error, the
    correct ones become 'disagree' (check clean where read fails, or the reverse)."""
    groups = defaultdict(list)
    for r in results:
        if r.case.agree:
            groups[r.case.agree].append(r)
    for rs in groups.values():
        outcomes = {r.outcome for r in rs}
        if CORRECT in outcomes and (ERROR in outcomes or "refused" in outcomes):
            for r in rs:
                if r.outcome == CORRECT:
                    r.outcome = "disagree"
                    r.detail = "exit 0 while " + ", ".join(x.case.name.rsplit("/", 1)[1] for x in rs if x.outcome in (ERROR, "refused")) + " refused the same store"


def print_table(results) -> None:
    by = defaultdict(list)
    for r in results:
        by[r.case.cls].append(r)
    order = [o for o in SEVERITY if o not in (CORRECT, ERROR)]
    cols = [CORRECT, "clean error"] + order
    print()
    print("| class | cases | peak memory (max RSS) | " + " | ".join(cols) + " | failing |")
    print("|---|---:|---:|" + "---:|" * len(cols) + "---:|")
    total = Counter()
    for cls, rs in by.items():
        n = Counter(r.outcome for r in rs)
        total.update(n)
        peak = max(r.peak for r in rs)
        row = [str(n.get(CORRECT, 0)), str(n.get(ERROR, 0))] + [str(n.get(o, 0)) for o in order]
        print(f"| {cls} | {len(rs)} | {fmt_mib(peak)} | " + " | ".join(row) + f" | {sum(r.failed for r in rs)} |")
    row = [str(total.get(CORRECT, 0)), str(total.get(ERROR, 0))] + [str(total.get(o, 0)) for o in order]
    print(f"| all | {len(results)} | {fmt_mib(max((r.peak for r in results), default=0))} | " + " | ".join(row) + f" | {sum(r.failed for r in results)} |")
    print()


def fmt_mib(n: int) -> str:
    return f"{n / MiB:.0f} MiB" if n >= 10 * MiB else f"{n / MiB:.1f} MiB"


def print_failing(failing) -> None:
    if not failing:
        return
    print("failing cases (class / fixer: case: outcome, expected; detail):")
    by = defaultdict(list)
    for r in failing:
        by[(r.case.cls, r.case.fixer)].append(r)
    for (cls, fixer), rs in by.items():
        print(f"  {cls} / {fixer}:")
        for r in rs:
            print(f"    {r.case.name}: {r.outcome}, expected {'/'.join(sorted(r.case.expect))}; peak {fmt_mib(r.peak)}; {r.detail}")
    print()


def as_json(r) -> dict:
    return {
        "name": r.case.name,
        "class": r.case.cls,
        "fixer": r.case.fixer,
        "args": r.case.args,
        "expect": sorted(r.case.expect),
        "outcome": r.outcome,
        "failed": r.failed,
        "rc": r.rc,
        "seconds": round(r.seconds, 3),
        "peak_bytes": r.peak,
        "bound_bytes": r.case.bound(),
        "detail": r.detail,
    }


if __name__ == "__main__":
    sys.exit(main())
