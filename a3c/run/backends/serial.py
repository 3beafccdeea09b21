"""The serial backend (``--backend serial``): every worker's loop runs in the main process, one iteration (pull, roll
out, update, publish) of each worker in turn, between the dashboard's ticks. Nothing runs in parallel, so a
breakpoint() in the worker, the loss or an env stops the whole run where it is, and ``python -m cProfile -m
a3c.train --backend serial`` profiles the worker loop itself.

It is built only on the backend interfaces (a3c/run/backends/__init__.py): the trainer, the supervisor, the dashboard
and checkpoints are the same code as for worker processes; only the launcher differs. The coordinator and the channels
are the shared-memory backend's (in one process, shared tensors are plain memory). A worker's exception is a crash
like a process's (traceback reported, the rank restarted under --max-restarts); a hang cannot be detected (the hung
call holds the only thread).
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from typing import Protocol


class SteppableWorker(Protocol):
    def step(self) -> None: ...

    def should_stop(self) -> bool: ...

    def close(self) -> None: ...


class SerialLauncher:
    """Runs ``make_worker(rank, incarnation)``'s iterations in this process (a3c.run.backends.Launcher)."""

    def __init__(self, make_worker: Callable[[int, int], SteppableWorker]) -> None:
        self.make_worker = make_worker
        self.workers: dict[int, SteppableWorker | None] = {}
        self.codes: dict[int, int | None] = {}
        self.tracebacks: dict[int, str | None] = {}
        self.started_at: dict[int, float] = {}

    def start(self, rank: int, incarnation: int) -> None:
        self.codes[rank], self.tracebacks[rank], self.workers[rank] = None, None, None
        self.started_at[rank] = time.time()
        try:
            self.workers[rank] = self.make_worker(rank, incarnation)
        except Exception:
            self._fail(rank)

    def _fail(self, rank: int) -> None:
        self.codes[rank], self.tracebacks[rank] = 1, traceback.format_exc()
        self._close(rank)

    def _close(self, rank: int) -> None:
        worker, self.workers[rank] = self.workers.get(rank), None
        if worker is not None:
            worker.close()

    def wait(self, seconds: float) -> None:
        """Step the running workers in turn, rank order, until ``seconds`` have passed or none is left running."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and self.step_round():
            pass

    def step_round(self) -> bool:
        """One iteration of every running worker, in rank order; False once none is left running."""
        running = [rank for rank, code in self.codes.items() if code is None]
        for rank in running:
            worker = self.workers[rank]
            assert worker is not None
            if worker.should_stop():
                self.codes[rank] = 0
                self._close(rank)
                continue
            try:
                worker.step()
            except Exception:
                self._fail(rank)
        return bool(running)

    def running_since(self, rank: int) -> float | None:
        return self.started_at.get(rank)

    def exitcode(self, rank: int) -> int | None:
        return self.codes[rank]

    def traceback(self, rank: int) -> str | None:
        return self.tracebacks[rank]

    def kill(self, rank: int) -> None:
        self.codes[rank] = -9
        self._close(rank)

    def kill_all(self) -> None:
        """Nothing to kill: the workers are this process."""

    def join(self, timeout: float) -> None:
        """Workers here are never mid-update when the main loop runs: finish them all."""
        for rank, code in self.codes.items():
            if code is None:
                self.codes[rank] = 0
                self._close(rank)

    def pids(self) -> list[int]:
        return []
