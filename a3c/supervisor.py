"""Worker supervision, owned by the main process: start the worker processes, notice a worker that died (exit code
or signal) or hung (its heartbeat on the board older than --worker-timeout), restart it with the same rank (fresh
envs, the current global weights, its episode index going on from the board's shared counter), and give up once a
rank needs more than --max-restarts restarts. Also the orderly and the emergency shutdown of all workers.

Each worker process gets its own one-way pipe for its traceback (one writer per pipe, so a worker killed while
writing cannot leave a lock held for the others, as a shared queue could). Nothing here runs in the per-step path:
the supervisor only reads the board's stats rows, which the workers write anyway.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from a3c.board import Stat

STARTUP_GRACE_S = 60.0  # a new process may take this long (spawn imports on a loaded machine) to its first heartbeat


@dataclass
class Failure:
    """Why one worker process ended badly."""

    rank: int
    cause: str  # e.g. "exit code 1", "killed by signal SIGKILL", "hung: no heartbeat for 61.2 s"
    traceback: str | None = None  # the worker's own traceback, for an exception

    def describe(self) -> str:
        last = self.traceback.strip().splitlines()[-1] if self.traceback else None
        return f"worker {self.rank} {self.cause}" + (f" ({last})" if last else "")


def describe_exitcode(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


@dataclass
class _Slot:
    process: Any  # multiprocessing BaseProcess
    errors: Connection  # read end of this incarnation's traceback pipe
    started_at: float
    incarnation: int
    done: bool = False  # exited with code 0 (the run is over for it)


class Supervisor:
    """Starts and watches ``workers`` processes of ``target(rank, *args, incarnation, errors_pipe)``."""

    def __init__(
        self,
        ctx: Any,
        target: Callable[..., None],
        args: tuple[Any, ...],
        workers: int,
        stats: np.ndarray,
        worker_timeout: float,
        max_restarts: int,
        incarnations: np.ndarray | None = None,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self.ctx, self.target, self.args = ctx, target, args
        self.workers, self.stats = workers, stats  # stats: the board's [workers, len(Stat)] view (read only here)
        self.worker_timeout, self.max_restarts = worker_timeout, max_restarts
        # incarnations already used by each rank (in earlier sessions of a resumed run): seeds go on from there
        self.first_incarnation = (
            np.zeros(workers, dtype=np.int64) if incarnations is None else incarnations.astype(np.int64)
        )
        self.restarts_by_rank = np.zeros(workers, dtype=np.int64)
        self.slots: list[_Slot | None] = [None] * workers
        self.failure: Failure | None = None  # set when a rank ran out of restarts
        self.log = log or (lambda line: print(line, file=sys.stderr))

    @property
    def restarts(self) -> int:
        return int(self.restarts_by_rank.sum())

    def incarnations(self) -> np.ndarray:
        """Incarnations used so far by each rank (to be saved in checkpoints)."""
        used = [(s.incarnation + 1) if s is not None else 0 for s in self.slots]
        return np.maximum(np.array(used, dtype=np.int64), self.first_incarnation)

    def pids(self) -> list[int]:
        return [s.process.pid for s in self.slots if s is not None and s.process.pid is not None]

    # -- starting ----------------------------------------------------------------------------------------------
    def start_all(self) -> None:
        for rank in range(self.workers):
            self._start(rank, int(self.first_incarnation[rank]))

    def _start(self, rank: int, incarnation: int) -> None:
        read_end, write_end = self.ctx.Pipe(duplex=False)
        process = self.ctx.Process(
            target=self.target,
            args=(rank, *self.args, incarnation, write_end),
            name=f"a3c-worker-{rank}",
            daemon=True,
        )
        # Started with SIGINT ignored: a spawned child inherits SIG_IGN through exec, so a Ctrl-C that arrives while
        # it is still importing cannot kill it with a KeyboardInterrupt traceback (the worker ignores SIGINT anyway
        # once it runs; the main process decides what a Ctrl-C means).
        previous = _ignore_sigint()
        try:
            process.start()
        finally:
            _restore_sigint(previous)
        write_end.close()  # the child has its own copy; ours would keep the pipe open forever
        self.slots[rank] = _Slot(process, read_end, time.time(), incarnation)

    # -- watching ----------------------------------------------------------------------------------------------
    def poll(self, stopping: bool) -> Failure | None:
        """Check every worker once. A dead or hung worker is restarted (unless ``stopping``: the run is ending) or,
        past its restart limit, returned as the run's fatal Failure. Cheap: call it every tick."""
        now = time.time()
        for rank, slot in enumerate(self.slots):
            if slot is None or slot.done:
                continue
            code = slot.process.exitcode
            if code == 0:
                slot.done = True
                continue
            if code is not None:
                failure = Failure(rank, describe_exitcode(code), self._traceback(slot))
            else:
                beat = float(self.stats[rank, Stat.HEARTBEAT])
                if beat >= slot.started_at:
                    silent, limit = now - beat, self.worker_timeout
                else:  # no heartbeat yet from this incarnation: it is still starting up
                    silent, limit = now - slot.started_at, max(self.worker_timeout, STARTUP_GRACE_S)
                if silent <= limit:
                    continue
                slot.process.kill()  # hung, maybe in C code: only SIGKILL is sure to end it
                slot.process.join(timeout=5.0)
                failure = Failure(rank, f"hung: no heartbeat for {silent:.1f} s (--worker-timeout {limit:g})")
            slot.done = True
            slot.errors.close()
            if stopping:
                self.log(f"a3c: {failure.describe()} while the run was stopping")
                continue
            if self.restarts_by_rank[rank] >= self.max_restarts:
                self.failure = failure
                return failure
            self.restarts_by_rank[rank] += 1
            self.log(
                f"a3c: {failure.describe()}; restarting it "
                f"(restart {self.restarts_by_rank[rank]} of {self.max_restarts} for this worker)"
            )
            self._start(rank, slot.incarnation + 1)
        return None

    def _traceback(self, slot: _Slot) -> str | None:
        try:
            if slot.errors.poll(0.2):  # the worker sends before it exits; a short wait covers the pipe's latency
                return str(slot.errors.recv())
        except (EOFError, OSError):
            pass
        return None

    def all_done(self) -> bool:
        return all(s is not None and s.done for s in self.slots)

    # -- stopping ----------------------------------------------------------------------------------------------
    def join(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds in all for the workers to exit (after the store was told to stop), then
        terminate the stragglers (SIGTERM, then SIGKILL)."""
        deadline = time.monotonic() + timeout
        live = [s.process for s in self.slots if s is not None]
        for p in live:
            p.join(timeout=max(0.0, deadline - time.monotonic()))
        stragglers = [p for p in live if p.is_alive()]
        for p in stragglers:
            self.log(f"a3c: {p.name} did not stop within {timeout:g} s; terminating it")
            p.terminate()
        for p in stragglers:
            p.join(timeout=1.0)
            if p.is_alive():
                p.kill()
                p.join(timeout=1.0)
        for s in self.slots:
            if s is not None:
                s.errors.close()

    def kill_all(self) -> None:
        """Emergency stop (a second Ctrl-C): SIGKILL every worker at once. Safe to call from a signal handler."""
        for s in self.slots:
            if s is not None and s.process.pid is not None and s.process.exitcode is None:
                try:
                    os.kill(s.process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


def _ignore_sigint() -> Any:
    try:
        return signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread: leave signals alone
        return None


def _restore_sigint(previous: Any) -> None:
    if previous is not None:
        signal.signal(signal.SIGINT, previous)
