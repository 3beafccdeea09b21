"""Matplotlib figures of a run: the tutorial's loss-history figure (each worker's curve on the left, all workers'
losses in time order on the right) and the run-comparison figures of ``python -m a3c.plot`` (a metric against the
global step and against wall time, one line per run).

Figures are built on ``matplotlib.figure.Figure`` directly, never through pyplot's global state, so the dashboard
can render them in a background thread while the main thread keeps ticking. Long histories are thinned to at most
``max_points`` points per line before drawing: a figure of a million episodes costs what one of a few thousand does.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

MAX_POINTS = 4000  # per line; more points than pixels only cost time


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
    Left: each worker's loss against its own episode index. Right: all workers' losses in wall-time order."""
    fig = Figure(figsize=(11, 4), dpi=80)
    left, right = fig.subplots(1, 2)
    for rank in sorted(losses):
        y = np.asarray(losses[rank], dtype=float)
        x, y = thin(np.arange(len(y)), y, max_points)
        left.plot(x, y, lw=0.8, label=f"worker {rank}")
    left.set_xlabel("episode of the worker")
    left.set_ylabel("loss")
    left.set_title("loss history of each worker")
    if 0 < len(losses) <= 16:
        left.legend(fontsize=6, ncol=2)
    ranks = sorted(losses)
    all_t = np.concatenate([np.asarray(times[r], dtype=float) for r in ranks]) if ranks else np.zeros(0)
    all_l = np.concatenate([np.asarray(losses[r], dtype=float) for r in ranks]) if ranks else np.zeros(0)
    order = np.argsort(all_t, kind="stable")
    x, y = thin(np.arange(len(order)), all_l[order], max_points)
    right.plot(x, y, lw=0.6, color="black")
    right.set_xlabel("episode (all workers, in time order)")
    right.set_title("all workers' losses")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


@dataclass
class RunCurve:
    """One run's per-episode values in wall-time order, ready to be drawn against steps or seconds."""

    label: str
    global_step: np.ndarray
    wall_time: np.ndarray
    values: np.ndarray


def comparison_figure(
    runs: Sequence[RunCurve], metric: str, window: int = 100, max_points: int = MAX_POINTS, title: str = ""
) -> Figure:
    """``metric`` of every run against the global env step (left) and against wall time (right): a faint line of
    the raw per-episode values and, on top, their mean over the last ``window`` episodes (all workers)."""
    fig = Figure(figsize=(11, 4), dpi=80)
    by_step, by_time = fig.subplots(1, 2, sharey=True)
    colors = [f"C{i % 10}" for i in range(len(runs))]
    for run, color in zip(runs, colors, strict=True):
        smooth = rolling_mean(run.values, window)
        for ax, x in ((by_step, run.global_step), (by_time, run.wall_time)):
            if len(runs) == 1:
                ax.plot(*thin(x, run.values, max_points), lw=0.5, color=color, alpha=0.3)
            ax.plot(*thin(x, smooth, max_points), lw=1.2, color=color, label=run.label)
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


def figure_png(fig: Figure) -> bytes:
    """The figure as PNG bytes (Agg canvas; thread-safe because the figure is not registered with pyplot)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return buffer.getvalue()


def png_size(png: bytes) -> tuple[int, int]:
    """(height, width) read from a PNG's IHDR chunk."""
    if png[:8] != b"\x89PNG\r\n\x1a\n" or png[12:16] != b"IHDR":
        raise ValueError("not a PNG image")
    width, height = struct.unpack(">II", png[16:24])
    return height, width


def write_bytes_atomic(data: bytes, path: Path) -> Path:
    """Write ``data`` to ``path`` through a temporary file and a rename: readers never see a half-written image."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.stem + ".tmp" + path.suffix)
    tmp.write_bytes(data)
    tmp.replace(path)
    return path


def save_figure(fig: Figure, path: Path) -> Path:
    """Render ``fig`` to PNG at ``path`` (atomically)."""
    return write_bytes_atomic(figure_png(fig), path)
