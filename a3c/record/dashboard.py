"""The main process's view of a running job: reads the new episodes and the per-worker stats from its source (an
a3c.record.rows.EpisodeSource: the run layer's coordinator), and writes them to episodes.csv (every episode),
TensorBoard (tags of docs/design.md, x axis = global env step; the event streams are a3c/record/tensorboard_writer.py's)
and the progress bar (a3c/record/progress.py); with --track, W&B as well (a3c/record/tracking.py). Called about four
times a second by the trainer; TensorBoard is flushed every tick.

Volume is bounded by time, not by the episode rate (a3c/record/episode_scalars.py): per-episode points per group of tags
at most ``points_per_s`` a second, the interval's mean/min/max exact; the interval's aggregates and the perf scalars
are written once per ``1 / points_per_s`` seconds (every tick when it is 0).

Besides the scalars it writes every ``plot_every_s`` the tutorial's loss-history figure, rendered in a background
thread so that the tick never waits for matplotlib, to plots/loss_history.png and as the image
``plots/loss_history``; and at the end of the run the hparams summary (the resolved configuration and the final
metrics) into the run's own event file, so that TensorBoard shows it for the run itself and not for a sub-run.

Policy lag (the global optimizer steps other workers took between the weights that acted and a gradient being
applied: a3c.learn.update.loop; for A3C those between the rollout's pull and its push, for PPO's minibatches also
those since the rollout acted) is measured by the worker on every update: ``perf/policy_lag`` is the mean over the
updates since the last tick and ``perf/policy_lag_max`` the largest, taken from the per-worker maxima of the logging
interval that is ending (the trainer advances the interval right after each tick, see ``Dashboard.__init__``).
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from a3c.record.episode_scalars import ALL, EpisodeScalars
from a3c.record.figures import LossHistory, draw_loss_history, figure_png, write_bytes_atomic
from a3c.record.progress import ProgressBar
from a3c.record.rows import FIELD, TERM_COLUMN, UPDATE_TERMS, Episode, EpisodeSource, Stat, finite_mean
from a3c.record.run_dir import EpisodeLog, RunDirectory, RunDirWriteError, writing
from a3c.record.tensorboard_writer import TensorBoardWriter
from a3c.record.tracking import WandbTracker

PLOT_EVERY_S = 30.0
POINTS_PER_S = 1.0  # per-episode TensorBoard points per group of tags per second (--tb-episode-points-per-s)
LOSS_HISTORY_TAG = "plots/loss_history"
LOSS_HISTORY_PNG = "plots/loss_history.png"


def episode_order(step: float, worker: float, index: float) -> tuple[int, int, int]:
    """Where an episode stands in the run's record: by global step, then worker, then index (docs/design.md: the
    record is ordered by the global step; wall time orders a session's episodes too, but in runs resumed by earlier
    versions of a3c each session's wall time began at 0 again)."""
    return int(step), int(worker), int(index)


class LastEpisodes:
    """The returns of the last ``n`` episodes in the run's order (``episode_order``): what mean_return_100 and the
    solved check average. Episodes arrive nearly in that order but not quite (a worker stamps an episode with the
    global step it saw and publishes it at the end of its rollout; a resume replays the kept rows first), so the
    window keeps the ``n`` largest keys, whatever the order they came in."""

    def __init__(self, n: int = 100) -> None:
        self.n = n
        self._heap: list[tuple[tuple[int, int, int], float]] = []  # a min-heap: the earliest kept episode on top
        # the window's newest episode: (its key, its wall time). The largest key added is never evicted, so it is the
        # newest of every window from then on; a window is dated by it (the moment its episodes had all ended), not by
        # the episode added last, which may be an older one published late
        self.newest: tuple[tuple[int, int, int], float] | None = None

    def add(self, order: tuple[int, int, int], ret: float, wall_time: float = 0.0) -> None:
        if self.newest is None or order > self.newest[0]:
            self.newest = (order, wall_time)
        if len(self._heap) < self.n:
            heapq.heappush(self._heap, (order, ret))
        elif order > self._heap[0][0]:
            heapq.heapreplace(self._heap, (order, ret))

    def __len__(self) -> int:
        return len(self._heap)

    def full(self) -> bool:
        return len(self._heap) == self.n

    def mean(self) -> float | None:
        """The mean of the window's finite returns (``finite_mean``); None when it holds none."""
        return finite_mean(ret for _, ret in self._heap)


class Dashboard:
    def __init__(
        self,
        run: RunDirectory,
        source: EpisodeSource,
        total_steps: int,
        reward_threshold: float | None,
        start_time: float,
        restarts: int = 0,
        interval: Callable[[], int] | None = None,
        plot_every_s: float = PLOT_EVERY_S,
        points_per_s: float = POINTS_PER_S,
        clock: Callable[[], float] = time.time,
        tracker: WandbTracker | None = None,
        origin: tuple[float, int, np.ndarray] | None = None,
        terms: tuple[str, ...] = UPDATE_TERMS[:4],
    ) -> None:
        """``interval`` returns the logging interval the workers tag their lag maxima with (the store's
        ``interval``); the trainer advances it right after each tick, so at a tick the interval that is ending is
        the current one. Without it, the newest interval found in the stats is used. ``clock``: the time that
        paces the TensorBoard intervals (a test passes its own). ``tracker``: --track's W&B run
        (a3c/record/tracking.py), handed every scalar written to TensorBoard and the summary; finished by close().
        ``origin``: (time by ``clock``, global step, a copy of the stats) at the session's start, from which the first
        perf point (charts/SPS, updates/s, lag) measures. ``terms``: what the run's objective reports of each update
        (a3c.record.rows.UPDATE_TERMS names: the loss's four, then PPO's diagnostics), logged as ``losses/<term>``
        over the workers and, past the loss's four, per worker too (``workers/<rank>/<term>``)."""
        self.run, self.source, self.start_time = run, source, start_time
        self.terms = terms
        self.interval = interval
        self.plot_every_s = plot_every_s
        self.reward_threshold = reward_threshold
        self.clock = clock
        self.tensorboard = TensorBoardWriter(run.path, source.workers)
        self.tracker = tracker
        self.scalars = EpisodeScalars(points_per_s)
        self._next_interval = clock() + self.scalars.period
        self._pending_lag_max: float | None = None
        self._closed = False
        self.log = EpisodeLog(run.episodes_csv)
        # Episodes read after a checkpoint are stamped at least one step past it (see checkpointed()).
        self.floor_step = 0
        self.recent_returns = LastEpisodes(100)
        self.episodes = 0
        self.solved_at_step: int | None = None  # the run's first solve (replayed episodes of a resume count)
        self.solved_at_s: float | None = None
        # this session's first episode at which the 100-episode window met the threshold: (global step, the run's
        # wall time, the window's mean). What --stop-when-solved stops on: a resumed run that solved once and
        # collapsed since goes on until it meets it again (the replayed episodes never set it)
        self.threshold_met: tuple[int, float, float] | None = None
        # the best 100-episode window of the run so far: (mean, global step at its last episode)
        self.best_window: tuple[float, int] | None = None
        # the tutorial's per-process loss history, bounded (episodes.csv keeps every episode)
        self.loss_history = LossHistory(source.workers)
        self.restarts = restarts
        # at the last perf point (time by ``clock``, global step, the stats): first the session's start, ``origin``,
        # taken before the workers were launched, so that the first point counts every step of the session (the
        # dashboard is built after the launch: a short run can be over by then); without it, now
        self._last = origin if origin is not None else (clock(), source.global_step(), self._stats().copy())
        self._lag_interval_done = -1  # the newest interval whose lag maximum was written
        self._plotter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="a3c-plot")
        self._plot: Future[tuple[bytes, int]] | None = None
        self._next_plot = time.time() + plot_every_s
        self.bar = ProgressBar(total_steps, initial=source.global_step())

    def _stats(self) -> np.ndarray:
        return self.source.stats()

    # -- checkpoints and resume --------------------------------------------------------------------------------
    def checkpointed(self, step: int) -> None:
        """A checkpoint at global step ``step`` was written. A resume from it purges TensorBoard events from
        ``step + 1`` on (a3c.run.trainer), so every episode read from now on is stamped at least ``step + 1``: those
        the checkpoint does not count are then exactly the ones purged, and TensorBoard keeps the same episodes as
        episodes.csv. Every episode read before has a stamp <= ``step`` (a worker publishes its steps before its
        episodes)."""
        self.floor_step = max(self.floor_step, step + 1)

    def resume(self, kept: list[dict[str, float]], purge_step: int, restarts: int) -> None:
        """Go on from an earlier session: TensorBoard events at and after ``purge_step`` purged in every stream,
        and the running statistics refilled from the episodes.csv rows kept (``kept``, file order), replayed in the
        run's order (by global step: the sessions' wall times may overlap in runs of older versions)."""
        self.tensorboard.purge_from(purge_step)
        self.floor_step = max(self.floor_step, purge_step)
        self.restarts = restarts
        self.episodes = len(kept)
        ordered = sorted(
            ((episode_order(r["global_step"], r["worker"], r["index"]), r) for r in kept), key=lambda p: p[0]
        )
        for order, row in ordered:
            self.recent_returns.add(order, row["return"], row["wall_time"])
            self.loss_history.add(int(row["worker"]), row["loss"])
            self._check_solved(live=False)

    def _check_solved(self, live: bool) -> None:
        """After an episode was added to the window: the best window, and whether the run is solved (``live``: an
        episode of this session, not one a resume replayed), each dated by the window's newest episode (its global
        step and wall time)."""
        mean = self.mean_return_100()
        if not self.recent_returns.full() or mean is None or self.recent_returns.newest is None:
            return
        (step, _, _), wall_time = self.recent_returns.newest
        if self.best_window is None or mean > self.best_window[0]:
            self.best_window = (mean, step)
        if self.reward_threshold is None or mean < self.reward_threshold:
            return
        if self.solved_at_step is None:
            self.solved_at_step, self.solved_at_s = step, wall_time
        if live and self.threshold_met is None:
            self.threshold_met = (step, wall_time, mean)

    def mean_return_100(self) -> float | None:
        """The mean return of the run's last 100 episodes by global step (fewer before there are 100), of those whose
        return is finite (``LastEpisodes.mean``)."""
        return self.recent_returns.mean()

    def solved(self) -> bool:
        """Whether this session met the threshold (what --stop-when-solved stops on; see ``threshold_met``)."""
        return self.threshold_met is not None

    def tick(self) -> list[Episode]:
        """Read everything new and publish it. Returns the new episodes."""
        episodes = self.source.drain()
        for ep in episodes:
            # A worker stamps an episode with the global step as it saw it, which can lag the step of a checkpoint
            # taken before the episode was read. Stamped at least one step past the checkpoint, every episode that
            # the checkpoint does not count lies in the range a resume from it purges from TensorBoard.
            if ep.values[FIELD["global_step"]] < self.floor_step:
                ep.values[FIELD["global_step"]] = self.floor_step
        self.log.append(episodes)  # every episode, in board order
        # the run's order (each key once: it is also the order recent_returns keeps)
        ordered = sorted(
            ((episode_order(e["global_step"], e.worker, e.index), e) for e in episodes), key=lambda p: p[0]
        )
        for order, ep in ordered:
            step = int(ep["global_step"])
            ret, loss = ep["return"], ep["loss"]
            for group, at, values in self.scalars.add(ep.worker, step, ep["wall_time"], ret, ep["length"], loss):
                self.add_scalars(at, values, group)
            self.loss_history.add(ep.worker, loss)
            self.recent_returns.add(order, ret, ep["wall_time"])
            self.episodes += 1
            self._check_solved(live=True)
        self._fold_lag_max()
        self.bar.update(self.source.global_step(), self.mean_return_100())
        now = self.clock()
        if now >= self._next_interval:
            self._write_interval()
            self._next_interval = now + self.scalars.period
        self._refresh_plot()
        self.tensorboard.flush()
        return episodes

    def add_scalars(self, step: int, values: Mapping[str, float], group: int = ALL) -> None:
        """Several scalars at one step, as one event, in the stream of ``group`` (ALL: the run's own; a rank: that
        worker's): what the evaluation's eval/* tags go through too."""
        self.tensorboard.add_scalars(step, values, group)
        if self.tracker is not None:
            self.tracker.log(step, values)

    def _write_interval(self) -> None:
        """The interval that is ending: its episodes' aggregates, and the perf scalars since the last ones."""
        for group, step, values in self.scalars.flush():
            self.add_scalars(step, values, group)
        self._write_perf()

    def _fold_lag_max(self) -> None:
        """Every tick: the ending logging interval's largest policy lag, kept until the next perf point."""
        lag_max = self._lag_max(self._stats())
        if lag_max is not None:
            self._pending_lag_max = max(lag_max, self._pending_lag_max or lag_max)

    def _write_perf(self) -> None:
        now, step, stats = self.clock(), self.source.global_step(), self._stats().copy()
        last_time, last_step, last_stats = self._last
        dt = max(now - last_time, 1e-9)
        if step == last_step:
            return
        updates = stats[:, Stat.UPDATES].sum() - last_stats[:, Stat.UPDATES].sum()
        scalars = {"charts/SPS": (step - last_step) / dt, "perf/updates_per_s": updates / dt}
        if updates > 0:
            scalars["perf/policy_lag"] = (stats[:, Stat.LAG_SUM].sum() - last_stats[:, Stat.LAG_SUM].sum()) / updates
            if self._pending_lag_max is not None:
                scalars["perf/policy_lag_max"] = self._pending_lag_max
                self._pending_lag_max = None
            scalars["perf/grad_norm"] = (
                stats[:, Stat.GRAD_NORM_SUM].sum() - last_stats[:, Stat.GRAD_NORM_SUM].sum()
            ) / updates
            active = stats[:, Stat.UPDATES] > 0
            for term in self.terms:
                scalars[f"losses/{term}"] = float(np.mean(stats[active, TERM_COLUMN[term]]))
            diagnostics = self.terms[4:]  # (PPO's: approx_kl, clip_fraction, explained_variance) per worker too
            for rank in np.flatnonzero(active) if diagnostics else ():
                values = {f"workers/{rank}/{term}": float(stats[rank, TERM_COLUMN[term]]) for term in diagnostics}
                self.add_scalars(step, values, int(rank))
        scalars["perf/skipped_updates"] = stats[:, Stat.SKIPPED].sum()
        scalars["perf/dropped_minibatches"] = stats[:, Stat.DROPPED_MINIBATCHES].sum()
        scalars["perf/dropped_samples"] = stats[:, Stat.DROPPED_SAMPLES].sum()
        scalars["perf/nonfinite_samples"] = stats[:, Stat.NONFINITE_SAMPLES].sum()
        scalars["perf/restarts"] = self.restarts
        scalars["perf/lost_episodes"] = self.source.lost
        self.add_scalars(step, scalars)
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

    # -- the loss-history figure -------------------------------------------------------------------------------
    def _snapshot(self) -> tuple[dict[int, tuple[np.ndarray, np.ndarray]], tuple[np.ndarray, np.ndarray]]:
        """A copy of the (bounded) loss history's lines, for the plot thread."""
        h = self.loss_history
        return {r: s.points() for r, s in h.workers.items() if s.count}, h.overall.points()

    def _render(
        self,
        per_worker: dict[int, tuple[np.ndarray, np.ndarray]],
        overall: tuple[np.ndarray, np.ndarray],
        step: int,
        collect: bool = True,
    ) -> tuple[bytes, int]:
        title = f"{self.run.path.name}, step {step:,}"
        png = figure_png(draw_loss_history(per_worker, overall, title=title), collect)
        with writing(LOSS_HISTORY_PNG):
            write_bytes_atomic(png, self.run.plots / "loss_history.png")
        return png, step

    def _collect_plot(self, wait: bool) -> None:
        if self._plot is None or not (wait or self._plot.done()):
            return
        future, self._plot = self._plot, None
        # a figure the plot thread could not write raises RunDirWriteError here, which stops the run (a3c.run.trainer)
        self.tensorboard.add_image(LOSS_HISTORY_TAG, *future.result())

    def _refresh_plot(self) -> None:
        """Every plot_every_s: hand a copy of the loss history to the plot thread; publish a finished figure."""
        self._collect_plot(wait=False)
        now = time.time()
        if self._plot is None and self.episodes and now >= self._next_plot:
            self._plot = self._plotter.submit(self._render, *self._snapshot(), self.source.global_step())
            self._next_plot = now + self.plot_every_s

    def save_loss_history(self) -> Path:
        """Render the figure now (waiting for a refresh in flight): plots/loss_history.png and the TB image. The
        run's last figure: no garbage collection after it (it would only slow the shutdown down)."""
        self._collect_plot(wait=True)
        png, step = self._render(*self._snapshot(), self.source.global_step(), collect=False)
        self.tensorboard.add_image(LOSS_HISTORY_TAG, png, step)
        if self.tracker is not None:
            self.tracker.image(step, LOSS_HISTORY_TAG, self.run.plots / "loss_history.png")
        return self.run.plots / "loss_history.png"

    # -- end of run --------------------------------------------------------------------------------------------
    def write_hparams(self, config: Mapping[str, Any], summary: Mapping[str, Any]) -> None:
        """The resolved configuration with the final metrics, in the run's own event file (the HPARAMS tab)."""
        self.tensorboard.write_hparams(config, summary, self.source.global_step())
        if self.tracker is not None:
            self.tracker.summarize(summary)

    def close(self, steps_per_s: float | None = None) -> None:
        """Write the last interval's aggregates and perf scalars, wait for the figure, close every writer and
        episodes.csv. Each of them is attempted even when one fails; then the first failure (RunDirWriteError) is
        raised. ``steps_per_s``: the session's (summary.json's), the progress bar's last figure."""
        if self._closed:
            return
        self._closed = True
        self._fold_lag_max()
        failures: list[RunDirWriteError] = []

        def attempt(close_one: Callable[[], None]) -> None:
            try:
                close_one()
            except RunDirWriteError as err:
                failures.append(err)

        attempt(self._write_interval)
        attempt(lambda: self._collect_plot(wait=True))
        self._plotter.shutdown(wait=True)
        self.bar.close(steps_per_s)
        attempt(self.tensorboard.close)
        attempt(self.log.close)
        if self.tracker is not None:
            self.tracker.finish()
        if failures:
            raise failures[0]
