"""Compares a run of zarr-python's suite with the expected failures (scripts/zarr-python-suite.sh).

    python compare.py REPORT.json EXPECTED.txt MIN_TESTS_ON_ZARRBUF

REPORT.json is written by the zarrbuf_zarr_suite pytest plugin. EXPECTED.txt lists one test
per line, ``<node id, where * matches any characters>  # <one-line reason>`` (only ``*`` is
special: the brackets of parametrised ids are literal); blank lines and lines
starting with ``#`` are comments. Fails (exit 1) when

- a test failed that no line lists,
- a listed line matches no failed test (it passes now, or is gone: take it off the list),
- a listed line matches a test that passed (a pattern that is too wide),
- a line has no reason,
- fewer than MIN_TESTS_ON_ZARRBUF tests ran a batch through zarrbuf's Rust path (the
  pipeline was not really in use).
"""

from __future__ import annotations

import json
import re
import sys


def matcher(pattern: str):
    """A test-id pattern in which only ``*`` is a wildcard."""
    rx = re.compile(".*".join(re.escape(part) for part in pattern.split("*")) + r"\Z")
    return lambda test: rx.match(test) is not None


def parse_expected(path: str) -> list[tuple[str, str]]:
    entries = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            test, sep, reason = line.partition("  # ")
            if not sep or not reason.strip():
                sys.exit(f"{path}:{n}: no reason given (write '<test>  # <reason>'): {line}")
            entries.append((test.strip(), reason.strip()))
    return entries


def main() -> int:
    report_path, expected_path, min_tests = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with open(report_path) as f:
        report = json.load(f)
    outcomes: dict[str, str] = report["outcomes"]
    batches: dict[str, list[int]] = report["batches"]
    expected = parse_expected(expected_path)

    failed = {t for t, o in outcomes.items() if o == "failed"}
    passed = {t for t, o in outcomes.items() if o == "passed"}
    skipped = {t for t, o in outcomes.items() if o == "skipped"}
    problems: list[str] = []

    listed: set[str] = set()
    for pattern, reason in expected:
        match = matcher(pattern)
        hits = {t for t in failed if match(t)}
        wrong = sorted(t for t in passed if match(t))
        if not hits:
            problems.append(f"listed as failing but did not fail (take it off the list): {pattern}  # {reason}")
        for t in wrong:
            problems.append(f"listed as failing by '{pattern}' but passed: {t}")
        listed |= hits
    for t in sorted(failed - listed):
        problems.append(f"failed and is not in the expected failures: {t}")

    on_zarrbuf = sum(1 for z, _ in batches.values() if z > 0)
    fallback_only = sum(1 for z, fb in batches.values() if z == 0 and fb > 0)
    totals = report["totals"]
    print(
        f"zarr-python suite with ZarrbufCodecPipeline: {len(passed)} passed, {len(failed)} failed "
        f"({len(listed)} expected), {len(skipped)} skipped; {on_zarrbuf} tests ran batches "
        f"through zarrbuf ({totals['zarrbuf']} batches), {fallback_only} only through "
        f"zarr-python's fallback ({totals['fallback']} fallback batches in all)"
    )
    if on_zarrbuf < min_tests:
        problems.append(
            f"only {on_zarrbuf} tests read or wrote through zarrbuf's Rust path "
            f"(at least {min_tests} expected): is the pipeline configured?"
        )
    reasons: dict[str, int] = {}
    for t in skipped:
        r = report.get("skip_reasons", {}).get(t, "?")
        reasons[r] = reasons.get(r, 0) + 1
    for r, n in sorted(reasons.items(), key=lambda kv: -kv[1]):
        print(f"  skipped {n:5d}: {r}")
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
