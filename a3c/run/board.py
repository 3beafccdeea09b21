"""The episode board: the tutorial's ``loss_history[pid, i]`` grown into the channel that carries every statistic
from the workers to the main process, as tensors in shared memory (the rows' schema, FIELDS and Stat, is
a3c/record/rows.py's: what a run records).

Layout (all in shared memory):
  rows    float64 [workers, capacity, fields]  a ring of finished episodes per worker (fields: FIELDS)
  written int64   [workers]                    episodes each worker has written, ever (its next index)
  steps   int64   [workers]                    env steps each worker has taken; the exact global step is the sum
  stats   float64 [workers, len(STATS)]        per-worker counters and gauges (updates, heartbeat, lag, ...)

Write protocol (no lock): a worker writes a row's fields first, then bumps its own ``written`` counter; the reader
reads a worker's counter first, then the rows below it. Each row and each counter has exactly one writer, so the
reader never sees a half-written row under the counter. A worker that gets more than ``capacity`` episodes ahead of
the reader overwrites rows the reader has not seen yet: the reader detects this from the counters, skips the
overwritten rows and counts them in ``lost`` (reported in the dashboard and summary), never silently.

The limit of this protocol: it needs the row's stores to become visible to the reader before the counter's store.
x86-64 guarantees that (stores are seen in program order: TSO), and numpy issues the row's and the counter's stores
as separate calls, in that order. Weakly ordered CPUs (ARM, POWER) do not: there a reader could see the new counter
before the row and read stale fields. a3c is tested on x86-64 only; on ARM the counts (steps, episodes) stay exact
but an episode's fields could, rarely, be read stale. Making it portable needs a memory barrier between the two
stores, which numpy and torch do not expose.
"""

from __future__ import annotations

import numpy as np
import torch

from a3c.record.rows import FIELDS, STATS_WIDTH, Episode

# Rows in each worker's ring: 1 MB a worker (8 float64 fields). What it buys is time: a worker whose episodes are
# a few steps long finishes ~4,000 a second, and the main process is not reading yet while it builds the dashboard
# after the launch (TensorBoard's writers, ~0.5 s), nor when the plot thread holds the GIL; 4,096 rows held ~1 s of
# that, and runs of 3-step episodes lost 1,000-2,000 of 25,000 episodes at their start.
CAPACITY = 16_384


class EpisodeBoard:
    """Shared tensors written by the workers (each its own rows) and read by the main process."""

    def __init__(self, workers: int, capacity: int = CAPACITY) -> None:
        self.workers, self.capacity = workers, capacity
        self.rows = torch.zeros(workers, capacity, len(FIELDS), dtype=torch.float64).share_memory_()
        self.written = torch.zeros(workers, dtype=torch.int64).share_memory_()
        self.steps = torch.zeros(workers, dtype=torch.int64).share_memory_()
        self.stats = torch.zeros(workers, STATS_WIDTH, dtype=torch.float64).share_memory_()
        self._steps_np: np.ndarray | None = None

    def __getstate__(self) -> dict[str, object]:
        return {**self.__dict__, "_steps_np": None}  # a numpy view is made in each process (_steps)

    def _steps(self) -> np.ndarray:
        """steps as a numpy view of the shared memory, made once per process: every worker iteration reads the
        global step two or three times and adds to it once, each a microsecond through torch and a third of that
        here."""
        if self._steps_np is None:
            self._steps_np = self.steps.numpy()
        return self._steps_np

    # -- worker side -------------------------------------------------------------------------------------------
    def write(self, rank: int, values: np.ndarray) -> int:
        """Append one episode (values in FIELDS order) to worker ``rank``'s ring; returns its episode index."""
        rows, written = self.rows.numpy(), self.written.numpy()
        index = int(written[rank])
        rows[rank, index % self.capacity, :] = values  # the row first ...
        written[rank] = index + 1  # ... then the counter that publishes it
        return index

    def add_steps(self, rank: int, n: int) -> None:
        self._steps()[rank] += n

    # -- either side -------------------------------------------------------------------------------------------
    def global_step(self) -> int:
        return int(self._steps().sum())

    def episodes(self) -> int:
        return int(self.written.sum())


class BoardReader:
    """Main-process cursor over the board: each call to ``drain`` returns the rows written since the last call,
    every row exactly once, in index order per worker."""

    def __init__(self, board: EpisodeBoard, start: np.ndarray | None = None) -> None:
        self.board = board
        self.read = np.zeros(board.workers, dtype=np.int64) if start is None else start.astype(np.int64).copy()
        self.lost = 0

    def drain(self) -> list[Episode]:
        rows, written, cap = self.board.rows.numpy(), self.board.written.numpy(), self.board.capacity
        out: list[Episode] = []
        for w in range(self.board.workers):
            end = int(written[w])  # the counter first ...
            start = int(self.read[w])
            if end - start > cap:  # the writer lapped us before we looked
                self.lost += end - start - cap
                start = end - cap
            if end == start:
                continue
            slots = np.arange(start, end) % cap
            chunk = rows[w, slots, :].copy()  # ... then the rows below it
            # Rows the writer may have overwritten while we copied them are dropped and counted. Once the counter
            # reads n, the writer may already be writing index n, into the slot of index n - cap: so every index
            # below n - cap + 1 is suspect.
            overwritten = max(0, int(written[w]) + 1 - cap - start)
            if overwritten:
                overwritten = min(overwritten, end - start)
                self.lost += overwritten
                chunk, start = chunk[overwritten:], start + overwritten
            out.extend(Episode(w, start + i, chunk[i]) for i in range(len(chunk)))
            self.read[w] = end
        return out
