"""How a run ends, the two helpers of the trainer's one shutdown path (a3c/run/trainer.py describes it): ``Signals``,
SIGINT and SIGTERM in the main process (the first asks for the orderly shutdown, a second kills the workers and
exits at once), and ``WriteFailures``, the run directory's failed writes met on the way out (the first ends the run;
the others are named in one line before its last)."""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

from a3c.record.checkpoint import resumable
from a3c.record.run_dir import RunDirectory, RunDirWriteError


class Signals:
    """SIGINT and SIGTERM in the main process. The first one only sets ``received`` (the main loop then shuts down
    in order: exit code 128 + signal number); a second one kills every worker and exits at once. Workers ignore
    SIGINT (a3c.run.worker), so a Ctrl-C to the whole process group reaches only this process's handler."""

    def __init__(self, emergency: Any) -> None:
        self.received: int | None = None
        self.emergency = emergency  # kills the children; called from the handler
        self.previous: dict[int, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self.previous[sig] = signal.signal(sig, self._handle)

    def _handle(self, signum: int, frame: Any) -> None:
        if self.received is None:
            self.received = signum
            name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
            os.write(2, f"\na3c: {name}: stopping after the current updates (Ctrl-C again to exit at once)\n".encode())
            return
        self.emergency()
        os.write(2, b"a3c: second signal: workers killed, exiting without the final checkpoint\n")
        os._exit(128 + signum)

    def restore(self) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)


class WriteFailures:
    """The run directory's write failures of one run: the first ends it (its line is the run's last); the others,
    met on the way out (the disk is still full), are named in one line before it."""

    def __init__(self) -> None:
        self.first: RunDirWriteError | None = None
        self.later: list[str] = []  # what was not written after the first failure, as the user knows it

    def add(self, err: RunDirWriteError, label: str | None = None) -> None:
        if self.first is None:
            self.first = err
        elif (label or err.what) not in self.later:
            self.later.append(label or err.what)

    def attempt(self, label: str | None, write: Callable[..., Any], *args: Any) -> Any:
        """``write(*args)``; a RunDirWriteError is recorded (under ``label``: what was being written; None: the file
        the error names) instead of raised. Returns what ``write`` returned, or None after a failure."""
        try:
            return write(*args)
        except RunDirWriteError as err:
            self.add(err, label)
            return None

    def reason(self) -> str | None:
        """summary.json's stop_reason for a run a failed write ended."""
        err = self.first
        return None if err is None else f"cannot write {err.what} ({err.error.strerror or err.error})"

    def report(self, run: RunDirectory) -> None:
        """The lines for stderr: what else could not be written, then the first failure with its fix, last."""
        if self.first is None:
            return
        if self.later:
            print(f"a3c: not written at the end either: {', '.join(self.later)}", file=sys.stderr)
        print(self.first.line(run.path, resumable=resumable(run.checkpoints)), file=sys.stderr)
