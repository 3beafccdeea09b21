"""The schema of what a worker publishes and the main process records: the fields of a finished episode's row
(``FIELDS``, ``FIELD``; episodes.csv's columns after worker and index), the columns of a worker's stats row
(``Stat``), one episode as the main process reads it (``Episode``), and ``EpisodeSource``: what the dashboard reads
them through (the run layer's coordinators, a3c/run/backends, satisfy that protocol; the record layer knows no
backend); and ``finite_mean``, how a window of episode returns is averaged (the dashboard's 100-episode mean and the
resume's check of it).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum
from typing import Protocol

import numpy as np

from a3c.learn.terms import PPO_TERMS

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


def finite_mean(returns: Iterable[float]) -> float | None:
    """The mean of the finite ones of ``returns``; None when there are none. An episode whose return is NaN or
    infinite (a broken env's, kept as such in episodes.csv) stays out of it: one made the mean NaN or infinite for
    100 episodes (a false solve at +inf, NaN in summary.json), and +inf beside -inf crashed the sum. The sum is exact
    (math.fsum); where it leaves the floats (finite returns near 1e308: fsum raises OverflowError), each return is
    divided first. The mean is held between the smallest and the largest return."""
    finite = [float(r) for r in returns if math.isfinite(r)]
    if not finite:
        return None
    try:
        mean = math.fsum(finite) / len(finite)
    except OverflowError:  # halved as well, so that no partial sum leaves the floats (the clamp below takes an inf)
        mean = 2.0 * math.fsum(r / (2 * len(finite)) for r in finite)
    # the sum's rounding and the division's can leave the mean a float outside its returns (three 3.0e15s averaged
    # 3.0e15 - 0.5): held to them
    return min(max(mean, min(finite)), max(finite))


# What a worker's updates report, by name: every objective's learner returns a prefix-free subset of these, in its own
# order (a3c.learn.objectives: A3C the first four, PPO all). A new term is a name in its objective's TERMS; its stats
# column,
# TensorBoard tags (losses/<name>, workers/<rank>/<name>) and summary.json key follow from it.
UPDATE_TERMS: tuple[str, ...] = PPO_TERMS  # (a superset of A3C's: the loss's four, then PPO's diagnostics)


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
    LOSS = 9  # the last update's first four terms (TERM_COLUMN: all of them)
    POLICY_LOSS = 10
    VALUE_LOSS = 11
    ENTROPY = 12
    READY = 13  # 1 once the worker has built its envs and model and waits at the start line (a3c.run.worker)
    NONFINITE_SAMPLES = 14  # observations and returns left out of the --normalize-* statistics for being non-finite
    DROPPED_MINIBATCHES = 15  # minibatches not taken: their rollout's policy lag passed --max-policy-lag
    DROPPED_SAMPLES = 16  # samples left out of every minibatch for non-finite targets (PPO)


# The last update's terms: the first four where checkpoints before the other terms had them, the rest after Stat's
# columns; a stats row is STATS_WIDTH wide. (A checkpoint's narrower rows restore: only the counters are restored.)
TERM_COLUMN: dict[str, int] = {
    name: (Stat.LOSS + i if i < 4 else len(Stat) + i - 4) for i, name in enumerate(UPDATE_TERMS)
}
STATS_WIDTH = len(Stat) + len(UPDATE_TERMS) - 4


def update_summary(stats: np.ndarray, terms: tuple[str, ...]) -> dict[str, object]:
    """summary.json's view of the workers' stats rows [workers, STATS_WIDTH] for an objective reporting ``terms``:
    the minibatches dropped by --max-policy-lag, the samples left out for non-finite targets, and each term's last
    value averaged over the workers that updated (``update_terms``; None where none did or it is not finite)."""
    active = stats[:, Stat.UPDATES] > 0
    means = {term: float(np.mean(stats[active, TERM_COLUMN[term]])) if active.any() else math.nan for term in terms}
    return {
        "dropped_minibatches": int(stats[:, Stat.DROPPED_MINIBATCHES].sum()),
        "dropped_samples": int(stats[:, Stat.DROPPED_SAMPLES].sum()),
        "update_terms": {term: (round(v, 6) if math.isfinite(v) else None) for term, v in means.items()},
    }


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
