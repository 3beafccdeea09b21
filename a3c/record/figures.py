"""Matplotlib figures of a run: the tutorial's loss-history figure (each worker's curve on the left, all workers'
losses in the run's order, the global step's, on the right) and the run-comparison figures of ``python -m a3c.plot``
(a metric against the global step and against wall time, one line per run).

Figures are built on ``matplotlib.figure.Figure`` directly, never through pyplot's global state, so the dashboard
can render them in a background thread while the main thread keeps ticking. Long histories are thinned to at most
``max_points`` points per line before drawing: a figure of a million episodes costs what one of a few thousand does.

During a run the dashboard keeps the loss history in bounded form (``LossHistory``: per worker, and for all workers in
the run's order, at most ``capacity`` bucket means, the buckets doubling in size as the run grows), so the main
process's memory does not grow with the episode count; episodes.csv keeps every episode (``python -m a3c.plot`` draws
from it).

Memory: a rendered Figure sits in reference cycles (figure <-> canvas <-> artists) that hold megabytes of C++ memory
(the Agg buffer, paths) but few Python objects, so Python's cyclic GC, which is triggered by object counts, frees
them late: redrawn every 30 s, RSS grew by several MB per redraw (issue 15). ``figure_png`` therefore clears the
figure and drops its renderer right after rendering it, then runs the collector, which frees every figure rendered
before (the one just rendered is still referenced by its caller): at most one, emptied, figure is ever alive.

matplotlib is imported where a figure is first drawn, not with this module: the trainer imports it at start-up
(for the bounded loss history) and draws at the end, and importing matplotlib.figure takes about half a second of a
core that the workers starting beside it need.
"""

from __future__ import annotations

import gc
import io
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from a3c.record.files import atomic_write

if TYPE_CHECKING:
    from matplotlib.figure import Figure

MAX_POINTS = 4000  # per line; more points than pixels only cost time
HISTORY_CAPACITY = 1024  # bucket means kept per line during a run (a panel is ~400 px wide)


class DownsampledSeries:
    """A series of values, one per episode, kept as at most ``capacity`` points: the means of consecutive buckets
    of ``stride`` episodes. When the buffer fills up, neighbouring buckets are merged pairwise and the stride
    doubles, so memory is O(capacity) however long the run, and every episode counts in exactly one bucket."""

    def __init__(self, capacity: int = HISTORY_CAPACITY) -> None:
        if capacity < 2 or capacity % 2:
            raise ValueError("capacity must be an even number >= 2")
        self.capacity = capacity
        self.means = np.zeros(capacity)
        self.full = 0  # complete buckets in ``means``
        self.stride = 1  # episodes per bucket
        self.count = 0  # episodes seen
        self._sum, self._n = 0.0, 0  # the bucket being filled

    def append(self, value: float) -> None:
        self.count += 1
        self._sum += value
        self._n += 1
        if self._n < self.stride:
            return
        self.means[self.full] = self._sum / self._n
        self.full += 1
        self._sum, self._n = 0.0, 0
        if self.full == self.capacity:  # merge pairs: half the points, each twice as wide
            half = self.capacity // 2
            self.means[:half] = (self.means[0::2] + self.means[1::2]) / 2
            self.full, self.stride = half, self.stride * 2

    def points(self) -> tuple[np.ndarray, np.ndarray]:
        """(episode index at each bucket's centre, bucket mean), the partly filled last bucket included."""
        x = np.arange(self.full) * self.stride + (self.stride - 1) / 2
        y = self.means[: self.full].copy()
        if self._n:
            start = self.full * self.stride
            x = np.append(x, start + (self._n - 1) / 2)
            y = np.append(y, self._sum / self._n)
        return x, y

    def nbytes(self) -> int:
        return self.means.nbytes


class LossHistory:
    """The tutorial's loss history, bounded: each worker's per-episode loss in its own episode order, and all
    workers' losses in the order they were added (the dashboard adds them in the run's order, the global step's)."""

    def __init__(self, workers: int, capacity: int = HISTORY_CAPACITY) -> None:
        self.capacity = capacity
        self.workers: dict[int, DownsampledSeries] = {r: DownsampledSeries(capacity) for r in range(workers)}
        self.overall = DownsampledSeries(capacity)

    def add(self, worker: int, loss: float) -> None:
        if worker not in self.workers:  # a resumed run's rank beyond the current worker count
            self.workers[worker] = DownsampledSeries(self.capacity)
        self.workers[worker].append(loss)
        self.overall.append(loss)

    @property
    def episodes(self) -> int:
        return self.overall.count

    def nbytes(self) -> int:
        return self.overall.nbytes() + sum(s.nbytes() for s in self.workers.values())

    def figure(self, title: str = "") -> Figure:
        return draw_loss_history(
            {r: s.points() for r, s in self.workers.items() if s.count}, self.overall.points(), title=title
        )


def thin(x: np.ndarray, y: np.ndarray, max_points: int = MAX_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """Every k-th point (k chosen so that at most ``max_points`` remain), always keeping the last one."""
    n = len(x)
    if n <= max_points:
        return x, y
    idx = np.unique(np.append(np.arange(0, n, int(np.ceil(n / max_points))), n - 1))
    return x[idx], y[idx]


def rolling_mean(y: np.ndarray, window: int) -> np.ndarray:
    """Mean of the last ``window`` values at each position (fewer at the start); same length as ``y``."""
    y = np.asarray(y, dtype=float)
    if len(y) == 0 or window <= 1:
        return y.copy()
    csum = np.cumsum(np.insert(y, 0, 0.0))
    ends = np.arange(1, len(y) + 1)
    starts = np.maximum(ends - window, 0)
    return (csum[ends] - csum[starts]) / (ends - starts)


def loss_history_figure(
    losses: Mapping[int, Sequence[float]],
    times: Mapping[int, Sequence[float]],
    title: str = "",
    max_points: int = MAX_POINTS,
) -> Figure:
    """losses[rank] is worker rank's per-episode loss, in its episode order; times[rank] the matching wall times.
    Left: each worker's loss against its own episode index. Right: all workers' losses in wall-time order (one
    session's episodes, e.g. a benchmark's; a run's own figures are in global-step order: ``draw_loss_history``)."""
    ranks = sorted(losses)
    per_worker = {r: (np.arange(len(losses[r])), np.asarray(losses[r], dtype=float)) for r in ranks}
    all_t = np.concatenate([np.asarray(times[r], dtype=float) for r in ranks]) if ranks else np.zeros(0)
    all_l = np.concatenate([np.asarray(losses[r], dtype=float) for r in ranks]) if ranks else np.zeros(0)
    order = np.argsort(all_t, kind="stable")
    overall = (np.arange(len(order)), all_l[order])
    return draw_loss_history(per_worker, overall, title, max_points, overall_order="in time order")


def draw_loss_history(
    per_worker: Mapping[int, tuple[np.ndarray, np.ndarray]],
    overall: tuple[np.ndarray, np.ndarray],
    title: str = "",
    max_points: int = MAX_POINTS,
    overall_order: str = "by global step",
) -> Figure:
    """The loss-history figure from lines already laid out: per_worker[rank] = (episode index, loss) on the
    left, overall = (episode index of all workers in the run's order, loss) on the right: the global step's (the
    dashboard's and python -m a3c.plot's), or another that ``overall_order`` names on the axis."""
    from matplotlib.figure import Figure  # (at first use: see the module docstring)

    fig = Figure(figsize=(11, 4), dpi=80)
    left, right = fig.subplots(1, 2)
    for rank in sorted(per_worker):
        x, y = per_worker[rank]
        left.plot(*thin(np.asarray(x), np.asarray(y, dtype=float), max_points), lw=0.8, label=f"worker {rank}")
    left.set_xlabel("episode of the worker")
    left.set_ylabel("loss")
    left.set_title("loss history of each worker")
    if 0 < len(per_worker) <= 16:
        left.legend(fontsize=6, ncol=2)
    x, y = overall
    right.plot(*thin(np.asarray(x), np.asarray(y, dtype=float), max_points), lw=0.6, color="black")
    right.set_xlabel(f"episode (all workers, {overall_order})")
    right.set_title("all workers' losses")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


@dataclass
class RunCurve:
    """One run's per-episode values in the run's order (by global step), ready to be drawn against steps or seconds."""

    label: str
    global_step: np.ndarray
    wall_time: np.ndarray
    values: np.ndarray


def comparison_figure(
    runs: Sequence[RunCurve], metric: str, window: int = 100, max_points: int = MAX_POINTS, title: str = ""
) -> Figure:
    """``metric`` of every run against the global env step (left) and against wall time (right): a faint line of
    the raw per-episode values and, on top, their mean over the last ``window`` episodes (all workers), in the
    order of each axis (the workers' episodes interleave a little differently by step and by time)."""
    from matplotlib.figure import Figure  # (at first use: see the module docstring)

    fig = Figure(figsize=(11, 4), dpi=80)
    by_step, by_time = fig.subplots(1, 2, sharey=True)
    colors = [f"C{i % 10}" for i in range(len(runs))]
    for run, color in zip(runs, colors, strict=True):
        for ax, axis in ((by_step, run.global_step), (by_time, run.wall_time)):
            order = np.argsort(axis, kind="stable")
            x, values = np.asarray(axis)[order], np.asarray(run.values)[order]
            if len(runs) == 1:
                ax.plot(*thin(x, values, max_points), lw=0.5, color=color, alpha=0.3)
            ax.plot(*thin(x, rolling_mean(values, window), max_points), lw=1.2, color=color, label=run.label)
    by_step.set_xlabel("global env step")
    by_step.set_ylabel(f"{metric} (mean of last {window} episodes)")
    by_time.set_xlabel("wall time (s)")
    by_step.set_title(f"{metric} against steps")
    by_time.set_title(f"{metric} against wall time")
    if runs:
        by_step.legend(fontsize=7)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def figure_png(fig: Figure, collect: bool = True) -> bytes:
    """The figure as PNG bytes (Agg canvas; thread-safe because the figure is not registered with pyplot). The
    figure is used up: cleared, and its memory given back (see the module docstring). ``collect=False`` skips the
    garbage collection (a full one costs ~0.1-0.5 s with torch loaded): for a last figure before the process ends."""
    buffer = io.BytesIO()
    try:
        fig.savefig(buffer, format="png")
    finally:
        release_figure(fig, collect)
    return buffer.getvalue()


def release_figure(fig: Figure, collect: bool = True) -> None:
    """Drop the figure's artists and its canvas's renderer (the bulk of its memory), then collect the reference
    cycles of the figures released before this one (this one's caller still holds it)."""
    fig.clear()
    if hasattr(fig.canvas, "renderer"):
        del fig.canvas.renderer
    if collect:
        gc.collect()


def png_size(png: bytes) -> tuple[int, int]:
    """(height, width) read from a PNG's IHDR chunk."""
    if png[:8] != b"\x89PNG\r\n\x1a\n" or png[12:16] != b"IHDR":
        raise ValueError("not a PNG image")
    width, height = struct.unpack(">II", png[16:24])
    return height, width


def write_bytes_atomic(data: bytes, path: Path) -> Path:
    """Write ``data`` to ``path`` (its folder made if need be) atomically (a3c.record.files.atomic_write): readers never
    see a half-written image, and a failed write leaves no temporary file behind. Not synced to disk: the figure is
    redrawn every 30 s, and drawn again from episodes.csv by ``python -m a3c.plot``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return atomic_write(path, lambda f: f.write(data), binary=True, durable=False)


def save_figure(fig: Figure, path: Path) -> Path:
    """Render ``fig`` to PNG at ``path`` (atomically)."""
    return write_bytes_atomic(figure_png(fig), path)
