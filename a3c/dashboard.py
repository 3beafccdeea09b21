"""The main process's view of a running job: reads new rows off the episode board and the per-worker stats, and
writes them to episodes.csv, TensorBoard (tags of shared/DESIGN.md, x axis = global env step) and the progress bar.
Called about four times a second by the trainer; TensorBoard is flushed every tick.

Besides the scalars it writes, once, a custom-scalars layout (every worker's return in one multi-line chart, every
worker's loss in another, the aggregates beside them); every ``plot_every_s`` the tutorial's loss-history figure,
rendered in a background thread so that the tick never waits for matplotlib, to plots/loss_history.png and as the
image ``plots/loss_history``; and at the end of the run the hparams summary (the resolved configuration and the final
metrics) into the run's own event file, so that TensorBoard shows it for the run itself and not for a sub-run.

Policy lag (global optimizer steps between a worker pulling the weights and its gradient being applied) is measured
by the worker on every update: ``perf/policy_lag`` is the mean over the updates since the last tick and
``perf/policy_lag_max`` the largest, taken from the per-worker maxima of the logging interval that is ending (the
trainer advances the interval right after each tick, see ``Dashboard.__init__``).
"""

from __future__ import annotations

import json
import sys
import time
from collections import deque
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from tensorboard.compat.proto.event_pb2 import Event, SessionLog
from tensorboard.compat.proto.summary_pb2 import Summary
from torch.utils.tensorboard import SummaryWriter
from torch.utils.tensorboard.summary import hparams
from tqdm import tqdm

from a3c.backends import Coordinator
from a3c.board import FIELD, Episode, Stat
from a3c.plots import figure_png, loss_history_figure, png_size, write_bytes_atomic
from a3c.run_dir import EpisodeLog, RunDirectory

PLOT_EVERY_S = 30.0
LOSS_HISTORY_TAG = "plots/loss_history"
# final metrics of the hparams table: summary.json key -> scalar tag
HPARAM_METRICS: dict[str, str] = {
    "mean_return_100": "final/mean_return_100",
    "steps_per_s": "final/steps_per_s",
    "solved_at_step": "final/solved_at_step",
    "eval_best_mean_return": "final/eval_best_mean_return",
}


def custom_scalars_layout() -> dict[str, dict[str, list[Any]]]:
    """The custom-scalars dashboard: per category, charts side by side; each chart lists tag regexes."""
    return {
        "return": {
            "every worker": ["Multiline", [r"^workers/\d+/episodic_return$"]],
            "all workers": ["Multiline", ["^charts/episodic_return$"]],
            "episode length": ["Multiline", ["^charts/episodic_length$"]],
        },
        "loss": {
            "every worker (episode mean)": ["Multiline", [r"^workers/\d+/episode_loss$"]],
            "all workers": ["Multiline", ["^losses/loss$", "^losses/policy_loss$", "^losses/value_loss$"]],
            "entropy": ["Multiline", ["^losses/entropy$"]],
        },
        "eval": {  # a3c.evaluator: the deterministic policy, on the evaluator's own envs
            "mean and std of the return": ["Multiline", ["^eval/mean_return$", "^eval/std_return$"]],
            "mean episode length": ["Multiline", ["^eval/mean_length$"]],
        },
        "perf": {
            "policy lag (mean, max)": ["Multiline", ["^perf/policy_lag$", "^perf/policy_lag_max$"]],
            "steps per second": ["Multiline", ["^charts/SPS$"]],
            "updates per second": ["Multiline", ["^perf/updates_per_s$"]],
            "gradient norm (before clipping)": ["Multiline", ["^perf/grad_norm$"]],
            "faults": ["Multiline", ["^perf/skipped_updates$", "^perf/restarts$", "^perf/lost_episodes$"]],
        },
    }


def hparam_values(config: Mapping[str, Any]) -> dict[str, int | float | str]:
    """Config values as TensorBoard hparams accept them: numbers stay numbers, everything else becomes text."""
    out: dict[str, int | float | str] = {}
    for key, value in config.items():
        if isinstance(value, bool) or value is None:
            out[key] = str(value)
        elif isinstance(value, (int, float, str)):
            out[key] = value
        else:
            out[key] = json.dumps(value, sort_keys=True)
    return out


class Dashboard:
    def __init__(
        self,
        run: RunDirectory,
        source: Coordinator,
        total_steps: int,
        reward_threshold: float | None,
        start_time: float,
        restarts: int = 0,
        interval: Callable[[], int] | None = None,
        plot_every_s: float = PLOT_EVERY_S,
    ) -> None:
        """``interval`` returns the logging interval the workers tag their lag maxima with (the store's
        ``interval``); the trainer advances it right after each tick, so at a tick the interval that is ending is
        the current one. Without it, the newest interval found in the stats is used."""
        self.run, self.source, self.start_time = run, source, start_time
        self.interval = interval
        self.plot_every_s = plot_every_s
        self.reward_threshold = reward_threshold
        self.writer = SummaryWriter(log_dir=str(run.path), flush_secs=1)
        self.log = EpisodeLog(run.episodes_csv)
        # Episodes read after a checkpoint are stamped at least one step past it (see checkpointed()).
        self.floor_step = 0
        self.recent_returns: deque[float] = deque(maxlen=100)
        self.episodes = 0
        self.solved_at_step: int | None = None
        self.solved_at_s: float | None = None
        # the tutorial's per-process loss history, unbounded (the board is a ring; this keeps everything)
        self.loss_history: dict[int, list[float]] = {r: [] for r in range(source.workers)}
        self.loss_times: dict[int, list[float]] = {r: [] for r in range(source.workers)}
        self.restarts = restarts
        self._last = (time.time(), source.global_step(), self._stats().copy())
        self._lag_interval_done = -1  # the newest interval whose lag maximum was written
        self._plotter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="a3c-plot")
        self._plot: Future[tuple[bytes, int]] | None = None
        self._next_plot = time.time() + plot_every_s
        self.writer.add_custom_scalars(custom_scalars_layout())
        self.bar = tqdm(
            total=total_steps,
            unit="step",
            unit_scale=True,
            dynamic_ncols=True,
            disable=None,
            initial=source.global_step(),
            mininterval=0.5,
        )

    def _stats(self) -> np.ndarray:
        return self.source.stats()

    def mean_return_100(self) -> float | None:
        return float(np.mean(self.recent_returns)) if self.recent_returns else None

    def solved(self) -> bool:
        return self.solved_at_step is not None

    def tick(self) -> list[Episode]:
        """Read everything new and publish it. Returns the new episodes."""
        episodes = self.source.drain()
        for ep in episodes:
            # A worker stamps an episode with the global step as it saw it, which can lag the step of a checkpoint
            # taken before the episode was read. Stamped at least one step past the checkpoint, every episode that
            # the checkpoint does not count lies in the range a resume from it purges from TensorBoard.
            if ep.values[FIELD["global_step"]] < self.floor_step:
                ep.values[FIELD["global_step"]] = self.floor_step
        self.log.append(episodes)
        w = self.writer
        for ep in episodes:
            step = int(ep["global_step"])
            self.add_scalars(
                step,
                {
                    "charts/episodic_return": ep["return"],
                    "charts/episodic_length": ep["length"],
                    f"workers/{ep.worker}/episodic_return": ep["return"],
                    f"workers/{ep.worker}/episode_loss": ep["loss"],
                },
            )
            self.loss_history[ep.worker].append(ep["loss"])
            self.loss_times[ep.worker].append(ep["wall_time"])
            self.recent_returns.append(ep["return"])
            self.episodes += 1
            self._check_solved(step, ep["wall_time"])
        self._write_perf()
        self._refresh_plot()
        w.flush()
        return episodes

    def add_scalars(self, step: int, values: Mapping[str, float]) -> None:
        """Several scalars at one step, as ONE event (what SummaryWriter.add_scalar writes, one value each, but
        batched). The main process shares the cores with the workers: one add_scalar costs ~150 us of Python (proto
        building, queueing, and tensorboard's pure-Python CRC of every record), and short episodes arrive by the
        thousand per second, so one event per episode instead of four is worth it. TensorBoard reads each value
        of the event as a point of its own tag."""
        summary = Summary(value=[Summary.Value(tag=tag, simple_value=float(v)) for tag, v in values.items()])
        self.writer.file_writer.add_event(Event(wall_time=time.time(), step=step, summary=summary))

    def _write_perf(self) -> None:
        now, step, stats = time.time(), self.source.global_step(), self._stats().copy()
        last_time, last_step, last_stats = self._last
        dt = max(now - last_time, 1e-9)
        if step == last_step:
            return
        updates = stats[:, Stat.UPDATES].sum() - last_stats[:, Stat.UPDATES].sum()
        scalars = {"charts/SPS": (step - last_step) / dt, "perf/updates_per_s": updates / dt}
        if updates > 0:
            scalars["perf/policy_lag"] = (stats[:, Stat.LAG_SUM].sum() - last_stats[:, Stat.LAG_SUM].sum()) / updates
            lag_max = self._lag_max(stats)
            if lag_max is not None:
                scalars["perf/policy_lag_max"] = lag_max
            scalars["perf/grad_norm"] = (
                stats[:, Stat.GRAD_NORM_SUM].sum() - last_stats[:, Stat.GRAD_NORM_SUM].sum()
            ) / updates
            active = stats[:, Stat.UPDATES] > 0
            for tag, col in (
                ("loss", Stat.LOSS),
                ("policy_loss", Stat.POLICY_LOSS),
                ("value_loss", Stat.VALUE_LOSS),
                ("entropy", Stat.ENTROPY),
            ):
                scalars[f"losses/{tag}"] = float(np.mean(stats[active, col]))
        scalars["perf/skipped_updates"] = stats[:, Stat.SKIPPED].sum()
        scalars["perf/restarts"] = self.restarts
        scalars["perf/lost_episodes"] = self.source.lost
        self.add_scalars(step, scalars)
        self.bar.update(step - self.bar.n)
        mean = self.mean_return_100()
        self.bar.set_postfix(
            sps=f"{(step - last_step) / dt:,.0f}", ret100="-" if mean is None else f"{mean:.1f}", refresh=False
        )
        self._last = (now, step, stats)

    def _lag_max(self, stats: np.ndarray) -> float | None:
        """The largest policy lag of the interval that is ending, over the workers that updated in it."""
        tagged = stats[:, Stat.LAG_MAX_INTERVAL]
        interval = self.interval() if self.interval is not None else int(tagged.max())
        if interval <= self._lag_interval_done:
            return None
        in_interval = (tagged == interval) & (stats[:, Stat.UPDATES] > 0)
        if not in_interval.any():
            return None
        self._lag_interval_done = interval
        return float(stats[in_interval, Stat.LAG_MAX].max())

    # -- checkpoints and resume --------------------------------------------------------------------------------
    def checkpointed(self, step: int) -> None:
        """A checkpoint at global step ``step`` was written. A resume from it purges TensorBoard events from
        ``step + 1`` on (a3c.trainer), so every episode read from now on is stamped at least ``step + 1``: those
        the checkpoint does not count are then exactly the ones purged, and TensorBoard keeps the same episodes as
        episodes.csv. Every episode read before has a stamp <= ``step`` (a worker publishes its steps before its
        episodes)."""
        self.floor_step = max(self.floor_step, step + 1)

    def resume(self, kept: list[dict[str, float]], purge_step: int, restarts: int) -> None:
        """Go on from an earlier session: TensorBoard events at and after ``purge_step`` purged (what the earlier
        session logged after the checkpoint, before a crash, and will be logged again), the running statistics
        refilled from the episodes.csv rows kept (``kept``, file order)."""
        # what SummaryWriter(purge_step=...) writes: TensorBoard drops every earlier event at or after this step
        self.writer.file_writer.add_event(Event(step=purge_step, session_log=SessionLog(status=SessionLog.START)))
        self.floor_step = max(self.floor_step, purge_step)
        self.restarts = restarts
        self.episodes = len(kept)
        for row in kept:
            worker = int(row["worker"])
            self.recent_returns.append(row["return"])
            if worker in self.loss_history:
                self.loss_history[worker].append(row["loss"])
                self.loss_times[worker].append(row["wall_time"])
            self._check_solved(int(row["global_step"]), row["wall_time"])

    def _check_solved(self, step: int, wall_time: float) -> None:
        if (
            self.solved_at_step is None
            and self.reward_threshold is not None
            and len(self.recent_returns) == self.recent_returns.maxlen
            and self.mean_return_100() >= self.reward_threshold
        ):
            self.solved_at_step, self.solved_at_s = step, wall_time

    # -- the loss-history figure -------------------------------------------------------------------------------
    def _snapshot(self) -> tuple[dict[int, np.ndarray], dict[int, np.ndarray]]:
        return (
            {r: np.asarray(v, dtype=float) for r, v in self.loss_history.items()},
            {r: np.asarray(v, dtype=float) for r, v in self.loss_times.items()},
        )

    def _render(self, losses: dict[int, np.ndarray], times: dict[int, np.ndarray], step: int) -> tuple[bytes, int]:
        png = figure_png(loss_history_figure(losses, times, title=f"{self.run.path.name}, step {step:,}"))
        write_bytes_atomic(png, self.run.plots / "loss_history.png")
        return png, step

    def _publish_image(self, png: bytes, step: int) -> None:
        height, width = png_size(png)
        image = Summary.Image(height=height, width=width, colorspace=4, encoded_image_string=png)
        self.writer.file_writer.add_summary(Summary(value=[Summary.Value(tag=LOSS_HISTORY_TAG, image=image)]), step)

    def _collect_plot(self, wait: bool) -> None:
        if self._plot is None or not (wait or self._plot.done()):
            return
        future, self._plot = self._plot, None
        try:
            self._publish_image(*future.result())
        except OSError as err:  # a full disk must not stop training; the figure is refreshed again later
            print(f"a3c: could not write plots/loss_history.png: {err}", file=sys.stderr)

    def _refresh_plot(self) -> None:
        """Every plot_every_s: hand a copy of the loss history to the plot thread; publish a finished figure."""
        self._collect_plot(wait=False)
        now = time.time()
        if self._plot is None and self.episodes and now >= self._next_plot:
            self._plot = self._plotter.submit(self._render, *self._snapshot(), self.source.global_step())
            self._next_plot = now + self.plot_every_s

    def save_loss_history(self) -> Path:
        """Render the figure now (waiting for a refresh in flight): plots/loss_history.png and the TB image."""
        self._collect_plot(wait=True)
        self._publish_image(*self._render(*self._snapshot(), self.source.global_step()))
        return self.run.plots / "loss_history.png"

    # -- end of run --------------------------------------------------------------------------------------------
    def write_hparams(self, config: Mapping[str, Any], summary: Mapping[str, Any]) -> None:
        """The resolved configuration with the final metrics, in the run's own event file (TensorBoard's HPARAMS
        tab lists the run itself). Metrics that have no value (not solved) are declared but left empty."""
        experiment, start, end = hparams(hparam_values(config), {tag: 0.0 for tag in HPARAM_METRICS.values()})
        for proto in (experiment, start, end):
            self.writer.file_writer.add_summary(proto)
        step = self.source.global_step()
        for key, tag in HPARAM_METRICS.items():
            if summary.get(key) is not None:
                self.writer.add_scalar(tag, float(summary[key]), step)
        self.writer.flush()

    def close(self) -> None:
        self._collect_plot(wait=True)
        self._plotter.shutdown(wait=True)
        self.bar.close()
        self.writer.flush()
        self.writer.close()
        self.log.close()
