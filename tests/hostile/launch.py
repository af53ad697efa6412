"""Starts one command and reports its exit status and peak memory (run by runner.py).

    python -S launch.py RESULT_FILE UID|- PROGRAM ARG...

Forks, and in the child restores default signal dispositions, drops to UID when given and
execs PROGRAM; writes the child's pid to RESULT_FILE at once, then its wait status and
ru_maxrss (KiB) when it ends. A separate small process because Linux carries the peak
resident set of the process that forks across exec: measured from the suite's own Python
(numpy and all), every command would seem to peak at that interpreter's size.
"""

import os
import signal
import sys


def main() -> None:
    result, uid, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
    pid = os.fork()
    if pid == 0:
        for sig in (signal.SIGPIPE, signal.SIGINT, signal.SIGXFSZ):
            signal.signal(sig, signal.SIG_DFL)
        if uid != "-":
            os.setgid(int(uid))
            os.setuid(int(uid))
        try:
            os.execv(argv[0], argv)
        finally:
            os._exit(127)
    with open(result, "w") as f:
        f.write(f"{pid}\n")
    _, status, usage = os.wait4(pid, 0)
    with open(result, "a") as f:
        f.write(f"{status} {usage.ru_maxrss}\n")


if __name__ == "__main__":
    main()
