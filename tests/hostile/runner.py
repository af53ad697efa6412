"""Runs a case's command(s) under a memory cap and a timeout and classifies the outcome.

Peak memory is each process's maximum resident set (wait4's ru_maxrss). The cap is a
watchdog that samples every process's resident set every few milliseconds and kills it when
it passes `cap`: an address-space limit (prlimit --as / RLIMIT_DATA) would change what is
measured, because it makes overcommitted mappings fail up front (an 8 TB mapping that is
then filled page by page becomes an early, harmless-looking allocation error) and counts
allocator reservations that are never touched.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from case import CORRECT, ERROR, Case, Result, lost, snapshot

PAGE = os.sysconf("SC_PAGE_SIZE")

#: Worst first: the outcome a case gets when several apply.
SEVERITY = ["deletion", "hang", "memory", "panic", "silent-wrong", "missed", "disagree", "refused", "other", ERROR, CORRECT]


LAUNCH = Path(__file__).resolve().parent / "launch.py"


class Launched:
    """One command started through launch.py: its pid once known, and at the end its wait
    status and peak resident set."""

    def __init__(self, launcher: subprocess.Popen, report: Path):
        self.launcher = launcher
        self.report = report
        self._pid = 0
        self.done = False
        self.status = 0
        self.maxrss = 0

    def pid(self) -> int:
        if not self._pid:
            try:
                first = self.report.read_text().split("\n", 1)[0]
                self._pid = int(first) if first else 0
            except (OSError, ValueError):
                pass
        return self._pid

    def finish(self) -> None:
        self.done = True
        lines = self.report.read_text().split() if self.report.exists() else []
        if len(lines) >= 3:
            self.status, self.maxrss = int(lines[1]), int(lines[2]) * 1024
        else:
            # The launcher died before its command ended (killed with it).
            self.status = self.launcher.returncode if self.launcher.returncode >= 0 else (-self.launcher.returncode) & 0x7F

    def kill(self) -> None:
        if not self.done:
            try:
                os.killpg(self.launcher.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * PAGE
    except (OSError, IndexError, ValueError):
        return 0


class Runner:
    def __init__(self, binary: Path, work: Path, cap_floor: int):
        self.binary = binary
        self.work = work
        self.cap_floor = cap_floor
        self.outdir = work / "out"
        self.outdir.mkdir(parents=True, exist_ok=True)

    def cap(self, case: Case) -> int:
        return max(self.cap_floor, 2 * case.bound())

    def argv(self, args: list[str], out: Path) -> list[str]:
        return [str(self.binary)] + [a.replace("{out}", str(out)) for a in args]

    def run(self, case: Case) -> Result:
        slug = case.name.replace("/", "__")
        out = self.outdir / f"{slug}.npy"
        out.unlink(missing_ok=True)
        if case.setup:
            case.setup()
        before = snapshot(case.protect)
        try:
            procs, files, helpers = self.start(case, slug, out)
            status, peak, killed, seconds = self.watch(case, procs)
        finally:
            if case.teardown:
                case.teardown()
        for h in helpers:
            h.wait()
        for f in files:
            f.close()
        after = snapshot(case.protect)
        stdout = _read(self.outdir / f"{slug}.stdout")
        stderr = _read(self.outdir / f"{slug}.stderr")
        for i in range(1, len(procs)):
            stderr += f"\n[writer {i + 1}] " + _read(self.outdir / f"{slug}.{i}.stderr")
        res = Result(case, "", None, seconds, peak, stdout, stderr)
        res.rc = _rc(status[0])
        res.outcome, res.detail = self.classify(case, res, status, killed, lost(before, after), out)
        return res

    def start(self, case: Case, slug: str, out: Path):
        """Starts every command of the case through launch.py, each in its own session (so a
        kill reaches the launcher and the command)."""
        files, helpers, procs = [], [], []
        commands = [case.args] + case.parallel
        for i, args in enumerate(commands):
            suffix = "" if i == 0 else f".{i}"
            err = open(self.outdir / f"{slug}{suffix}.stderr", "wb")
            files.append(err)
            if case.stderr == "devfull" and i == 0:
                err = open("/dev/full", "wb")
                files.append(err)
            head = None
            if i == 0 and case.stdout == "head1":
                head_out = open(self.outdir / f"{slug}.stdout", "wb")
                files.append(head_out)
                head = subprocess.Popen(["head", "-n", "1"], stdin=subprocess.PIPE, stdout=head_out)
                helpers.append(head)
                stdout = head.stdin
            elif i == 0 and case.stdout == "devfull":
                stdout = open("/dev/full", "wb")
                files.append(stdout)
            else:
                stdout = open(self.outdir / f"{slug}{suffix}.stdout", "wb")
                files.append(stdout)
            report = self.outdir / f"{slug}{suffix}.launch"
            report.unlink(missing_ok=True)
            uid = "-" if case.user is None else str(case.user)
            argv = [sys.executable, "-S", "-E", str(LAUNCH), str(report), uid] + self.argv(args, out if i == 0 else out.with_suffix(f".{i}.npy"))
            p = subprocess.Popen(argv, stdout=stdout, stderr=err, stdin=subprocess.DEVNULL, cwd=self.work, start_new_session=True)
            if head is not None:
                head.stdin.close()
            procs.append(Launched(p, report))
        return procs, files, helpers

    def watch(self, case: Case, procs):
        """Samples every command's resident set until all end; kills them all at the cap or
        the timeout. Returns (wait statuses, peak bytes, why killed, seconds)."""
        cap = self.cap(case)
        peak = 0
        killed = None
        t0 = time.monotonic()
        while not all(lp.done for lp in procs):
            for lp in procs:
                if lp.done:
                    continue
                if lp.launcher.poll() is not None:
                    lp.finish()
                    peak = max(peak, lp.maxrss)
                    continue
                now = rss(lp.pid()) if lp.pid() else 0
                peak = max(peak, now)
                if killed is None and now > cap:
                    killed = "memory"
                elif killed is None and time.monotonic() - t0 > case.timeout:
                    killed = "hang"
                if killed:
                    for q in procs:
                        q.kill()
            time.sleep(0.003)
        seconds = time.monotonic() - t0
        return {i: lp.status for i, lp in enumerate(procs)}, peak, killed, seconds

    def classify(self, case: Case, res: Result, status, killed, gone, out: Path):
        if gone:
            return "deletion", f"{len(gone)} intact paths removed or changed, e.g. {gone[0]}"
        if killed == "hang" and res.peak <= case.bound():
            return "hang", f"still running after {case.timeout:.0f} s"
        if killed == "hang":
            return "memory", f"peak {res.peak >> 20} MiB over the bound {case.bound() >> 20} MiB, and still running after {case.timeout:.0f} s"
        if killed == "memory":
            return "memory", f"resident set passed the {self.cap(case) >> 20} MiB cap"
        if res.peak > case.bound():
            return "memory", f"peak {res.peak >> 20} MiB over the bound {case.bound() >> 20} MiB"
        codes = [_rc(status[i]) for i in sorted(status)]
        err = res.stderr
        if "internal error" in err or 101 in codes:
            return "panic", _first(err, "internal error") or f"exit {codes}"
        for c in codes:
            if c is not None and c < 0 and not (case.stdout == "head1" and c == -signal.SIGPIPE):
                return "panic", f"killed by signal {-c}" + (": " + _first(err, "memory allocation") if "memory allocation" in err else "")
        if "memory allocation of" in err:
            return "memory", _first(err, "memory allocation")
        rc = codes[0]
        if case.parallel:
            return self.classify_writers(case, res, codes)
        if rc == 0 or (case.stdout == "head1" and rc == -signal.SIGPIPE):
            what = "missed" if case.kind == "check" else "silent-wrong"
            if CORRECT not in case.expect:
                return what, "exit 0 where an error belongs" + (f" ({_last(res.stdout)})" if res.stdout else "")
            wrong = self.wrong(case, res, out)
            return (what, wrong) if wrong else (CORRECT, "")
        if rc == 1 and any(line.startswith("error:") for line in err.splitlines()):
            line = _first(err, "error:")
            return (ERROR if ERROR in case.expect else "refused"), line
        return "other", f"exit {rc}: {_last(err)}"

    def classify_writers(self, case: Case, res: Result, codes):
        """Two writers: each exits 0 or with a clean error, and what they leave reads as
        one writer's data (case.verify)."""
        if any(c not in (0, 1) for c in codes):
            return "other", f"exits {codes}"
        ok = case.verify(res) if case.verify else True
        if not ok:
            return "silent-wrong", f"exits {codes}; the destination is not one writer's array"
        return CORRECT, f"exits {codes}"

    def wrong(self, case: Case, res: Result, out: Path) -> str:
        if case.data is not None:
            if not out.exists():
                return "no output file"
            got = np.load(out)
            exp = case.data
            if got.shape != exp.shape or got.dtype != exp.dtype:
                return f"got {got.dtype}{list(got.shape)}, expected {exp.dtype}{list(exp.shape)}"
            if not np.array_equal(got, exp, equal_nan=exp.dtype.kind in "fc"):
                return f"{int(np.sum(got != exp))} elements differ from the expected data"
        if case.verify and not case.verify(res):
            return "the result is not the expected one"
        return ""


def _rc(st: int) -> int:
    return os.waitstatus_to_exitcode(st)


def _read(p: Path) -> str:
    try:
        return p.read_bytes().decode("utf-8", "replace")
    except FileNotFoundError:
        return ""


def _first(text: str, needle: str) -> str:
    for line in text.splitlines():
        if needle in line:
            return line.strip()[:300]
    return ""


def _last(text: str) -> str:
    lines = [l for l in text.splitlines() if l.strip()]
    return lines[-1].strip()[:300] if lines else ""
