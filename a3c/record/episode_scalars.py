"""Which per-episode values go to TensorBoard, and when: TensorBoard volume bounded by time, not by the episode rate.

Short episodes end by the thousand per second; one TensorBoard point per episode per tag costs disk and load time
(135 MB of events per hour for CartPole with 16 workers) while TensorBoard keeps only a sample of each tag for its
charts. So, per group of tags (all workers: ``charts/episodic_return``, ``charts/episodic_length``; worker r:
``workers/<r>/episodic_return``, ``workers/<r>/episode_loss``):

- **samples**: an episode's values are written as points of their own when at least ``1 / points_per_s`` seconds
  (of the episodes' wall time) have passed since the group's last written point; a slow env, whose episodes are
  further apart, keeps every episode. ``points_per_s = 0`` writes every episode.
- **aggregates**, exact: every episode counts in the interval it was read in (an interval ends at each ``flush``,
  which the dashboard calls every ``1 / points_per_s`` seconds). All workers: the mean, min and max of the return
  and of the length, and the number of episodes (``charts/episodes``); each worker: the mean return and the mean
  loss. Each aggregate point sits at the largest global step of its interval's episodes.

The complete record, every episode, stays in episodes.csv.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

ALL = -1  # the group of the all-workers tags (written to the run's own event stream)


@dataclass
class Aggregate:
    """Count, sum, min and max of a stream of values (one interval's)."""

    count: int = 0
    total: float = 0.0
    lo: float = math.inf
    hi: float = -math.inf

    def add(self, value: float) -> None:
        self.count += 1
        self.total += value
        self.lo = min(self.lo, value)
        self.hi = max(self.hi, value)

    @property
    def mean(self) -> float:
        return self.total / self.count


@dataclass
class _Group:
    next_time: float = -math.inf  # the earliest episode wall time that may be written as a sample
    step: int = 0  # the largest global step of this interval's episodes
    values: dict[str, Aggregate] = field(default_factory=dict)

    def add(self, step: int, values: dict[str, float]) -> None:
        self.step = max(self.step, step)
        for key, value in values.items():
            self.values.setdefault(key, Aggregate()).add(value)


def sample_tags(group: int) -> tuple[str, str]:
    """The two per-episode tags of a group: the episode's return, and its length (all) or its loss (a worker)."""
    if group == ALL:
        return "charts/episodic_return", "charts/episodic_length"
    return f"workers/{group}/episodic_return", f"workers/{group}/episode_loss"


class EpisodeScalars:
    """Decides, episode by episode, which samples to write, and accumulates each interval's aggregates.

    ``add`` returns the sample points to write now, as ``(group, step, {tag: value})``; ``flush`` ends the interval
    and returns its aggregate points in the same form (only for groups that had episodes)."""

    def __init__(self, points_per_s: float) -> None:
        if not points_per_s >= 0:
            raise ValueError(f"points_per_s must be >= 0 (got {points_per_s})")
        self.period = 1.0 / points_per_s if points_per_s > 0 else 0.0
        self.groups: dict[int, _Group] = {}

    def add(
        self, worker: int, step: int, wall_time: float, ret: float, length: float, loss: float
    ) -> list[tuple[int, int, dict[str, float]]]:
        out = []
        for group, second in ((ALL, length), (worker, loss)):
            g = self.groups.get(group)
            if g is None:
                g = self.groups[group] = _Group()
            g.add(step, {"return": ret, "second": second})
            # points_per_s = 0 writes every episode, even one read after a later-ending episode of another worker
            # (its wall time below the group's last sample's): comparing wall times would drop it
            if self.period == 0.0 or wall_time >= g.next_time:
                g.next_time = wall_time + self.period
                tag_return, tag_second = sample_tags(group)
                out.append((group, step, {tag_return: ret, tag_second: second}))
        return out

    def flush(self) -> list[tuple[int, int, dict[str, float]]]:
        out = []
        for group, g in self.groups.items():
            if not g.values:
                continue
            ret, second = g.values["return"], g.values["second"]
            if group == ALL:
                scalars = {
                    "charts/episodic_return_mean": ret.mean,
                    "charts/episodic_return_min": ret.lo,
                    "charts/episodic_return_max": ret.hi,
                    "charts/episodic_length_mean": second.mean,
                    "charts/episodic_length_min": second.lo,
                    "charts/episodic_length_max": second.hi,
                    "charts/episodes": float(ret.count),
                }
            else:
                scalars = {
                    f"workers/{group}/episodic_return_mean": ret.mean,
                    f"workers/{group}/episode_loss_mean": second.mean,
                }
            out.append((group, g.step, scalars))
            g.values, g.step = {}, 0
        return out
