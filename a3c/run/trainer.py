"""The main process of a run, from a resolved run (a3c/run/resolve.py: settings, env spec and resume checkpoint,
checked): builds the global model, the shared optimizer and the backend (a3c/run/backends: the coordinator, restored
from the checkpoint with --resume, and the launcher), starts the workers under a Supervisor (a3c/run/supervisor.py:
restarts of dead or hung workers), streams what they publish to TensorBoard (a3c/record/dashboard.py), checkpoints, and
shuts everything down. It reaches the workers only through the backend's interfaces.

Shutdown is one path for every ending (total steps, solved, a stop asked for by ``on_eval`` (a3c.tune's pruner), a fatal
worker failure, too many non-finite updates, Ctrl-C, SIGTERM, a file of the run directory that cannot be written): tell
the workers to stop, give them JOIN_TIMEOUT_S to finish their update, terminate the stragglers, then the final
checkpoint, summary.json, TensorBoard and the figure. A second Ctrl-C (or SIGTERM) during that kills the workers and
exits at once (a3c/run/shutdown.py: Signals).

A write to the run directory that fails (a full disk: a3c.record.run_dir.RunDirWriteError, raised by every writer of
this process) ends the run: the shutdown above, whose own writes are each attempted and, where they fail too, reported
(``WriteFailures``, a3c/run/shutdown.py), then one last line naming the file, the reason and the fix, and exit code 1.
The checkpoints on disk stay loadable (they are written atomically), and the final one is not written after episodes.csv
lost rows (it would count rows the file does not have).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.multiprocessing as mp
from tqdm import tqdm

from a3c.learn.objectives import OBJECTIVES
from a3c.learn.update.paths import choose as choose_update_path
from a3c.record.checkpoint import LATEST, CheckpointSchedule, rng_state, save_checkpoint, set_rng_state
from a3c.record.dashboard import Dashboard
from a3c.record.model_card import write_model_card
from a3c.record.resume import dropped_episodes_note, elapsed_wall_time, lr_schedule_note, trim_episode_log_counting
from a3c.record.rows import Stat, update_summary
from a3c.record.run_dir import RunDirectory, RunDirWriteError, final_line, round_return, writing
from a3c.record.run_lock import RunLock
from a3c.record.tensorboard_server import TensorBoardServer
from a3c.run.backends import Coordinator, Launcher
from a3c.run.backends.serial import SerialLauncher
from a3c.run.backends.shared_memory import ProcessLauncher, SharedMemoryCoordinator, create_shared_run
from a3c.run.evaluation import EvalResult, Evaluation, evaluation_summary, past_evaluations
from a3c.run.evaluator import EVALUATOR_PROCESS, EvalChannel, Evaluator, evaluator_main
from a3c.run.resolve import ResolvedRun, start_fork_server
from a3c.run.shutdown import Signals, WriteFailures
from a3c.run.supervisor import Supervisor
from a3c.run.threads import one_native_thread, restore_environment
from a3c.run.worker import RANK_ENV, Worker, worker_main
from a3c.spec.errors import UserError
from a3c.spec.seeding import WorkerSeeds
from a3c.spec.wording import count

TICK_S = 0.25  # dashboard period: TensorBoard gets new points at least once a second
# the period with --stop-when-solved / --stop-at: the solve is seen within this of its episode's publication, and the
# workers stop at their next update (a 0.25 s look let 2,752-32,064 steps run past the solve on CartPole)
SOLVE_TICK_S = 0.005
JOIN_TIMEOUT_S = 5.0  # for all workers together to finish their update after a stop; then they are terminated
EXIT_FAILED = 1


# on_eval: (the global step of the weights evaluated, the result: mean_return, std_return, mean_length, episodes) ->
# None to go on, or a reason to stop the run (summary.json's stop_reason; exit code 0)
EvalCallback = Callable[[int, dict[str, float]], str | None]


class Trainer:
    def __init__(self, run: ResolvedRun, started_at: float | None = None, on_eval: EvalCallback | None = None) -> None:
        """``run``: the resolved run (a3c.run.resolve.resolve_run): its config with the worker count resolved, the
        env's spec, and the checkpoint a resumed run goes on from, all checked already; nothing is validated or read
        again here. ``started_at``: when the command started (time.time()), the origin of summary.json's startup_s;
        by default, now. ``on_eval``: called with each evaluation's result once it is recorded (eval.csv); a reason
        returned stops the run as --stop-when-solved does (a3c.tune's pruner: "pruned")."""
        self.started_at = time.time() if started_at is None else started_at
        self.on_eval = on_eval
        self.stop_asked: str | None = None  # the reason on_eval gave to stop
        if not isinstance(run.config.workers, int):
            raise TypeError("the Trainer takes a resolved run: resolve --workers auto first (resolve_run)")
        self.config, self.spec, self.resume = run.config, run.spec, run.resume
        self.workers = run.config.workers
        # sessions of this run before this one (a resume is the next session: its workers get fresh seeds)
        self.session = run.session
        self.supervisor: Supervisor | None = None
        self.evaluation: Evaluation | None = None  # --eval-every (a3c.run.evaluation)
        # summary.json's evaluation entries where this session evaluates nothing (a resume's: those before it)
        self.past_evaluations: dict[str, Any] = evaluation_summary(0)
        self.run_dir: Path | None = None  # set once the run directory exists (a3c.api reads it)
        self.lock: RunLock | None = None  # this process's hold on the run directory, until run() returns
        self.tracker: Any = None  # --track's W&B run (a3c.record.tracking.WandbTracker), once started
        self.tensorboard: TensorBoardServer | None = None
        self.ray: Any = None  # the Ray backend's connection (a3c.run.backends.ray.backend.RayBackend), when in use
        self.wall_time_before = 0.0  # the run's wall time before this session (set by run() from the checkpoint)
        # the first SIGINT/SIGTERM this session received, also when it came as the run was ending anyway (exit code
        # 0: the run completed): a caller that runs trainers in turn (a3c.tune) must not start another after it
        self.signal_received: int | None = None
        # what the serial backend changes in this process for a run (thread limits, A3C_WORKER_RANK), undone after it
        self.process_state = ExitStack()

    def _kill_children(self) -> None:
        if self.supervisor is not None:
            self.supervisor.kill_all()
        if self.evaluation is not None:
            self.evaluation.kill_all()
        process = self.tensorboard.process if self.tensorboard is not None else None
        if process is not None:
            try:
                process.kill()
            except OSError:
                pass

    def run(self) -> int:
        """Train until total_steps (or solved, with --stop-when-solved); returns the process exit code."""
        signals = Signals(self._kill_children)
        try:
            return self._run(signals)
        finally:
            try:
                self.signal_received = signals.received
                signals.restore()
                if self.ray is not None:
                    self.ray.close()  # after the final checkpoint: the server held the state it saved
            finally:  # last, whatever happened before: a run directory held by this process is let go
                self.process_state.close()
                if self.lock is not None:
                    self.lock.release()

    def _run(self, signals: Signals) -> int:
        cfg, spec, resume = self.config, self.spec, self.resume
        start = time.time()
        if resume is not None:  # this process alone trains the run from here on (a3c.record.run_lock)
            assert cfg.resume is not None, "a resume's checkpoint comes from --resume RUN_DIR"
            self.lock = RunLock(cfg.resume)
            self.lock.hold()  # (resolve_run probed it already: this is for a process that came in between)
        if cfg.backend == "ray":
            # first, so that a cluster that cannot be reached leaves no run directory behind: the global model, the
            # optimizer and the episode board live in a Ray actor (a3c/run/backends/ray/server.py)
            from a3c.run.backends.ray.backend import RayBackend

            self.ray = RayBackend.start(cfg, spec)
        kept_episodes: list[dict[str, float]] = []
        if resume is None:
            run = RunDirectory.create(cfg)
            self.lock = RunLock(run.path)
            try:
                self.lock.hold(new=True)
            except UserError:  # (another process's run: only the folders this start made go)
                run.remove_made()
                raise
        else:
            assert cfg.resume is not None, "a resume's checkpoint comes from --resume RUN_DIR"
            run = RunDirectory(Path(cfg.resume))
            try:  # a resume onto a full disk ends here, in one line, before any process starts
                with writing("checkpoints/ and plots/"):
                    run.checkpoints.mkdir(exist_ok=True)
                    run.plots.mkdir(exist_ok=True)
                with writing("episodes.csv"):
                    kept_episodes, dropped = trim_episode_log_counting(
                        run.episodes_csv, resume["episodes_written"].numpy()
                    )
            except RunDirWriteError as err:
                print(err.line(run.path, resumable=True), file=sys.stderr)
                return EXIT_FAILED
            note = dropped_episodes_note(dropped, int(resume["global_step"]))
            if note is not None:
                print(note, file=sys.stderr)
        # The run's wall time goes on across sessions (episodes.csv's and eval.csv's wall_time, solved_at_s, the
        # checkpoints' wall_time_s): its origin is this session's start set back by the time the run had run by the
        # checkpoint. ``start`` stays this session's own (its wall time and steps/s in summary.json).
        self.wall_time_before = 0.0 if resume is None else elapsed_wall_time(resume, kept_episodes)
        self.run_start = start - self.wall_time_before
        self.run_dir = run.path
        try:
            run.write_config(cfg)
        except RunDirWriteError as err:  # before any process started: nothing to shut down
            print(err.line(run.path, resumable=resume is not None), file=sys.stderr)
            return EXIT_FAILED
        tracker = None
        with self._setting_up(run, new=resume is None):
            if cfg.track:  # --track: W&B beside TensorBoard (a3c/record/tracking.py)
                from a3c.record.tracking import WandbTracker

                tracker = self.tracker = WandbTracker.start(cfg, run.path)
            self.tensorboard = TensorBoardServer.start_for(run.path, cfg.tensorboard)  # --tensorboard; None when off
            if self.ray is not None:
                self.model, self.dist = self.ray.model, self.ray.dist
                coordinator: Coordinator = self.ray.coordinator
            else:
                shared, self.model, self.dist = create_shared_run(spec, cfg)  # (a model too big: a UserError)
                coordinator = SharedMemoryCoordinator(shared)
        self.coordinator = coordinator
        # the update path every worker takes (a3c.learn.update.paths: they choose it as this process does, in the same
        # environment), and the one line that says so where it is off the fast paths, before training
        update_path = choose_update_path(cfg, self.model, self.dist)
        self.update_path = update_path.path.name
        if update_path.notice is not None:
            print(update_path.notice, file=sys.stderr)
        self.resumed_from_step: int | None = None
        self.final_checkpoint_step: int | None = None  # the global step of the run's final checkpoints/latest.pt
        self.restarts_before = 0
        if resume is not None:
            coordinator.restore(resume)
            self.resumed_from_step = resumed_from = int(resume["global_step"])
            self.restarts_before = int(resume["restarts"])
            set_rng_state(resume["rng"])
        launcher = self._launcher(coordinator, self.run_start)
        supervisor = self.supervisor = Supervisor(
            launcher, self.workers, coordinator.stats, cfg.worker_timeout, cfg.max_restarts
        )
        dashboard: Dashboard | None = None
        summary: dict[str, Any] | None = None
        exit_code, reason = 0, "total_steps"
        failures = WriteFailures()
        # where the dashboard's first perf point measures from: this session's start, before any worker stepped
        perf_origin = (time.time(), coordinator.global_step(), coordinator.stats().copy())
        try:
            supervisor.start_all()
            self.evaluation = self._evaluation(run, self.run_start)
            if resume is None:
                print(f"a3c: run directory {run.path}", file=sys.stderr)
            else:
                # the backend is the checkpoint's unless --backend was given: said where it is not the default
                backend = "" if cfg.backend == "shared-memory" else f" on the {cfg.backend} backend"
                print(
                    f"a3c: resuming {run.path} at step {self.resumed_from_step:,} with "
                    f"{count(self.workers, 'worker')}{backend}",
                    file=sys.stderr,
                )
                saved = resume["config"]
                note = lr_schedule_note(
                    cfg,
                    int(saved.get("total_steps", cfg.total_steps)),
                    step=resume["global_step"],
                    previous_lr=float(saved.get("lr", cfg.lr)),
                    previous_schedule=str(saved.get("lr_schedule", cfg.lr_schedule)),
                )
                if note is not None:
                    print(note, file=sys.stderr)
            dashboard = Dashboard(
                run,
                coordinator,
                cfg.total_steps,
                cfg.stop_threshold(spec.reward_threshold),
                start,
                interval=coordinator.interval,
                points_per_s=cfg.tb_episode_points_per_s,
                tracker=tracker,
                origin=perf_origin,
                terms=OBJECTIVES[cfg.algo].terms,
            )
            if resume is not None:
                # TensorBoard events from just past the checkpoint's step on are purged: they were written after
                # the checkpoint, before a crash, and will be written again
                dashboard.resume(kept_episodes, resumed_from + 1, self.restarts_before)
            exit_code, reason = self._supervise(dashboard, supervisor, signals)
        except RunDirWriteError as err:  # a file of the run directory could not be written (see the module docstring)
            failures.add(err)
        finally:
            # one shutdown for every ending, an exception (a bug) included; a failed write here is reported, not raised
            coordinator.request_stop()
            interrupted = signals.received is not None or dashboard is None or failures.first is not None
            if self.evaluation is not None and interrupted:
                self.evaluation.request_stop()  # winds down alongside the workers, not after them
            supervisor.join(JOIN_TIMEOUT_S)
            if self.evaluation is not None:  # the evaluation in flight is recorded, unless the run was interrupted
                log = dashboard.add_scalars if dashboard is not None else (lambda step, values: None)
                stopped = lambda: signals.received is not None  # noqa: E731  (a Ctrl-C ends the wait for it)
                failures.attempt("eval.csv", self.evaluation.finish, log, not interrupted, stopped)
            if dashboard is not None:
                dashboard.restarts = self.restarts_before + supervisor.restarts
                if failures.first is None:  # (after a failed write, nothing more is read: the disk is full)
                    failures.attempt("episodes.csv", dashboard.tick)
                wall = time.time() - start
                if self.final_checkpoint_step is None:  # (a run stopped by a solve has its final checkpoint)
                    self.final_checkpoint_step = failures.attempt(
                        f"checkpoints/{LATEST}", self.checkpoint, run, dashboard, (LATEST,)
                    )
                if failures.first is not None and exit_code == 0:
                    exit_code, reason = EXIT_FAILED, failures.reason() or reason
                summary = self.summary(dashboard, wall, reason)
                failures.attempt("summary.json", run.write_summary, summary)
                failures.attempt("README.md", write_model_card, run.path, summary)  # the model card
                failures.attempt("the TensorBoard hparams", dashboard.write_hparams, cfg.to_dict(), summary)
                failures.attempt("the loss-history figure", dashboard.save_loss_history)
                failures.attempt(None, dashboard.close, summary["steps_per_s"])  # (episodes.csv or the event files)
            if failures.first is not None and exit_code == 0:  # (a write after the summary, or before the dashboard)
                exit_code = EXIT_FAILED
            if dashboard is None and tracker is not None:  # (the dashboard finishes it otherwise)
                tracker.finish()
            if self.tensorboard is not None:
                self.tensorboard.stop(say_if_unseen=True)
        if summary is not None:
            print(final_line(summary, run.path, budget=cfg.total_steps), file=sys.stderr)
        failures.report(run)  # the run's last line when a write failed
        return exit_code

    @contextmanager
    def _setting_up(self, run: RunDirectory, new: bool) -> Iterator[None]:
        """Before any worker starts: a UserError here (a tracker that refuses, a model too big for memory) stops what
        was started (TensorBoard) and, for a new run, leaves its directory as it was: nothing ran, and the same
        command, once mended, must not be refused as "not empty"."""
        try:
            yield
        except UserError:
            if self.tracker is not None:  # (marked failed: it did not end as planned) before its folder goes
                self.tracker.finish()
            if self.tensorboard is not None:
                self.tensorboard.stop()
                self.tensorboard = None
            if new:
                run.discard_new()
            raise

    def _supervise(self, dashboard: Dashboard, supervisor: Supervisor, signals: Signals) -> tuple[int, str]:
        """The main loop: publish, checkpoint, watch the workers; returns (exit code, stop reason)."""
        cfg, coordinator, run = self.config, self.coordinator, dashboard.run
        schedule = CheckpointSchedule.from_config(cfg, coordinator.global_step())  # steps or seconds, retention
        reason = "total_steps"
        tick_s = SOLVE_TICK_S if cfg.stops_at_threshold else TICK_S
        while True:
            supervisor.launcher.wait(tick_s)  # processes run by themselves; the serial backend runs them here
            if signals.received is not None:
                name = signal.Signals(signals.received).name
                return 128 + signals.received, "interrupted" if name == "SIGINT" else f"terminated ({name})"
            dashboard.restarts = self.restarts_before + supervisor.restarts
            dashboard.tick()
            coordinator.next_interval()
            if cfg.stops_at_threshold and dashboard.solved() and reason != "solved":
                reason = "solved"
                coordinator.request_stop()
                # the weights of this moment, a few updates after the episode that met the threshold, are the run's
                # final checkpoint (what a3c.load(run) and --resume take): not those of the updates still in flight
                self.final_checkpoint_step = self.checkpoint(run, dashboard, (LATEST,))
            step = coordinator.global_step()
            if reason != "solved" and schedule.due(step):  # (after a solve, latest.pt stays the solve's)
                # step-N.pt is named from the snapshot's own step: the workers ran on after ``step`` was read
                written = self.checkpoint(run, dashboard, schedule.files)
                if written is not None:
                    schedule.written(run.checkpoints, written)  # keeps the newest --keep-checkpoints step files
            in_row = coordinator.stats()[:, Stat.SKIPPED_IN_ROW]
            if in_row.max() >= cfg.max_skipped_in_row:
                rank = int(in_row.argmax())
                print(
                    f"a3c: error: worker {rank} skipped {int(in_row[rank])} updates in a row for a non-finite loss or "
                    "gradient (NaN/inf in observations, rewards or the model); stopping before it poisons the shared "
                    "model. Check the env's outputs, lower --lr, or raise --max-skipped-in-row",
                    file=sys.stderr,
                )
                return EXIT_FAILED, f"worker {rank}: {int(in_row[rank])} non-finite updates in a row"
            failure = supervisor.poll(stopping=coordinator.should_stop())
            if failure is not None:
                print(
                    f"a3c: error: {failure.describe()}, and it has used its {cfg.max_restarts} restarts "
                    "(--max-restarts); stopping the run",
                    file=sys.stderr,
                )
                if failure.traceback:
                    print(f"a3c: worker {failure.rank}'s traceback:\n{failure.traceback.rstrip()}", file=sys.stderr)
                return EXIT_FAILED, f"worker {failure.rank} {failure.cause}"
            if self.evaluation is not None:
                self.evaluation.tick(step, lambda: self._payload(coordinator.snapshot()), dashboard.add_scalars)
                if self.stop_asked is not None and reason != self.stop_asked:
                    reason = self.stop_asked
                    coordinator.request_stop()
            if supervisor.all_done():
                return 0, reason

    # -- backends ------------------------------------------------------------------------------------------------
    def _launcher(self, coordinator: Coordinator, start: float) -> Launcher:
        """``start``: the origin of the workers' episode wall times (the run's, across sessions)."""
        cfg, spec, session = self.config, self.spec, self.session
        if cfg.backend == "serial":
            # the workers' small passes gain nothing from intra-op or BLAS threads, which spin against each other
            # and against the rest of the machine (10-50x slower on a busy 2-core machine); as in a worker process,
            # for the run only: this is the caller's process (a notebook's), left as it was when run() returns
            self.process_state.enter_context(one_native_thread())
            # (each Worker sets A3C_WORKER_RANK in the process it runs in)
            self.process_state.callback(restore_environment, {RANK_ENV: os.environ.get(RANK_ENV)})
            return SerialLauncher(
                lambda rank, incarnation: Worker(
                    rank, coordinator.channel(rank), cfg, spec, start, WorkerSeeds(cfg.seed, session, rank, incarnation)
                )
            )
        if cfg.backend == "ray":
            return self.ray.launcher(
                lambda rank: (rank, coordinator.channel(rank), cfg, spec, start, session), cfg.ray_cpus_per_worker
            )
        method = cfg.resolved_start_method()
        if method == "forkserver":
            start_fork_server(
                cfg
            )  # a3c.run.preload imported once, in the server (already running if train.py started it)
        elif method == "fork":
            import a3c.run.preload  # noqa: F401  (the same, here: workers are forked from this process)
        return ProcessLauncher(
            mp.get_context(method),
            worker_main,
            lambda rank: (rank, coordinator.channel(rank), cfg, spec, start, session),
        )

    def _evaluation(self, run: RunDirectory, start: float) -> Evaluation | None:
        """The evaluator (--eval-every): a supervised process, or a call in this process under the serial backend.
        None when the run evaluates nothing (off, or over before its first evaluation step)."""
        cfg, spec = self.config, self.spec
        step = self.coordinator.global_step()
        if not cfg.evaluates or (step // cfg.eval_every + 1) * cfg.eval_every > cfg.total_steps:
            if self.resume is not None:  # eval.csv trimmed to the checkpoint all the same, its evaluations reported
                kept, best = past_evaluations(run.path / "eval.csv", run.checkpoints, step)
                self.past_evaluations = evaluation_summary(len(kept), kept[-1] if kept else None, best)
            return None
        stats_shapes = {key: (spec.obs_shape if key == "obs_stats" else ()) for key in self.coordinator.running_stats()}
        channel = EvalChannel(sum(p.numel() for p in self.model.parameters()), stats_shapes=stats_shapes)
        supervisor, inline = None, None
        if cfg.backend == "serial":
            inline = Evaluator(channel, cfg, spec)
        else:
            launcher = ProcessLauncher(
                mp.get_context(cfg.resolved_start_method()),
                evaluator_main,
                lambda rank: (channel, cfg, spec),
                name=lambda rank: EVALUATOR_PROCESS,
            )
            stats = channel.stats.numpy
            supervisor = Supervisor(launcher, 1, stats, cfg.worker_timeout, cfg.max_restarts, role="evaluator")
        return Evaluation(
            cfg,
            channel,
            run.checkpoints,
            run.path / "eval.csv",
            step,
            start,
            supervisor=supervisor,
            inline=inline,
            resumed=self.resume is not None,
            print_line=lambda line: tqdm.write(line, file=sys.stderr),
            on_result=self._evaluated if self.on_eval is not None else None,
        )

    def _evaluated(self, result: EvalResult) -> None:
        """An evaluation recorded: on_eval's answer; the first reason to stop is kept (the main loop stops on it)."""
        assert self.on_eval is not None
        why = self.on_eval(result.step, dict(result.values))
        if why is not None and self.stop_asked is None:
            self.stop_asked = why

    # -- checkpoints -------------------------------------------------------------------------------------------
    def checkpoint(
        self, run: RunDirectory, dashboard: Dashboard, names: tuple[str, ...] | Callable[[int], tuple[str, ...]]
    ) -> int:
        """Snapshot the run and write it under each of ``names`` (atomically), or of ``names(step)`` for a function
        of the snapshot's global step (what names step-N.pt after the step it holds). Taken right after a dashboard
        tick: the episode counters saved are those of the episodes logged to episodes.csv (synced to disk first), so
        a resume from this file goes on exactly where the log stops. Returns the global step written. A checkpoint
        that cannot be written (disk full), or an episodes.csv that lost rows, raises RunDirWriteError: the previous
        checkpoint stays in place, and the run stops."""
        dashboard.log.sync()
        payload = self._payload(self.coordinator.snapshot())
        step = int(payload["global_step"])
        for name in names(step) if callable(names) else names:
            try:
                save_checkpoint(run.checkpoints / name, payload)
            except OSError as err:  # the previous file stays in place; the run stops (see the module docstring)
                raise RunDirWriteError(f"checkpoints/{name}", err) from err
        dashboard.checkpointed(step)
        return step

    def _payload(self, snapshot: dict[str, Any]) -> dict[str, Any]:
        """A checkpoint: the backend's snapshot and what the main process knows (restarts, config, spaces, RNG)."""
        # the snapshot's per-rank vectors may cover ranks this session does not run (a3c.run.backends: snapshot): none
        # of their incarnations was used in this session
        supervisor = self.supervisor
        assert supervisor is not None, "checkpoints are taken once the workers are supervised"
        incarnations = np.zeros(len(snapshot["episodes_written"]), dtype=np.int64)
        incarnations[: self.workers] = supervisor.incarnations()
        return {
            **snapshot,
            "incarnations": torch.from_numpy(incarnations),
            "wall_time_s": time.time() - self.run_start,  # the run's wall time so far, what a resume goes on from
            "restarts": self.restarts_before + supervisor.restarts,
            "session": self.session,
            "obs_dim": self.spec.obs_dim,
            "n_actions": self.dist.param_dim,
            "spaces": self.spec.describe(),
            "env_spec": self.spec.to_data(),  # what a3c.load builds the agent from, without making the env
            "config": self.config.to_dict(),
            "rng": rng_state(),
        }

    def summary(self, dashboard: Dashboard, wall: float, reason: str) -> dict[str, Any]:
        """summary.json. ``wall``: this session's wall time; the run's (wall_time_s) adds the earlier sessions'."""
        stats = self.coordinator.stats()
        first_steps = stats[:, Stat.FIRST_STEP_TIME]
        started = first_steps[first_steps > 0]
        startup_s = float(started.max() - self.started_at) if len(started) == len(first_steps) else None
        # the training window: from the first env step to the end of the last update (the last heartbeat), not to
        # when this loop noticed that the workers had finished (up to TICK_S later, plus the join)
        last_beat = float(stats[:, Stat.HEARTBEAT].max())
        end_s = min(wall, last_beat - dashboard.start_time) if last_beat > 0 else wall
        train_s = end_s - (float(started.min() - dashboard.start_time) if len(started) else 0.0)
        steps = self.coordinator.global_step()
        session_steps = steps - (self.resumed_from_step or 0)
        best = dashboard.best_window
        # (step, wall time, mean) where this session met the threshold, for a run that stopped there
        met = dashboard.threshold_met if reason == "solved" else None
        return {
            "env": self.config.env,
            "workers": self.workers,
            "envs_per_worker": self.config.envs_per_worker,
            "total_steps": steps,
            "wall_time_s": self.wall_time_before + wall,  # the run's, all sessions (episodes.csv's wall_time axis)
            "session_wall_time_s": wall,
            "steps_per_s": session_steps / train_s if train_s > 0 else 0.0,
            "episodes": dashboard.episodes,
            # the last 100 episodes' mean; for a run stopped by a solve, the window that met the threshold (what its
            # final checkpoint was taken after: the episodes the workers finished while stopping are in episodes.csv)
            "mean_return_100": round_return(dashboard.mean_return_100() if met is None else met[2]),
            "best_mean_return_100": None if best is None else round_return(best[0]),
            "best_mean_return_100_at_step": None if best is None else best[1],
            "solved_at_step": dashboard.solved_at_step,  # the run's first solve (an earlier session's, after a resume)
            "solved_at_s": dashboard.solved_at_s,
            "stopped_solved_at_step": None if met is None else met[0],  # this session's, where it stopped
            "stopped_solved_at_s": None if met is None else met[1],
            "final_checkpoint_step": self.final_checkpoint_step,
            "training_time_s": train_s,
            "startup_s": startup_s,
            # the update path the workers took (a3c.learn.update.paths: mlp+kernel, ..., reference)
            "update_path": self.update_path,
            "algo": self.config.algo,  # the objective (--algo): a3c or ppo
            "restarts": self.restarts_before + (self.supervisor.restarts if self.supervisor else 0),
            "skipped_updates": int(stats[:, Stat.SKIPPED].sum()),
            "nonfinite_samples": int(stats[:, Stat.NONFINITE_SAMPLES].sum()),
            "updates": int(stats[:, Stat.UPDATES].sum()),
            **update_summary(stats, OBJECTIVES[self.config.algo].terms),
            "lost_episodes": self.coordinator.lost,
            "stop_reason": reason,
            "resumed_from_step": self.resumed_from_step,
            **(self.evaluation.summary() if self.evaluation is not None else self.past_evaluations),
        }
