"""Worker supervision, owned by the main process: the policy on top of a backend's Launcher. Start the workers,
notice a worker that died (exit code or signal) or hung (its heartbeat in the published stats older than
--worker-timeout), restart it with the same rank and the next incarnation (fresh envs and seeds, the current global
weights, its episode index going on from the coordinator's counter), and give up once a rank needs more than
--max-restarts restarts. Nothing here runs in the per-step path: it reads the stats rows the workers publish anyway.
"""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from a3c.record.rows import Stat
from a3c.run.backends import Launcher

STARTUP_GRACE_S = 60.0  # a running new process may take this long (imports, envs on a loaded machine) to its first beat
# a worker whose process is not up yet (a Ray actor not yet placed: the cluster short of CPUs for a while, or a new
# Ray worker process importing torch on a busy machine) has this long before it counts as failed to start
PLACEMENT_GRACE_S = 600.0


@dataclass
class Failure:
    """Why one worker process ended badly."""

    rank: int
    cause: str  # e.g. "exit code 1", "killed by signal SIGKILL", "hung: no heartbeat for 61.2 s"
    traceback: str | None = None  # the worker's own traceback, for an exception
    role: str = "worker"  # what the process is: "worker" (named by its rank) or e.g. "evaluator"

    def describe(self) -> str:
        last = self.traceback.strip().splitlines()[-1] if self.traceback else None
        who = f"worker {self.rank}" if self.role == "worker" else f"the {self.role}"
        return f"{who} {self.cause}" + (f" ({last})" if last else "")


def describe_exitcode(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    if code == 128 + signal.SIGTERM:  # (a3c.run.worker.run_as_process: its loop ended by a SIGTERM)
        return "was stopped by SIGTERM"
    return f"exited with code {code}"


@dataclass
class _Slot:
    started_at: float
    incarnation: int
    done: bool = False  # exited with code 0 (the run is over for it)


class Supervisor:
    """Starts ``workers`` workers through ``launcher`` (a3c.run.backends.Launcher) and watches them; ``stats`` returns
    the workers' stats rows [workers, STATS_WIDTH] (the coordinator's), read here for the heartbeats."""

    def __init__(
        self,
        launcher: Launcher,
        workers: int,
        stats: Callable[[], np.ndarray],
        worker_timeout: float,
        max_restarts: int,
        log: Callable[[str], None] | None = None,
        role: str = "worker",
    ) -> None:
        """``role``: what the supervised processes are, in messages ("worker", or "evaluator" for
        a3c.run.evaluator's)."""
        self.role = role
        self.launcher, self.workers, self.stats = launcher, workers, stats
        self.worker_timeout, self.max_restarts = worker_timeout, max_restarts
        self.restarts_by_rank = np.zeros(workers, dtype=np.int64)
        self.slots: list[_Slot | None] = [None] * workers
        self.failure: Failure | None = None  # set when a rank ran out of restarts
        self.log = log or (lambda line: print(line, file=sys.stderr))

    @property
    def restarts(self) -> int:
        return int(self.restarts_by_rank.sum())

    def incarnations(self) -> np.ndarray:
        """Incarnations used so far (this session) by each rank."""
        return np.array([(s.incarnation + 1) if s is not None else 0 for s in self.slots], dtype=np.int64)

    def pids(self) -> list[int]:
        return self.launcher.pids()

    # -- starting ----------------------------------------------------------------------------------------------
    def start_all(self) -> None:
        for rank in range(self.workers):
            self._start(rank, 0)

    def _start(self, rank: int, incarnation: int) -> None:
        self.slots[rank] = _Slot(time.time(), incarnation)
        self.launcher.start(rank, incarnation)

    # -- watching ----------------------------------------------------------------------------------------------
    def poll(self, stopping: bool) -> Failure | None:
        """Check every worker once. A dead or hung worker is restarted (unless ``stopping``: the run is ending) or,
        past its restart limit, returned as the run's fatal Failure. Cheap: call it every tick."""
        now = time.time()
        stats = self.stats()
        for rank, slot in enumerate(self.slots):
            if slot is None or slot.done:
                continue
            code = self.launcher.exitcode(rank)
            if code == 0:
                slot.done = True
                continue
            if code is not None:
                failure = Failure(rank, describe_exitcode(code), self.launcher.traceback(rank), self.role)
            else:
                beat = float(stats[rank, Stat.HEARTBEAT])
                running = self.launcher.running_since(rank)
                if beat >= slot.started_at:
                    silent, limit = now - beat, self.worker_timeout
                    cause = f"hung: no heartbeat for {silent:.1f} s (--worker-timeout {limit:g})"
                elif running is None:  # its process is not up yet: a slow start is not a hang
                    silent, limit = now - slot.started_at, PLACEMENT_GRACE_S
                    cause = f"did not start: its process was not up {silent:.0f} s after it was asked for"
                else:  # running, no heartbeat yet from this incarnation: building its envs and model
                    silent, limit = now - max(running, slot.started_at), max(self.worker_timeout, STARTUP_GRACE_S)
                    cause = f"hung: no heartbeat for {silent:.1f} s after its process started (limit {limit:g} s)"
                if silent <= limit:
                    continue
                self.launcher.kill(rank)
                failure = Failure(rank, cause, role=self.role)
            slot.done = True
            if stopping:
                self.log(f"a3c: {failure.describe()} while the run was stopping")
                continue
            if self.restarts_by_rank[rank] >= self.max_restarts:
                self.failure = failure
                return failure
            self.restarts_by_rank[rank] += 1
            self.log(
                f"a3c: {failure.describe()}; restarting it "
                f"(restart {self.restarts_by_rank[rank]} of {self.max_restarts} for this {self.role})"
            )
            self._start(rank, slot.incarnation + 1)
        return None

    def all_done(self) -> bool:
        return all(s is not None and s.done for s in self.slots)

    # -- stopping ----------------------------------------------------------------------------------------------
    def join(self, timeout: float) -> None:
        """After the coordinator was told to stop: let the workers finish, end the stragglers (the launcher)."""
        self.launcher.join(timeout)

    def kill_all(self) -> None:
        """Emergency stop (a second Ctrl-C). Safe to call from a signal handler."""
        self.launcher.kill_all()
