"""The Ray backend's safety net for its named shared memory: a small process that removes the parameter server's
files from /dev/shm once the driver has ended, however it ended.

``RayBackend.close`` removes them itself, but a driver killed by SIGKILL (or the OOM killer) runs nothing, and the
server cannot do it either: the processes of a local Ray instance share the driver's fate (Ray kills them when it
dies), and torch's own cleanup (torch_shm_manager, a child of the server) dies with the server. So the driver starts
this reaper first, in its own session (no Ctrl-C or group signal of the run reaches it, and it is no Ray process),
sends it the names (``ParameterServer.shared_memory_names``) down a pipe, and tells it when it has removed them
itself. The reaper waits on the driver's exit as an event (a pidfd, where Linux has one; else it polls its parent
pid, which changes when the driver dies and the reaper is re-parented), then unlinks every name it was given and
exits. A process still mapping the memory keeps its mapping; only the names go.

Run as a script by its path (``python .../shm_reaper.py DRIVER_PID``): it imports only the standard library, so it
starts in milliseconds and never imports torch or a3c.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
from collections.abc import Iterable, Sequence

POLL_S = 0.5  # without a pidfd: how often the reaper checks that its parent (the driver) is still there
DONE = b"\n"  # an empty line: the driver has removed the names itself, the reaper may go
EXIT_TIMEOUT_S = 5.0  # how long the driver's close waits for the reaper to exit before it kills it


class ShmReaper:
    """The driver's handle on its reaper process."""

    def __init__(self, process: subprocess.Popen) -> None:
        assert process.stdin is not None, "started with stdin=PIPE"
        self.process, self.stdin = process, process.stdin

    @classmethod
    def start(cls) -> ShmReaper:
        """Start the reaper for this process (the driver): in its own session, its stdin a pipe from here."""
        process = subprocess.Popen(
            # -I: isolated (no PYTHONPATH, no user site, not even this file's folder on sys.path): the standard library
            [sys.executable, "-I", os.path.abspath(__file__), str(os.getpid())],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
        )
        return cls(process)

    def add(self, names: Iterable[str]) -> None:
        """Names for the reaper to remove if the driver dies (one a line: a shared memory name holds no newline)."""
        data = b"".join(name.encode() + b"\n" for name in names if name)
        if data:
            self._send(data)

    def close(self) -> None:
        """The names are gone (the driver removed them): let the reaper exit, and wait for it (no zombie left)."""
        self._send(DONE)
        try:
            self.stdin.close()
        except OSError:
            pass
        try:
            self.process.wait(timeout=EXIT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def _send(self, data: bytes) -> None:
        try:
            self.stdin.write(data)
            self.stdin.flush()
        except (BrokenPipeError, ValueError):  # the reaper is gone (or closed): nothing to tell it
            pass


def unlink(names: Iterable[str]) -> None:
    """Remove named POSIX shared memory (shm_unlink); names already gone are skipped."""
    import _posixshmem  # multiprocessing.shared_memory's C module (POSIX only)

    for name in names:
        try:
            _posixshmem.shm_unlink(name)
        except FileNotFoundError:
            pass


def _driver_exit_fd(driver_pid: int) -> int | None:
    """A file descriptor that becomes readable when the driver exits (pidfd), or None where there is none. Opened
    while the driver is still this process's parent, so the pid cannot name another process by then."""
    try:
        fd = os.pidfd_open(driver_pid)
    except (AttributeError, OSError):  # not Linux >= 5.3 (or Python < 3.9): poll the parent pid instead
        return None
    if os.getppid() != driver_pid:  # the driver died before the pidfd was open: the pid may be anyone's now
        os.close(fd)
        return None
    return fd


def _collect(driver_pid: int, stdin: int = 0) -> tuple[set[str], bool]:
    """Read names from ``stdin`` until the driver exits, closes the pipe or says DONE: (the names, whether DONE
    came, i.e. the driver removed them itself). What the driver wrote before it died is still read: it may die
    before this process has even started."""
    names: set[str] = set()
    exited = _driver_exit_fd(driver_pid)
    watched = [stdin] if exited is None else [stdin, exited]
    pending = b""
    while True:
        gone = exited is None and os.getppid() != driver_pid  # re-parented: the driver has died
        timeout = 0.0 if gone else POLL_S if exited is None else None
        ready, _, _ = select.select(watched, [], [], timeout)
        if stdin in ready:  # first: everything already in the pipe, before acting on the driver's exit
            chunk = os.read(stdin, 65536)
            if not chunk:  # EOF: the driver closed the pipe or died
                return names, False
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                if not line:
                    return names, True
                names.add(line.decode())
        elif gone or exited in ready:
            return names, False


def main(argv: Sequence[str]) -> int:
    """The reaper's process: ``argv`` = [DRIVER_PID]."""
    # in its own session already; a signal meant for the run (a terminal's Ctrl-C, a hangup) must not end it before
    # it has done its one job
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    names, removed = _collect(int(argv[0]))
    if not removed:
        unlink(names)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
