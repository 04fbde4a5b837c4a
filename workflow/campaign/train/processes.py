"""A train.command's processes: every process the command starts is the job's to end. The command
runs in a session (and process group) of its own; while it runs, the job is the subreaper of what
it starts, so a child that leaves the group (setsid, a double fork) still comes back to the job
when its parent exits instead of to init. After the command exits, whatever of it still runs is
named and ended (SIGTERM, the grace, SIGKILL) before anything it wrote is checked or committed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys

# prctl(2): orphaned descendants are reparented to the nearest subreaper instead of to init.
PR_SET_CHILD_SUBREAPER = 36
# A leftover gets this long to exit on its own first (a worker mid-exit as its parent ends).
SETTLE_SECONDS = 1.0
# How much of a leftover's command line its log line shows.
SHOWN_CHARS = 80


def _prctl(option: int, value: int) -> None:
    import ctypes

    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(option, value)


@contextlib.contextmanager
def subreaper():
    """This process adopts its orphaned descendants while the block runs (Linux; elsewhere a
    no-op): a command's child that outlives it becomes the job's child, found and ended."""
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    try:
        yield
    finally:
        _prctl(PR_SET_CHILD_SUBREAPER, 0)


class Group:
    """The processes of one command: its leader (the command itself), its process group (the
    leader's pid: it starts a session of its own), the descendants seen while it ran, and the
    orphans adopted since it started (children of this process that were not there before)."""

    def __init__(self, leader: subprocess.Popen, before: set[int]):
        self.leader = leader
        self.before = before
        self.seen: dict[int, float] = {}  # pid -> create time (a reused pid is not the same)

    @staticmethod
    def own_children() -> set[int]:
        import psutil

        return {p.pid for p in psutil.Process().children()}

    def watch(self) -> None:
        """Note the leader's descendants now (a child that leaves the group is still one)."""
        import psutil

        with contextlib.suppress(psutil.Error):
            for p in psutil.Process(self.leader.pid).children(recursive=True):
                with contextlib.suppress(psutil.Error):
                    self.seen.setdefault(p.pid, p.create_time())

    def running(self) -> list:
        """The command's processes that still run, the leader aside (zombies do not run)."""
        import psutil

        found: dict[int, psutil.Process] = {}
        for pid in self._pids() - {self.leader.pid}:
            with contextlib.suppress(psutil.Error):  # gone since listed: nothing to end
                p = psutil.Process(pid)
                if pid in self.seen and p.create_time() != self.seen[pid]:
                    continue  # reused by another process: neither it nor its children
                for q in (p, *p.children(recursive=True)):
                    found.setdefault(q.pid, q)
        alive = []
        for pid, p in sorted(found.items()):
            with contextlib.suppress(psutil.Error):
                if pid in self.seen and p.create_time() != self.seen[pid]:
                    continue  # the pid was reused by a process that is not the command's
                if p.status() != psutil.STATUS_ZOMBIE:
                    alive.append(p)
                else:
                    _reap(pid)
        return alive

    def _pids(self) -> set[int]:
        import psutil

        pids = {pid for pid in self.seen if psutil.pid_exists(pid)}
        pids |= self.own_children() - self.before
        for pid in psutil.pids():
            with contextlib.suppress(OSError):
                if os.getpgid(pid) == self.leader.pid:
                    pids.add(pid)
        return pids

    def kill(self) -> None:
        """SIGKILL to the whole group and to every descendant seen or adopted."""
        with contextlib.suppress(OSError):
            os.killpg(self.leader.pid, signal.SIGKILL)
        for p in self.running():
            with contextlib.suppress(Exception):
                p.kill()

    def end(self, grace_seconds: float) -> list[str]:
        """End what still runs of the command once it has exited: a moment to exit on its own,
        then SIGTERM, `grace_seconds`, SIGKILL. Returns each one ended ("pid N (its command
        line)"), empty when none ran."""
        import psutil

        left = self.running()
        if left:
            psutil.wait_procs(left, timeout=SETTLE_SECONDS)
            left = self.running()
        named = [describe(p) for p in left]
        if not left:
            return []
        for sig, wait in ((signal.SIGTERM, grace_seconds), (signal.SIGKILL, 5.0)):
            for p in left:
                with contextlib.suppress(psutil.Error):
                    p.send_signal(sig)
            _, left = psutil.wait_procs(left, timeout=wait)
            if not left:
                break
        for p in self.running():  # what they started meanwhile
            with contextlib.suppress(psutil.Error):
                p.kill()
        return named


def _reap(pid: int) -> None:
    """Collect an adopted child's exit status (else it stays a zombie of this process)."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def describe(p) -> str:
    """`pid N (its command line)`, cut to SHOWN_CHARS."""
    try:
        line = " ".join(p.cmdline()) or p.name()
    except Exception:  # gone meanwhile, or not ours to read
        line = "?"
    if len(line) > SHOWN_CHARS:
        line = line[: SHOWN_CHARS - 3] + "..."
    return f"pid {p.pid} ({line})"


@contextlib.contextmanager
def signals_handled(signals, handler):
    """`handler` for `signals` inside the block, the previous handlers restored after it; a
    no-op off the main thread (signal handlers belong to it; a test's worker thread has none).
    The built-in loop notes a preemption with it, a train.command forwards signals to its
    child."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, handler) for s in signals}
    try:
        yield
    finally:
        for s, old in previous.items():
            signal.signal(s, old)
