"""A process target for test_signals: exits 0 if the process began with SIGINT ignored, 3 otherwise."""

import multiprocessing
import os
import signal
import sys


def report_sigint() -> None:
    sys.exit(0 if signal.getsignal(signal.SIGINT) is signal.SIG_IGN else 3)


def report_sigint_of_worker(incarnation: int, errors: object) -> None:
    """report_sigint as a3c's ProcessLauncher calls a worker: with its incarnation and its traceback pipe."""
    report_sigint()


class CtrlCAtStart(multiprocessing.get_context("forkserver").Process):  # type: ignore[misc]
    """A fork-server process whose start() begins with a Ctrl-C to this process, as a user's may come."""

    def start(self) -> None:
        os.kill(os.getpid(), signal.SIGINT)
        super().start()
