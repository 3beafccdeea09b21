"""Where the global parameters live and how workers run: the three interfaces every backend implements.

- ``WorkerChannel``: all a worker sees. Pull the weights (with their version), push a gradient (the shared optimizer
  applies it; the policy lag comes back), read the control state (stop, logging interval, the global step), and
  publish what happened since the last publish (env steps, finished episodes, the worker's stats row) in one batch.
- ``Coordinator``: all the main process sees. Drain episodes and stats, the exact global step (what the dashboard
  reads: a3c.record.rows.EpisodeSource), stop and the logging interval, and a consistent snapshot/restore of
  everything a checkpoint holds.
- ``Launcher``: what starts and watches workers: start(rank, incarnation), exit codes and tracebacks, kill, the
  orderly join, and ``wait`` (let the workers run for a while: processes run by themselves; the serial backend runs
  their loops here). The supervision policy (restarts, hang detection from heartbeats) lives in a3c.run.supervisor on
  top of it.

Implementations: ``shared_memory`` (default: worker processes, shared tensors, Hogwild, no locks), ``serial`` (every
worker's loop in the main process, in turn: for pdb and cProfile, and the proof that nothing else reaches around these
interfaces) and ``ray`` (a3c/run/backends/ray/: worker actors on a Ray cluster around a parameter-server actor).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import torch

from a3c.learn.running_stats import MomentsStore
from a3c.record.rows import EpisodeSource


class WorkerChannel(Protocol):
    rank: int

    @property
    def obs_stats(self) -> MomentsStore | None:
        """--normalize-obs: the shared observation statistics (a3c.learn.running_stats), else None."""

    @property
    def reward_stats(self) -> MomentsStore | None:
        """--normalize-reward: the shared statistics of the discounted return, else None."""

    def pull(self, dest: torch.Tensor) -> int:
        """Copy the global parameters into ``dest``; return their version (the global update count then)."""

    def push(self, grad: torch.Tensor, pulled_at: int, lr: float) -> int:
        """Apply ``grad`` with the shared optimizer at learning rate ``lr`` (the worker's learning side chose both:
        a3c.learn.update.step); return the policy lag (updates since ``pulled_at``)."""

    def should_stop(self) -> bool:
        """True once the run is over (step budget reached, or the main process asked to stop)."""

    def interval(self) -> int:
        """The main process's current logging interval (for per-interval maxima)."""

    def global_step(self) -> int:
        """The global env step, as far as this worker can see it (published steps of every worker)."""

    def load_stats(self) -> np.ndarray:
        """A copy of this rank's stats row as the coordinator holds it (counters restored by a resume or left by
        this rank's previous incarnation), to go on from."""

    def publish(self, steps: int, episodes: Sequence[np.ndarray], stats: np.ndarray) -> None:
        """One batch: ``steps`` env steps taken since the last publish, the episodes finished since (rows in
        a3c.record.rows.FIELDS order) and the worker's current stats row (a3c.record.rows.Stat)."""

    def all_ready(self) -> bool:
        """True once every worker has published Stat.READY (the start line)."""


class Coordinator(EpisodeSource, Protocol):
    """The main process's view. What the dashboard reads of it (workers, drain, stats, global_step, lost) is
    a3c.record.rows.EpisodeSource; the rest is the trainer's and the supervisor's."""

    def episodes_read(self) -> np.ndarray:
        """Per worker, the number of its episodes drained so far (the next index)."""

    def should_stop(self) -> bool: ...

    def request_stop(self) -> None: ...

    def interval(self) -> int: ...

    def next_interval(self) -> None: ...

    def channel(self, rank: int) -> WorkerChannel:
        """The channel for worker ``rank`` (picklable where workers are processes)."""

    def snapshot(self) -> dict[str, Any]:
        """Everything a checkpoint needs from the backend, taken at one instant: model, optimizer, global_step,
        worker_steps (their sum is global_step), worker_stats, episodes_written; the per-rank vectors cover every
        rank the run has had, those this session does not run included (their episode counters go on)."""

    def restore(self, payload: dict[str, Any]) -> None:
        """Load a checkpoint's snapshot (possibly of another worker count) before the workers start."""

    def running_stats(self) -> dict[str, Any]:
        """The merged normalisation statistics (what evaluation and a3c.load apply, frozen), by checkpoint key
        (obs_stats, reward_stats; none without --normalize-obs/--normalize-reward)."""


class Launcher(Protocol):
    def start(self, rank: int, incarnation: int) -> None: ...

    def exitcode(self, rank: int) -> int | None:
        """None while rank's current worker runs; 0 when it finished; else its exit code (negative: signal)."""

    def running_since(self, rank: int) -> float | None:
        """When (time.time()) rank's current worker's process was known to run; None while it is not up yet (a Ray
        actor waiting to be placed, or its new process still importing). The supervisor's start-up grace counts from
        here, so a slow placement is not read as a hung worker."""

    def traceback(self, rank: int) -> str | None:
        """The exception text of rank's worker that exited with an error, if it sent one."""

    def kill(self, rank: int) -> None:
        """End rank's worker at once (a hung one)."""

    def kill_all(self) -> None:
        """Emergency stop; safe to call from a signal handler."""

    def join(self, timeout: float) -> None:
        """After a stop request: wait up to ``timeout`` for every worker to finish its update, then end the rest."""

    def wait(self, seconds: float) -> None:
        """Let the workers run for ``seconds`` (the main loop's tick)."""

    def pids(self) -> list[int]: ...


BACKENDS = ("shared_memory", "serial", "ray")
# a straggler SIGTERMed at a launcher's join has this long to finish the update in hand before it is killed (every
# launcher that SIGTERMs: ProcessLauncher, and RayLauncher for the actors on the server's node)
TERMINATE_GRACE_S = 2.0
