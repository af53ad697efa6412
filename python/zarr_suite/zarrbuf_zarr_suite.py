"""pytest plugin: runs zarr-python's own test suite with zarrbuf's codec pipeline.

Loaded by scripts/zarr-python-suite.sh with ``-p zarrbuf_zarr_suite`` next to zarr-python's
own conftest (tests/conftest.py of its source distribution), which it leaves untouched.

- The pipeline is configured through the environment variable
  ``ZARR_CODEC_PIPELINE__PATH``: zarr-python's conftest calls ``zarr.config.reset()``
  around every test, and a reset re-reads the environment (so does every subprocess the
  tests start, e.g. ``test_multiprocessing``'s spawned workers).
- Before every test it checks that the configured pipeline is zarrbuf's; tests that pick a
  pipeline themselves (``config.set({"codec_pipeline.path": ...})``) do so inside the test.
- It records every test's outcome and, per test, how many batches went through zarrbuf's
  Rust path and how many fell back to zarr-python's pipeline, and writes both as JSON to
  ``$ZARRBUF_SUITE_REPORT`` for the script to compare with the expected failures.
"""

from __future__ import annotations

import json
import os

import pytest

PIPELINE = "zarrbuf.ZarrbufCodecPipeline"
os.environ["ZARR_CODEC_PIPELINE__PATH"] = PIPELINE

import zarr  # noqa: E402  (after the environment is set)

import zarrbuf.pipeline as zp  # noqa: E402

zarr.config.refresh()

_outcomes: dict[str, str] = {}
_batches: dict[str, tuple[int, int]] = {}
_skip_reasons: dict[str, str] = {}


@pytest.fixture(autouse=True)
def _zarrbuf_pipeline_in_use(request: pytest.FixtureRequest):
    path = zarr.config.get("codec_pipeline.path")
    if path != PIPELINE:
        pytest.fail(f"codec_pipeline.path is {path!r} at the start of the test, not {PIPELINE!r}")
    before = dict(zp.STATS)
    yield
    _batches[request.node.nodeid] = (
        zp.STATS["zarrbuf"] - before["zarrbuf"],
        zp.STATS["fallback"] - before["fallback"],
    )


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    nodeid = report.nodeid
    if report.failed:
        # A failure in setup, call or teardown fails the test (xpass under strict xfail too).
        _outcomes[nodeid] = "failed"
    elif report.when == "call" or (report.when == "setup" and report.skipped):
        _outcomes.setdefault(nodeid, "skipped" if report.skipped else "passed")
        if _outcomes[nodeid] != "failed":
            _outcomes[nodeid] = "skipped" if report.skipped else "passed"
        if report.skipped and hasattr(report, "wasxfail"):
            _skip_reasons[nodeid] = f"xfail (zarr-python's own mark): {report.wasxfail}"
        elif report.skipped and isinstance(report.longrepr, tuple):
            _skip_reasons[nodeid] = str(report.longrepr[2])


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    out = os.environ.get("ZARRBUF_SUITE_REPORT")
    if not out:
        return
    with open(out, "w") as f:
        json.dump(
            {
                "outcomes": _outcomes,
                "batches": {k: list(v) for k, v in _batches.items()},
                "totals": dict(zp.STATS),
                "skip_reasons": _skip_reasons,
            },
            f,
            indent=0,
        )
