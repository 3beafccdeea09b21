"""A run's episodes and what the benchmarks read off them, written once: the rolling mean of the last 100 returns (the
training mean every table compares), its curve against steps and wall time, downsampled for the store, the final and
best means and the first step at which the mean reached a threshold.

Every runner leaves its episodes in RUN_DIR/episodes.csv with at least the columns ``return``, ``global_step`` and
``wall_time`` (a3c's run directory: docs/reference/run-directory.md; SB3's runs: scripts/sb3_runner.py writes the same
columns), one row per finished episode, the returns raw (before any reward normalisation)."""

from __future__ import annotations

import csv
import statistics
from collections import deque
from pathlib import Path
from typing import NamedTuple

WINDOW = 100  # episodes in the training mean
CURVE_POINTS = 200  # points a stored curve keeps


class Episode(NamedTuple):
    step: int  # the global env step at which it ended
    wall_s: float  # the run's wall time then (seconds from its start, across resumed sessions)
    ret: float  # its return


class Point(NamedTuple):
    step: int
    wall_s: float
    mean: float  # the mean return of the last WINDOW episodes (of all, while there are fewer)


def read_episodes(run_dir: Path) -> list[Episode]:
    """RUN_DIR/episodes.csv in the order the episodes ended (by global step, then wall time); [] without the file."""
    path = Path(run_dir) / "episodes.csv"
    if not path.exists():
        return []
    with open(path, newline="") as f:
        rows = [
            Episode(int(float(r["global_step"])), float(r["wall_time"]), float(r["return"])) for r in csv.DictReader(f)
        ]
    return sorted(rows, key=lambda e: (e.step, e.wall_s))


def rolling_mean(episodes: list[Episode], window: int = WINDOW) -> list[Point]:
    """After each episode: its step and wall time, and the mean return of the last ``window`` episodes (of all of
    them while fewer have ended)."""
    recent: deque[float] = deque(maxlen=window)
    total, points = 0.0, []
    for e in episodes:
        if len(recent) == window:
            total -= recent[0]
        recent.append(e.ret)
        total += e.ret
        points.append(Point(e.step, e.wall_s, total / len(recent)))
    return points


def downsample(points: list[Point], n: int = CURVE_POINTS) -> list[Point]:
    """At most ``n`` of ``points``, evenly spaced by index, the first and the last always among them."""
    if len(points) <= n:
        return list(points)
    last = len(points) - 1
    picks = sorted({round(i * last / (n - 1)) for i in range(n)})
    return [points[i] for i in picks]


def final_mean(episodes: list[Episode], window: int = WINDOW) -> float | None:
    """The mean return of the last ``window`` episodes (all, if fewer); None without any."""
    tail = [e.ret for e in episodes[-window:]]
    return statistics.fmean(tail) if tail else None


def best_mean(episodes: list[Episode], window: int = WINDOW) -> float | None:
    """The best mean over ``window`` consecutive episodes; None under ``window`` episodes."""
    if len(episodes) < window:
        return None
    means = rolling_mean(episodes, window)[window - 1 :]
    return max(p.mean for p in means)


def first_reach(episodes: list[Episode], threshold: float, window: int = WINDOW) -> tuple[int, float] | None:
    """(step, wall seconds) of the episode after which the mean of the last ``window`` (a full window) first reached
    ``threshold``; None if it never did."""
    for i, p in enumerate(rolling_mean(episodes, window)):
        if i >= window - 1 and p.mean >= threshold:
            return p.step, p.wall_s
    return None
