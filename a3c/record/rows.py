"""The schema of what a worker publishes and the main process records: the fields of a finished episode's row
(``FIELDS``, ``FIELD``; episodes.csv's columns after worker and index), the columns of a worker's stats row
(``Stat``), one episode as the main process reads it (``Episode``), and ``EpisodeSource``: what the dashboard reads
them through. The run layer's coordinators (a3c/run/backends) satisfy that protocol; the record layer knows no
backend.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Protocol

import numpy as np

FIELDS: tuple[str, ...] = (
    "return",
    "length",
    "loss",
    "policy_loss",
    "value_loss",
    "entropy",
    "global_step",
    "wall_time",
)
FIELD = {name: i for i, name in enumerate(FIELDS)}


class Stat(IntEnum):
    """Columns of the per-worker stats tensor. One writer each: the worker of that row."""

    UPDATES = 0  # optimizer steps this worker applied
    SKIPPED = 1  # updates skipped for a non-finite loss or gradient
    SKIPPED_IN_ROW = 2
    GRAD_NORM_SUM = 3  # sum over applied updates of the pre-clip gradient norm
    LAG_SUM = 4  # sum over applied updates of the policy lag (global updates between pull and apply)
    LAG_MAX = 5  # max policy lag within the logging interval LAG_MAX_INTERVAL
    LAG_MAX_INTERVAL = 6
    HEARTBEAT = 7  # time.time() of the last sign of life
    FIRST_STEP_TIME = 8  # time.time() of the first env step (0 before)
    LOSS = 9  # the last update's loss terms
    POLICY_LOSS = 10
    VALUE_LOSS = 11
    ENTROPY = 12
    READY = 13  # 1 once the worker has built its envs and model and waits at the start line (a3c.run.worker)
    NONFINITE_SAMPLES = 14  # observations and returns left out of the --normalize-* statistics for being non-finite


@dataclass
class Episode:
    """One board row as read by the main process."""

    worker: int
    index: int
    values: np.ndarray  # FIELDS order

    def __getitem__(self, name: str) -> float:
        return float(self.values[FIELD[name]])


class EpisodeSource(Protocol):
    """What the dashboard reads of a running job (a3c.run.backends.Coordinator is one): the episodes published since
    the last drain, the workers' stats rows, the exact global step, and the episodes lost before they were read."""

    workers: int

    def drain(self) -> list[Episode]:
        """Every episode published since the last drain, each exactly once, in index order per worker."""
        ...

    def stats(self) -> np.ndarray:
        """The workers' stats rows [workers, len(Stat)], as last published (read only)."""
        ...

    def global_step(self) -> int: ...

    @property
    def lost(self) -> int:
        """Episodes that were overwritten before they could be drained (counted, never silent)."""
        ...
