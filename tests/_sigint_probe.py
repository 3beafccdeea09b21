"""Process targets for test_signals: each exits 0 if the process began safe from a Ctrl-C to the group (SIGINT
ignored, or blocked until a3c's set-up ignores it), 3 otherwise."""

import multiprocessing
import os
import signal
import sys


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
        sys.exit(0 if ignored and not blocked else 3)

    run_as_process(body, None)


class _CtrlCAtStart:
    """A process whose start() begins with a Ctrl-C to this process, as a user's may come (mixed into each start
    method's Process class below: a spawned child unpickles its Process object, so each class is module-level)."""

    def start(self) -> None:
        os.kill(os.getpid(), signal.SIGINT)
        super().start()  # type: ignore[misc]


class CtrlCAtStart(_CtrlCAtStart, multiprocessing.get_context("forkserver").Process):  # type: ignore[misc,name-defined]
    pass


class CtrlCAtStartSpawn(_CtrlCAtStart, multiprocessing.get_context("spawn").Process):  # type: ignore[misc,name-defined]
    pass


class CtrlCAtStartFork(_CtrlCAtStart, multiprocessing.get_context("fork").Process):  # type: ignore[misc,name-defined]
    pass


CTRL_C_AT_START = {"forkserver": CtrlCAtStart, "spawn": CtrlCAtStartSpawn, "fork": CtrlCAtStartFork}


class _TermToGroupAtStart:
    """A process whose start() begins with SIGTERM to this process's whole group (timeout, Slurm's scancel, kill
    -TERM -PGID): the fork server and the resource tracker get it too. Run in a session of its own."""

    def start(self) -> None:
        os.killpg(0, signal.SIGTERM)
        super().start()  # type: ignore[misc]


class TermAtStart(_TermToGroupAtStart, multiprocessing.get_context("forkserver").Process):  # type: ignore[misc,name-defined]
    pass


class TermAtStartSpawn(_TermToGroupAtStart, multiprocessing.get_context("spawn").Process):  # type: ignore[misc,name-defined]
    pass


class TermAtStartFork(_TermToGroupAtStart, multiprocessing.get_context("fork").Process):  # type: ignore[misc,name-defined]
    pass


TERM_TO_GROUP_AT_START = {"forkserver": TermAtStart, "spawn": TermAtStartSpawn, "fork": TermAtStartFork}


def report_sigterm_after_setup(incarnation: int, errors: object) -> None:
    """A worker's target: after a3c's set-up, SIGTERM has a3c's handler (it sets the stop flag) and is not blocked."""
    from a3c.run.worker import run_as_process

    def body(terminate: object) -> None:
        handled = signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, signal.SIG_IGN, None)
        blocked = signal.SIGTERM in signal.pthread_sigmask(signal.SIG_BLOCK, [])
        sys.exit(0 if handled and not blocked else 4)

    run_as_process(body, None)


def _interrupted_inside_exec(argv: object) -> int:
    """A command whose Ctrl-C comes while code made by exec() of a string runs (as dataclasses' and namedtuple's
    generated methods run during imports)."""
    exec("import os, signal\nos.kill(os.getpid(), signal.SIGINT)\nfor _ in range(10**7): pass")
    return 0


if __name__ == "__main__":  # python -m _sigint_probe: that command under a3c's run_cli, as python -m a3c.train runs
    from a3c.spec.errors import run_cli

    sys.exit(run_cli(_interrupted_inside_exec, prog="probe"))
