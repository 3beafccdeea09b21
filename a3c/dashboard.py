"""The main process's view of a running job: reads new rows off the episode board and the per-worker stats, and
writes them to episodes.csv, TensorBoard (tags of shared/DESIGN.md, x axis = global env step) and the progress bar.
Called about four times a second by the trainer; TensorBoard is flushed every tick."""

from __future__ import annotations

import time
from collections import deque
from pathlib import Path

import numpy as np
from torch.utils.tensorboard import SummaryWriter
from tqdm import tqdm

from a3c.board import BoardReader, Episode, EpisodeBoard, Stat
from a3c.plots import loss_history_figure, save_figure
from a3c.run_dir import EpisodeLog, RunDirectory


class Dashboard:
    def __init__(
        self,
        run: RunDirectory,
        board: EpisodeBoard,
        total_steps: int,
        reward_threshold: float | None,
        start_time: float,
        restarts: int = 0,
    ) -> None:
        self.run, self.board, self.start_time = run, board, start_time
        self.reward_threshold = reward_threshold
        self.writer = SummaryWriter(log_dir=str(run.path), flush_secs=1)
        self.reader = BoardReader(board)
        self.log = EpisodeLog(run.episodes_csv)
        self.recent_returns: deque[float] = deque(maxlen=100)
        self.episodes = 0
        self.solved_at_step: int | None = None
        self.solved_at_s: float | None = None
        # the tutorial's per-process loss history, unbounded (the board is a ring; this keeps everything)
        self.loss_history: dict[int, list[float]] = {r: [] for r in range(board.workers)}
        self.loss_times: dict[int, list[float]] = {r: [] for r in range(board.workers)}
        self.restarts = restarts
        self._last = (time.time(), board.global_step(), self._stats().copy())
        self.bar = tqdm(
            total=total_steps,
            unit="step",
            unit_scale=True,
            dynamic_ncols=True,
            disable=None,
            initial=board.global_step(),
            mininterval=0.5,
        )

    def _stats(self) -> np.ndarray:
        return self.board.stats.numpy()

    def mean_return_100(self) -> float | None:
        return float(np.mean(self.recent_returns)) if self.recent_returns else None

    def solved(self) -> bool:
        return self.solved_at_step is not None

    def tick(self) -> list[Episode]:
        """Read everything new and publish it. Returns the new episodes."""
        episodes = self.reader.drain()
        self.log.append(episodes)
        w = self.writer
        for ep in episodes:
            step = int(ep["global_step"])
            w.add_scalar("charts/episodic_return", ep["return"], step)
            w.add_scalar("charts/episodic_length", ep["length"], step)
            w.add_scalar(f"workers/{ep.worker}/episodic_return", ep["return"], step)
            w.add_scalar(f"workers/{ep.worker}/episode_loss", ep["loss"], step)
            self.loss_history[ep.worker].append(ep["loss"])
            self.loss_times[ep.worker].append(ep["wall_time"])
            self.recent_returns.append(ep["return"])
            self.episodes += 1
            if (
                self.solved_at_step is None
                and self.reward_threshold is not None
                and len(self.recent_returns) == self.recent_returns.maxlen
                and self.mean_return_100() >= self.reward_threshold
            ):
                self.solved_at_step, self.solved_at_s = step, ep["wall_time"]
        self._write_perf()
        w.flush()
        return episodes

    def _write_perf(self) -> None:
        now, step, stats = time.time(), self.board.global_step(), self._stats().copy()
        last_time, last_step, last_stats = self._last
        dt = max(now - last_time, 1e-9)
        if step == last_step:
            return
        w = self.writer
        updates = stats[:, Stat.UPDATES].sum() - last_stats[:, Stat.UPDATES].sum()
        w.add_scalar("charts/SPS", (step - last_step) / dt, step)
        w.add_scalar("perf/updates_per_s", updates / dt, step)
        if updates > 0:
            lag = (stats[:, Stat.LAG_SUM].sum() - last_stats[:, Stat.LAG_SUM].sum()) / updates
            norm = (stats[:, Stat.GRAD_NORM_SUM].sum() - last_stats[:, Stat.GRAD_NORM_SUM].sum()) / updates
            w.add_scalar("perf/policy_lag", lag, step)
            w.add_scalar("perf/grad_norm", norm, step)
            active = stats[:, Stat.UPDATES] > 0
            for tag, col in (
                ("loss", Stat.LOSS),
                ("policy_loss", Stat.POLICY_LOSS),
                ("value_loss", Stat.VALUE_LOSS),
                ("entropy", Stat.ENTROPY),
            ):
                w.add_scalar(f"losses/{tag}", float(np.mean(stats[active, col])), step)
        w.add_scalar("perf/skipped_updates", stats[:, Stat.SKIPPED].sum(), step)
        w.add_scalar("perf/restarts", self.restarts, step)
        w.add_scalar("perf/lost_episodes", self.reader.lost, step)
        self.bar.update(step - self.bar.n)
        mean = self.mean_return_100()
        self.bar.set_postfix(
            sps=f"{(step - last_step) / dt:,.0f}", ret100="-" if mean is None else f"{mean:.1f}", refresh=False
        )
        self._last = (now, step, stats)

    def save_loss_history(self, path: Path | None = None) -> Path:
        path = path or self.run.plots / "loss_history.png"
        save_figure(loss_history_figure(self.loss_history, self.loss_times, title=str(self.run.path.name)), path)
        return path

    def close(self) -> None:
        self.bar.close()
        self.writer.flush()
        self.writer.close()
        self.log.close()
