"""The main process of a run: builds the global model, the shared optimizer and the episode board, starts the
worker processes, supervises them, streams the board to TensorBoard, checkpoints, and shuts everything down."""

from __future__ import annotations

import sys
import time
from typing import Any

import torch
import torch.multiprocessing as mp

from a3c.backends.shared_memory import SharedMemoryStore
from a3c.board import EpisodeBoard, Stat
from a3c.checkpoint import save_checkpoint
from a3c.config import Config
from a3c.dashboard import Dashboard
from a3c.environment import describe_env
from a3c.model import ActorCritic, flatten_parameters
from a3c.optim import make_optimizer
from a3c.run_dir import RunDirectory
from a3c.tensorboard_server import TensorBoardServer
from a3c.worker import worker_main

TICK_S = 0.25  # dashboard period: TensorBoard gets new points at least once a second
JOIN_TIMEOUT_S = 5.0


class Trainer:
    def __init__(self, config: Config) -> None:
        self.config = config.validate()
        self.spec = describe_env(config.env, config.env_kwargs)  # validates the env before anything starts

    def run(self) -> int:
        """Train until total_steps (or solved, with --stop-when-solved); returns the process exit code."""
        cfg, spec = self.config, self.spec
        start = time.time()
        run = RunDirectory.create(cfg)
        run.write_config(cfg)
        tensorboard = TensorBoardServer.start_for(run.path, cfg.tensorboard)  # --tensorboard; None when off
        torch.manual_seed(cfg.seed)
        self.model = ActorCritic(spec.obs_dim, spec.n_actions, cfg.hidden_sizes)
        params, _ = flatten_parameters(self.model, shared=True)
        self.optimizer = make_optimizer(cfg.optimizer, params, cfg.lr, slots=cfg.workers)
        board = EpisodeBoard(cfg.workers)
        self.store = SharedMemoryStore(params, self.optimizer, board, cfg.total_steps)
        ctx = mp.get_context(cfg.resolved_start_method())
        if cfg.resolved_start_method() == "forkserver":
            ctx.set_forkserver_preload(["a3c.worker"])  # torch + gymnasium imported once, in the server
        processes = [
            ctx.Process(
                target=worker_main, args=(rank, self.store, cfg, spec, start), name=f"a3c-worker-{rank}", daemon=True
            )
            for rank in range(cfg.workers)
        ]
        for p in processes:
            p.start()
        print(f"a3c: run directory {run.path}", file=sys.stderr)
        dashboard = Dashboard(run, board, cfg.total_steps, spec.reward_threshold, start, interval=self.store.interval)
        exit_code, reason = 0, "total_steps"
        next_checkpoint = cfg.checkpoint_every or None
        try:
            while True:
                time.sleep(TICK_S)
                dashboard.tick()
                self.store.next_interval()
                if cfg.stop_when_solved and dashboard.solved():
                    reason = "solved"
                    self.store.request_stop()
                step = board.global_step()
                if next_checkpoint is not None and step >= next_checkpoint:
                    self.checkpoint(run, f"step-{step}.pt")
                    next_checkpoint = (step // cfg.checkpoint_every + 1) * cfg.checkpoint_every
                failed = [p for p in processes if p.exitcode not in (None, 0)]
                if failed:
                    p = failed[0]
                    print(
                        f"a3c: worker {processes.index(p)} died with exit code {p.exitcode}; stopping", file=sys.stderr
                    )
                    exit_code, reason = 1, f"worker {processes.index(p)} died (exit code {p.exitcode})"
                    break
                if all(p.exitcode is not None for p in processes):
                    break
        except KeyboardInterrupt:
            exit_code, reason = 130, "interrupted"
        finally:
            self.store.request_stop()
            for p in processes:
                p.join(timeout=max(0.0, JOIN_TIMEOUT_S))
            for p in processes:
                if p.is_alive():
                    p.terminate()
                    p.join(timeout=2.0)
                if p.is_alive():
                    p.kill()
                    p.join()
            dashboard.tick()
            wall = time.time() - start
            self.checkpoint(run, "latest.pt")
            summary = self.summary(dashboard, board, wall, reason)
            run.write_summary(summary)
            dashboard.write_hparams(cfg.to_dict(), summary)
            dashboard.save_loss_history()
            dashboard.close()
            if tensorboard is not None:
                tensorboard.stop()
        print(
            f"a3c: {summary['total_steps']} steps in {summary['wall_time_s']:.1f} s "
            f"({summary['steps_per_s']:,.0f} steps/s), {summary['episodes']} episodes, "
            f"mean return (last 100) {summary['mean_return_100']}; {run.path}",
            file=sys.stderr,
        )
        return exit_code

    def checkpoint(self, run: RunDirectory, name: str) -> None:
        board = self.store.board
        save_checkpoint(
            run.checkpoints / name,
            {
                "model": self.store.params.clone(),
                "optimizer": self.optimizer.state_dict(),
                "global_step": board.global_step(),
                "worker_steps": board.steps.clone(),
                "episodes_written": board.written.clone(),
                "config": self.config.to_dict(),
                "torch_rng": torch.get_rng_state(),
            },
        )

    def summary(self, dashboard: Dashboard, board: EpisodeBoard, wall: float, reason: str) -> dict[str, Any]:
        stats = board.stats.numpy()
        first_steps = stats[:, Stat.FIRST_STEP_TIME]
        started = first_steps[first_steps > 0]
        startup_s = float(started.max() - dashboard.start_time) if len(started) == len(first_steps) else None
        train_s = wall - (float(started.min() - dashboard.start_time) if len(started) else 0.0)
        steps = board.global_step()
        return {
            "env": self.config.env,
            "workers": self.config.workers,
            "envs_per_worker": self.config.envs_per_worker,
            "total_steps": steps,
            "wall_time_s": wall,
            "steps_per_s": steps / train_s if train_s > 0 else 0.0,
            "episodes": dashboard.episodes,
            "mean_return_100": dashboard.mean_return_100(),
            "solved_at_step": dashboard.solved_at_step,
            "solved_at_s": dashboard.solved_at_s,
            "startup_s": startup_s,
            "restarts": dashboard.restarts,
            "skipped_updates": int(stats[:, Stat.SKIPPED].sum()),
            "updates": int(stats[:, Stat.UPDATES].sum()),
            "lost_episodes": dashboard.reader.lost,
            "stop_reason": reason,
        }
