"""Process targets for test_signals: each exits 0 if the process began safe from a Ctrl-C to the group (SIGINT
ignored, or blocked until a3c's set-up ignores it), 3 otherwise (``report_sigterm_after_setup``: 4 where SIGTERM lacks
a3c's handler or stays blocked); and Process classes whose start() begins with a signal."""

import multiprocessing
import os
import signal
import sys
from collections.abc import Callable


def report_sigint() -> None:
    ignored = signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    blocked = signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, [])
    sys.exit(0 if ignored or blocked else 3)


def report_sigint_of_worker(incarnation: int, errors: object) -> None:
    """report_sigint as a3c's ProcessLauncher calls a worker: with its incarnation and its traceback pipe."""
    report_sigint()


def report_sigint_after_setup(incarnation: int, errors: object) -> None:
    """A worker's target: after a3c's set-up of every child process, SIGINT must be ignored and no longer blocked
    (a blocked SIGINT would pass to the env's own subprocesses)."""
    from a3c.run.worker import run_as_process

    def body(terminate: object) -> None:
        ignored = signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        blocked = signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, [])
        os._exit(0 if ignored and not blocked else 3)  # (the probe's own code: not run_as_process's for how it ended)

    run_as_process(body, None)


class _SignalAtStart:
    """A process whose start() begins with a signal sent by ``send`` (mixed into each start method's Process class
    below: a spawned child unpickles its Process object, so each class is module-level, by name)."""

    send: Callable[[], None]

    def start(self) -> None:
        type(self).send()
        super().start()  # type: ignore[misc]


def _signal_at_start(name: str, send: Callable[[], None]) -> dict[str, type]:
    """{start method: a Process class of that method whose start() begins with ``send()``}, each one a name of this
    module (NAME_forkserver, ...), where pickle finds it."""
    classes = {}
    for method in ("forkserver", "spawn", "fork"):
        base = multiprocessing.get_context(method).Process  # type: ignore[attr-defined]
        cls = type(f"{name}_{method}", (_SignalAtStart, base), {"send": staticmethod(send), "__module__": __name__})
        globals()[cls.__name__] = classes[method] = cls
    return classes


# a Ctrl-C to this process as start() begins, as a user's may come
CTRL_C_AT_START = _signal_at_start("CtrlCAtStart", lambda: os.kill(os.getpid(), signal.SIGINT))
# SIGTERM to this process's whole group (timeout, Slurm's scancel, kill -TERM -PGID): the fork server and the resource
# tracker get it too. Run in a session of its own.
TERM_TO_GROUP_AT_START = _signal_at_start("TermAtStart", lambda: os.killpg(0, signal.SIGTERM))


def report_sigterm_after_setup(incarnation: int, errors: object) -> None:
    """A worker's target: after a3c's set-up, SIGTERM has a3c's handler (it sets the stop flag) and is not blocked."""
    from a3c.run.worker import run_as_process

    def body(terminate: object) -> None:
        handled = signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, signal.SIG_IGN, None)
        blocked = signal.SIGTERM in signal.pthread_sigmask(signal.SIG_BLOCK, [])
        os._exit(0 if handled and not blocked else 4)  # (likewise: its SIGTERM would make run_as_process exit 143)

    run_as_process(body, None)


def _interrupted_inside_exec(argv: object) -> int:
    """A command whose Ctrl-C comes while code made by exec() of a string runs (as dataclasses' and namedtuple's
    generated methods run during imports)."""
    exec("import os, signal\nos.kill(os.getpid(), signal.SIGINT)\nfor _ in range(10**7): pass")
    return 0


if __name__ == "__main__":  # python -m _sigint_probe: that command under a3c's run_cli, as python -m a3c.train runs
    from a3c.spec.errors import run_cli

    sys.exit(run_cli(_interrupted_inside_exec, prog="probe"))
