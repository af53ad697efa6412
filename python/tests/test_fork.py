"""A forked child (a DataLoader worker) never waits on what its parent's threads were doing.

fork() copies memory but only the calling thread: reads the parent had in flight live on in
the child's copy with no thread to finish them. A child that drops such a read (garbage it
inherited, collected by its own gc) or reads the same array again must not wait for them.
The reads here go to the latency server (a per-request delay), so they are still in flight
when the parent forks."""

from __future__ import annotations

import gc
import os
import time

import numpy as np
import pytest
import zarr
import zarrbuf

from conftest import server_url


def _served_array(name: str) -> tuple[str, np.ndarray]:
    """An array of 64 chunks under the latency server's root, and its URL."""
    url = server_url("ZARRBUF_TEST_LATENCY_URL")
    root = os.environ["ZARRBUF_TEST_LATENCY_ROOT"]
    want = np.arange(64 * 32 * 32, dtype=np.int32).reshape(64, 32, 32)
    z = zarr.create_array(os.path.join(root, name), shape=want.shape, chunks=(1, 32, 32),
                          dtype=want.dtype, overwrite=True)
    z[:] = want
    return f"{url}/{name}", want


def _wait_child(pid: int, seconds: float) -> int | None:
    """The child's exit status, or None (after killing it) when it is still running."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.05)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    return None


def _in_child(work) -> int:
    """Forks; the child runs `work` and exits 0 when it returns True (1 when False, 2 on an
    error); the parent gets the child's exit code."""
    pid = os.fork()
    if pid == 0:
        code = 2
        try:
            code = 0 if work() else 1
        finally:
            os._exit(code)
    status = _wait_child(pid, 30)
    assert status is not None, "the forked child hung (killed after 30 s)"
    return status


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # fork() of a threaded process
def test_a_child_drops_its_parents_stream_with_reads_in_flight():
    location, want = _served_array("fork-stream.zarr")
    a = zarrbuf.open(location)
    stream = a.read_stream(((slice(i, i + 1), ...) for i in range(64)), prefetch=16)
    first = next(stream)
    assert np.array_equal(np.asarray(first), want[:1])

    def drop_and_read():
        nonlocal stream
        stream = None
        gc.collect()
        again = zarrbuf.open(location)
        return np.array_equal(np.asarray(again[5:9]), want[5:9])

    assert _in_child(drop_and_read) == 0
    # The parent's own stream goes on, untouched by the child.
    rest = [np.asarray(b) for b in stream]
    assert np.array_equal(np.concatenate([np.asarray(first)] + rest), want)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_a_child_reads_what_a_parent_thread_was_fetching():
    import threading

    location, want = _served_array("fork-flight.zarr")
    a = zarrbuf.open(location)
    started = threading.Event()

    def parent_reads():
        started.set()
        for _ in range(5):
            assert np.array_equal(np.asarray(a[:]), want)

    t = threading.Thread(target=parent_reads)
    t.start()
    started.wait()
    time.sleep(0.03)  # inside the first whole read's 20 ms requests

    def read_same_array():
        # Opened again, as a worker does (an open array object is not used across a fork:
        # its connections belong to the parent's runtime): the same chunk keys the parent's
        # threads were fetching, through the same process-wide tables.
        return np.array_equal(np.asarray(zarrbuf.open(location)[:]), want)

    try:
        assert _in_child(read_same_array) == 0
    finally:
        t.join()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_an_array_used_in_a_forked_child_says_to_open_it_again(tmp_path):
    z = zarr.create_array(tmp_path / "a.zarr", shape=(4,), chunks=(2,), dtype="i4")
    z[:] = np.arange(4, dtype="i4")
    a = zarrbuf.open(str(tmp_path / "a.zarr"))

    def use_inherited():
        try:
            a[:]
        except zarrbuf.ZarrbufError as e:
            return "open it again" in str(e)
        return False

    assert _in_child(use_inherited) == 0
    assert np.array_equal(np.asarray(a[:]), np.arange(4))  # the parent's is still its own
