"""How this process makes a child (a worker, the evaluator, the fork server) so that a Ctrl-C or a SIGTERM to the
process group is neither lost here nor seen by the child before it is ready for it.

Ctrl-C reaches the whole process group, and only the main process decides what it means (a3c.run.shutdown): a
child must not die of it with a KeyboardInterrupt traceback while it is still importing. Ignoring SIGINT here while
the child is made (a child inherits SIG_IGN through fork and exec) did that, but threw away a Ctrl-C that came in
that window: the run then trained on to its end. Instead SIGINT is *blocked* in this thread while the child is made.
The signal mask, not the handler, is what fork and exec pass on, so the child begins with SIGINT blocked whatever
handler it inherits, and lifts the block only once it ignores SIGINT (``ignore_sigint``, the first thing a3c's
children do; a signal pending in it then is dropped, as an ignored one is). Here the handler never changes: a
Ctrl-C in the window waits in this thread's mask, or is taken by another thread, and the handler runs either way.

SIGTERM to the whole group (timeout, Slurm's scancel, kill -TERM -PGID) is blocked alike: it killed the fork server,
which sits in the group with the default action, and the next worker's start() then failed with EOFError (a
traceback, a run directory neither new nor resumable); and a spawned child still importing died of it. The fork server
keeps it blocked (it ends when this process does, by its pipe, as it always did); a3c's children lift the block once
their own handler is set (``take_sigterm``), so a SIGTERM that comes later stops them in order.
"""

from __future__ import annotations

import multiprocessing.resource_tracker
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def children_begin_with_stop_signals_blocked(start_method: str) -> Iterator[None]:
    """Block SIGINT and SIGTERM in this thread for the body (where children are made under ``start_method``); what
    arrived meanwhile is delivered when it ends. A no-op off the main thread (the only one that makes a run's
    children)."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "pthread_sigmask"):
        yield
        return
    if start_method != "fork":
        # A spawned child (or the fork server) gets the resource tracker's pipe, and the tracker, when it is started,
        # blocks SIGINT around its own start and then *unblocks* it: started inside the body, it would lift our
        # block before the child is made. Started now, it is only checked there.
        multiprocessing.resource_tracker.ensure_running()
    before = signal.pthread_sigmask(signal.SIG_BLOCK, [])  # (reads the mask)
    try:
        # inside the try: pthread_sigmask runs a pending Python handler after it sets the mask, and a handler that
        # raises (KeyboardInterrupt) would otherwise leave the signals blocked for good
        signal.pthread_sigmask(signal.SIG_BLOCK, set(STOP_SIGNALS))
        yield
    finally:
        unblock = {sig for sig in STOP_SIGNALS if sig not in before}
        if unblock:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, unblock)  # a pending Ctrl-C or SIGTERM runs the handler now


def ignore_sigint() -> None:
    """A child's first step: ignore SIGINT, then lift the block it began with
    (children_begin_with_stop_signals_blocked), so that what it starts in turn (an env's own subprocesses) does not
    inherit the block."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def take_sigterm(handler: Callable[[int, FrameType | None], Any]) -> None:
    """A child's SIGTERM handler, set, then the block it began with lifted: a SIGTERM from here on runs ``handler``."""
    signal.signal(signal.SIGTERM, handler)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
