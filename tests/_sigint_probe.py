"""A process target for test_signals: exits 0 if the process began with SIGINT ignored, 3 otherwise."""

import signal
import sys


def report_sigint() -> None:
    sys.exit(0 if signal.getsignal(signal.SIGINT) is signal.SIG_IGN else 3)
