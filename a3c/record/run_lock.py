"""One training process per run directory: the process that trains a run holds an advisory lock on its directory
(``flock`` on the directory itself: no file is added to it) from before it writes a file there (a new run: once its
folder is made; a resume: before anything) until its training ends (a3c.run.trainer.Trainer.run).

A second process given the same directory (``--resume`` while the first still trains) is refused in one line before
it reads or writes a file of the run; otherwise both would write checkpoints/ at once and the second's episodes.csv
would drop the first's rows. The lock goes with the process that holds it, however it ends (kill -9 included), so a
run stopped any way can be resumed at once. Workers started by ``fork`` share the lock's open file: while an orphaned
worker lingers, the directory stays held. Where the platform or file system has no such locks (Windows, some network
file systems) nothing is held and nothing refused.
"""

from __future__ import annotations

import os
from pathlib import Path

from a3c.spec.errors import UserError

try:
    import fcntl
except ImportError:  # (Windows)
    fcntl = None  # type: ignore[assignment]


def still_training(path: Path | str, new: bool = False) -> UserError:
    """The one line for a directory another process holds (``new``: this process was to start a new run there)."""
    if new:
        return UserError(f"{path}: another process has just started a run in this directory; give another --run-dir")
    return UserError(
        f"{path}: the run is still training in another process; wait for it to end (or stop it with Ctrl-C), then "
        "resume it"
    )


class RunLock:
    """The lock of one run directory, held by this process (``hold``) until ``release`` or the process's end."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._fd: int | None = None

    def hold(self, new: bool = False) -> None:
        """Take the directory's lock; UserError (``still_training``) when another process holds it (``new``: for a new
        run, which says so)."""
        if fcntl is None or self._fd is not None:
            return
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except OSError:  # (gone, or not readable: the caller's own checks say what is wrong)
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise still_training(self.path, new) from None
        except OSError:  # a file system without flock on directories: run unguarded rather than not at all
            os.close(fd)
            return
        self._fd = fd

    def release(self) -> None:
        """Let the directory go (LOCK_UN first: a forked child's copy of the descriptor would otherwise keep it)."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)


def check_not_training(path: Path | str) -> None:
    """UserError when another process trains the run in ``path`` now (a probe: the lock is taken and let go)."""
    probe = RunLock(path)
    try:
        probe.hold()
    finally:
        probe.release()
