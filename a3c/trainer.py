"""The main process of a run: builds the global model, the shared optimizer and the episode board (restored from a
checkpoint with --resume), starts the worker processes under a Supervisor (a3c/supervisor.py: restarts of dead or
hung workers), streams the board to TensorBoard, checkpoints, and shuts everything down.

Shutdown is one path for every ending (total steps, solved, a fatal worker failure, too many non-finite updates,
Ctrl-C, SIGTERM): tell the workers to stop, give them JOIN_TIMEOUT_S to finish their update, terminate the
stragglers, then the final checkpoint, summary.json, TensorBoard and the figure. A second Ctrl-C (or SIGTERM) during
that kills the workers and exits at once (see _Signals).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.multiprocessing as mp

from a3c.backends.shared_memory import SharedMemoryStore
from a3c.board import BoardReader, EpisodeBoard, Stat
from a3c.checkpoint import (
    LATEST,
    CheckpointSchedule,
    check_compatible,
    load_resume,
    rng_state,
    save_checkpoint,
    set_rng_state,
    trim_episode_log,
)
from a3c.config import Config
from a3c.dashboard import Dashboard
from a3c.environment import EnvSpec
from a3c.model import ActorCritic, flatten_parameters
from a3c.optim import make_optimizer
from a3c.preflight import preflight, start_fork_server
from a3c.run_dir import RunDirectory
from a3c.supervisor import Supervisor
from a3c.tensorboard_server import TensorBoardServer
from a3c.worker import worker_main

TICK_S = 0.25  # dashboard period: TensorBoard gets new points at least once a second
JOIN_TIMEOUT_S = 5.0  # for all workers together to finish their update after a stop; then they are terminated
# per-worker stats that count over the whole run (restored on resume); the others are gauges of a live process
CUMULATIVE_STATS = (Stat.UPDATES, Stat.SKIPPED, Stat.GRAD_NORM_SUM, Stat.LAG_SUM)
EXIT_FAILED = 1


class _Signals:
    """SIGINT and SIGTERM in the main process. The first one only sets ``received`` (the main loop then shuts down
    in order: exit code 128 + signal number); a second one kills every worker and exits at once. Workers ignore
    SIGINT (a3c.worker), so a Ctrl-C to the whole process group reaches only this process's handler."""

    def __init__(self, emergency: Any) -> None:
        self.received: int | None = None
        self.emergency = emergency  # kills the children; called from the handler
        self.previous: dict[int, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self.previous[sig] = signal.signal(sig, self._handle)

    def _handle(self, signum: int, frame: Any) -> None:
        if self.received is None:
            self.received = signum
            name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
            os.write(2, f"\na3c: {name}: stopping after the current updates (Ctrl-C again to exit at once)\n".encode())
            return
        self.emergency()
        os.write(2, b"a3c: second signal: workers killed, exiting without the final checkpoint\n")
        os._exit(128 + signum)

    def restore(self) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)


class Trainer:
    def __init__(self, config: Config, started_at: float | None = None, spec: EnvSpec | None = None) -> None:
        """``started_at``: when the command started (time.time()), the origin of summary.json's startup_s; by
        default, now. ``spec``: the result of ``preflight(config)`` when the caller ran it already."""
        self.started_at = time.time() if started_at is None else started_at
        # everything a user can get wrong is checked here, before any process starts
        self.spec = spec if spec is not None else preflight(config)
        self.config = config
        self.resume = load_resume(config.resume) if config.resume else None
        if self.resume is not None:
            n_params = sum(
                p.numel() for p in ActorCritic(self.spec.obs_dim, self.spec.n_actions, config.hidden_sizes).parameters()
            )
            check_compatible(
                self.resume, self.spec.obs_dim, self.spec.n_actions, n_params, f"{config.resume}/checkpoints/{LATEST}"
            )
        self.supervisor: Supervisor | None = None
        self.tensorboard: TensorBoardServer | None = None

    def _kill_children(self) -> None:
        if self.supervisor is not None:
            self.supervisor.kill_all()
        if self.tensorboard is not None and getattr(self.tensorboard, "process", None) is not None:
            try:
                self.tensorboard.process.kill()
            except OSError:
                pass

    def run(self) -> int:
        """Train until total_steps (or solved, with --stop-when-solved); returns the process exit code."""
        signals = _Signals(self._kill_children)
        try:
            return self._run(signals)
        finally:
            signals.restore()

    def _run(self, signals: _Signals) -> int:
        cfg, spec, resume = self.config, self.spec, self.resume
        start = time.time()
        if resume is None:
            run = RunDirectory.create(cfg)
            kept_episodes: list[dict[str, float]] = []
        else:
            run = RunDirectory(Path(cfg.resume))
            run.checkpoints.mkdir(exist_ok=True)
            run.plots.mkdir(exist_ok=True)
            kept_episodes = trim_episode_log(run.episodes_csv, resume["episodes_written"].numpy())
        run.write_config(cfg)
        self.tensorboard = TensorBoardServer.start_for(run.path, cfg.tensorboard)  # --tensorboard; None when off
        torch.manual_seed(cfg.seed)
        self.model = ActorCritic(spec.obs_dim, spec.n_actions, cfg.hidden_sizes)
        params, _ = flatten_parameters(self.model, shared=True)
        self.optimizer = make_optimizer(cfg.optimizer, params, cfg.lr, slots=cfg.workers)
        board = EpisodeBoard(cfg.workers)
        self.store = SharedMemoryStore(params, self.optimizer, board, cfg.total_steps)
        self.resumed_from_step = None
        self.restarts_before = 0
        incarnations = None
        if resume is not None:
            incarnations = self._restore(resume)
        ctx = mp.get_context(cfg.resolved_start_method())
        if cfg.resolved_start_method() == "forkserver":
            start_fork_server(cfg)  # a3c.preload imported once, in the server (already running if train.py started it)
        elif cfg.resolved_start_method() == "fork":
            import a3c.preload  # noqa: F401  (the same, here: workers are forked from this process)
        supervisor = self.supervisor = Supervisor(
            ctx,
            worker_main,
            (self.store, cfg, spec, start),
            cfg.workers,
            board.stats.numpy(),
            cfg.worker_timeout,
            cfg.max_restarts,
            incarnations=incarnations,
        )
        dashboard: Dashboard | None = None
        exit_code, reason = 0, "total_steps"
        try:
            supervisor.start_all()
            if resume is None:
                print(f"a3c: run directory {run.path}", file=sys.stderr)
            else:
                print(f"a3c: resuming {run.path} at step {self.resumed_from_step:,}", file=sys.stderr)
            dashboard = Dashboard(
                run,
                board,
                cfg.total_steps,
                spec.reward_threshold,
                start,
                interval=self.store.interval,
                points_per_s=cfg.tb_episode_points_per_s,  # issue 15
            )
            if resume is not None:
                self._continue_dashboard(dashboard, resume, kept_episodes)
            exit_code, reason = self._supervise(dashboard, supervisor, signals)
        finally:
            # one shutdown for every ending, an exception (a bug) included
            self.store.request_stop()
            supervisor.join(JOIN_TIMEOUT_S)
            if dashboard is not None:
                dashboard.restarts = self.restarts_before + supervisor.restarts
                dashboard.tick()
                wall = time.time() - start
                self.checkpoint(run, dashboard, (LATEST,))
                summary = self.summary(dashboard, board, wall, reason)
                run.write_summary(summary)
                dashboard.write_hparams(cfg.to_dict(), summary)
                dashboard.save_loss_history()
                dashboard.close()
            if self.tensorboard is not None:
                self.tensorboard.stop()
        print(
            f"a3c: {summary['total_steps']} steps in {summary['wall_time_s']:.1f} s "
            f"({summary['steps_per_s']:,.0f} steps/s), {summary['episodes']} episodes, "
            f"mean return (last 100) {summary['mean_return_100']}; {run.path}",
            file=sys.stderr,
        )
        return exit_code

    def _supervise(self, dashboard: Dashboard, supervisor: Supervisor, signals: _Signals) -> tuple[int, str]:
        """The main loop: publish, checkpoint, watch the workers; returns (exit code, stop reason)."""
        cfg, board, run = self.config, self.store.board, dashboard.run
        stats = board.stats.numpy()
        schedule = CheckpointSchedule.from_config(cfg, board.global_step())  # issue 15: steps or seconds, retention
        reason = "total_steps"
        while True:
            time.sleep(TICK_S)
            if signals.received is not None:
                name = signal.Signals(signals.received).name
                return 128 + signals.received, "interrupted" if name == "SIGINT" else f"terminated ({name})"
            dashboard.restarts = self.restarts_before + supervisor.restarts
            dashboard.tick()
            self.store.next_interval()
            if cfg.stop_when_solved and dashboard.solved() and reason != "solved":
                reason = "solved"
                self.store.request_stop()
            step = board.global_step()
            names = schedule.due(step)  # issue 15
            if names:
                self.checkpoint(run, dashboard, names)
                schedule.written(run.checkpoints, step)  # issue 15: keeps the newest --keep-checkpoints step files
            in_row = stats[:, Stat.SKIPPED_IN_ROW]
            if in_row.max() >= cfg.max_skipped_in_row:
                rank = int(in_row.argmax())
                print(
                    f"a3c: error: worker {rank} skipped {int(in_row[rank])} updates in a row for a non-finite loss or "
                    "gradient (NaN/inf in observations, rewards or the model); stopping before it poisons the shared "
                    "model. Check the env's outputs, lower --lr, or raise --max-skipped-in-row",
                    file=sys.stderr,
                )
                return EXIT_FAILED, f"worker {rank}: {int(in_row[rank])} non-finite updates in a row"
            failure = supervisor.poll(stopping=self.store.should_stop())
            if failure is not None:
                print(
                    f"a3c: error: {failure.describe()}, and it has used its {cfg.max_restarts} restarts "
                    "(--max-restarts); stopping the run",
                    file=sys.stderr,
                )
                if failure.traceback:
                    print(f"a3c: worker {failure.rank}'s traceback:\n{failure.traceback.rstrip()}", file=sys.stderr)
                return EXIT_FAILED, f"worker {failure.rank} {failure.cause}"
            if supervisor.all_done():
                return 0, reason

    # -- checkpoints and resume ----------------------------------------------------------------------------------
    def checkpoint(self, run: RunDirectory, dashboard: Dashboard, names: tuple[str, ...]) -> None:
        """Snapshot the run and write it under each of ``names`` (atomically). Taken right after a dashboard tick:
        the episode counters saved are those of the episodes logged to episodes.csv, so a resume from this file
        goes on exactly where the log stops."""
        board = self.store.board
        supervisor = self.supervisor
        payload = {
            "model": self.store.params.clone(),
            "optimizer": self.optimizer.state_dict(),
            "global_step": board.global_step(),
            "worker_steps": board.steps.clone(),
            "episodes_written": torch.from_numpy(dashboard.reader.read.copy()),
            "worker_stats": board.stats.clone(),
            "incarnations": torch.from_numpy(supervisor.incarnations()),
            "restarts": self.restarts_before + supervisor.restarts,
            "obs_dim": self.spec.obs_dim,
            "n_actions": self.spec.n_actions,
            "config": self.config.to_dict(),
            "rng": rng_state(),
        }
        for name in names:
            save_checkpoint(run.checkpoints / name, payload)

    def _restore(self, payload: dict[str, Any]) -> np.ndarray:
        """Load the checkpoint into the freshly built shared state; returns the incarnations each rank has used.
        A resumed run may have another number of workers: ranks beyond the new count give their steps to rank 0
        (so the global step is exact) and their episode counters end; new ranks start at zero."""
        board, n = self.store.board, self.config.workers
        self.store.params.copy_(payload["model"])
        self.optimizer.load_state_dict(payload["optimizer"])
        steps = payload["worker_steps"].to(torch.int64)
        written = payload["episodes_written"].to(torch.int64)
        m = min(n, len(steps))
        board.steps[:m] = steps[:m]
        board.steps[0] += steps[m:].sum()
        board.written[:m] = written[:m]
        stats = payload["worker_stats"]
        for col in CUMULATIVE_STATS:
            board.stats[:m, col] = stats[:m, col]
        self.resumed_from_step = int(payload["global_step"])
        self.restarts_before = int(payload["restarts"])
        set_rng_state(payload["rng"])
        incarnations = np.zeros(n, dtype=np.int64)
        incarnations[:m] = payload["incarnations"][:m].numpy()
        return incarnations

    def _continue_dashboard(self, dashboard: Dashboard, payload: dict[str, Any], kept: list[dict[str, float]]) -> None:
        """Point the dashboard past what the earlier sessions logged: the board cursor at the restored counters,
        TensorBoard events from the checkpoint's step on purged (they were written after the checkpoint, before a
        crash, and will be written again), and the running statistics refilled from the kept episodes.csv rows."""
        dashboard.reader = BoardReader(self.store.board, start=self.store.board.written.numpy())
        dashboard.purge_from(self.resumed_from_step)  # issue 15: every event stream (the per-worker ones too)
        dashboard.restarts = self.restarts_before
        dashboard.episodes = len(kept)
        for row in kept:
            worker = int(row["worker"])
            dashboard.recent_returns.append(row["return"])
            dashboard.loss_history.add(worker, row["loss"])  # issue 15: the bounded history
            mean = dashboard.mean_return_100()
            if (
                dashboard.solved_at_step is None
                and dashboard.reward_threshold is not None
                and len(dashboard.recent_returns) == dashboard.recent_returns.maxlen
                and mean is not None
                and mean >= dashboard.reward_threshold
            ):
                dashboard.solved_at_step, dashboard.solved_at_s = int(row["global_step"]), row["wall_time"]

    def summary(self, dashboard: Dashboard, board: EpisodeBoard, wall: float, reason: str) -> dict[str, Any]:
        stats = board.stats.numpy()
        first_steps = stats[:, Stat.FIRST_STEP_TIME]
        started = first_steps[first_steps > 0]
        startup_s = float(started.max() - self.started_at) if len(started) == len(first_steps) else None
        # the training window: from the first env step to the end of the last update (the last heartbeat), not to
        # when this loop noticed that the workers had finished (up to TICK_S later, plus the join)
        last_beat = float(stats[:, Stat.HEARTBEAT].max())
        end_s = min(wall, last_beat - dashboard.start_time) if last_beat > 0 else wall
        train_s = end_s - (float(started.min() - dashboard.start_time) if len(started) else 0.0)
        steps = board.global_step()
        session_steps = steps - (self.resumed_from_step or 0)
        return {
            "env": self.config.env,
            "workers": self.config.workers,
            "envs_per_worker": self.config.envs_per_worker,
            "total_steps": steps,
            "wall_time_s": wall,
            "steps_per_s": session_steps / train_s if train_s > 0 else 0.0,
            "episodes": dashboard.episodes,
            "mean_return_100": dashboard.mean_return_100(),
            "solved_at_step": dashboard.solved_at_step,
            "solved_at_s": dashboard.solved_at_s,
            "startup_s": startup_s,
            "restarts": self.restarts_before + (self.supervisor.restarts if self.supervisor else 0),
            "skipped_updates": int(stats[:, Stat.SKIPPED].sum()),
            "updates": int(stats[:, Stat.UPDATES].sum()),
            "lost_episodes": dashboard.reader.lost,
            "stop_reason": reason,
            "resumed_from_step": self.resumed_from_step,
        }
