"""A fault-injection environment for the supervision tests: CartPole-v1 that crashes, hangs or returns NaN
observations at a chosen step, on chosen worker ranks only.

    envs/Faulty-v0 with --env-kwargs crash_at=50 crash_ranks=1      rank 1 raises RuntimeError at its 50th step
                                     hang_at=50 hang_ranks=0         rank 0 sleeps (hang_s, default an hour) there
                                     nan_at=20 nan_for=1             every rank: one NaN observation at step 20
                                                                     (nan_for=0: NaN from step nan_at on, forever)
                                     hang_ranks=evaluator            the evaluator's env, not the workers'
                                     pid_dir=/tmp/d                  each worker writes /tmp/d/rank-<rank>.pid
                                                                     (a hang: rank-<rank>.hung, evaluator.hung)
                                     crash_pad=N                     the crash's message ends with N emoji
                                                                     (4 bytes each in UTF-8: a huge traceback)

Steps are counted per env instance (a worker with --envs-per-worker K has K of them), from 1. An env does not know
which worker runs it, so it reads the rank from the environment variable A3C_WORKER_RANK, which a3c.run.worker sets
first thing in every worker process. Outside a worker (the main process validating the env) the variable is unset and no
fault fires. Ranks are given as an int, a comma-separated string ("0,2"), or None (the default) for every rank.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control.cartpole import CartPoleEnv

RANK_ENV = "A3C_WORKER_RANK"  # the name a3c.run.worker.RANK_ENV sets; repeated so that envs/ does not import a3c
EVALUATOR = "a3c-evaluator"  # the evaluator process's name (a3c.run.evaluator.EVALUATOR_PROCESS), likewise


def _ranks(value: int | str | None) -> frozenset[int] | None:
    """None -> every rank; 3 -> {3}; "0,2" -> {0, 2}."""
    if value is None:
        return None
    if isinstance(value, int):
        return frozenset({value})
    return frozenset(int(part) for part in str(value).replace(" ", "").split(",") if part)


class FaultyEnv(gym.Env):
    """CartPole-v1 dynamics with injected faults (see the module docstring)."""

    metadata = {"render_modes": []}

    def __init__(
        self,
        crash_at: int = 0,
        crash_ranks: int | str | None = None,
        hang_at: int = 0,
        hang_ranks: int | str | None = None,
        hang_s: float = 3600.0,
        nan_at: int = 0,
        nan_for: int = 1,
        nan_ranks: int | str | None = None,
        pid_dir: str | None = None,
        crash_pad: int = 0,
    ) -> None:
        self.inner = CartPoleEnv()
        self.observation_space = self.inner.observation_space
        self.action_space = self.inner.action_space
        # the evaluator is no worker, whatever A3C_WORKER_RANK it inherited (a test process that ran a Worker in-process
        # has it set, and its a3c.train children inherit it): only hang_ranks="evaluator" fires there
        self.in_evaluator = multiprocessing.current_process().name == EVALUATOR
        rank_text = os.environ.get(RANK_ENV)
        self.rank = int(rank_text) if rank_text is not None and not self.in_evaluator else None
        self.crash_at = crash_at if self._applies(crash_ranks) else 0
        self.hang_at = hang_at if self._applies(hang_ranks) else 0
        self.nan_at = nan_at if self._applies(nan_ranks) else 0
        self.hang_s, self.nan_for, self.crash_pad = hang_s, nan_for, crash_pad
        self.steps = 0
        self.pid_dir = pid_dir
        if pid_dir is not None and self.rank is not None:  # lets a test find (and kill) the worker of a rank
            path = os.path.join(pid_dir, f"rank-{self.rank}.pid")
            with open(path + ".tmp", "w") as f:
                f.write(str(os.getpid()))
            os.replace(path + ".tmp", path)

    def _applies(self, ranks: int | str | None) -> bool:
        if ranks == "evaluator":
            return self.in_evaluator
        if self.rank is None:
            return False  # not in a worker: never fire
        chosen = _ranks(ranks)
        return chosen is None or self.rank in chosen

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        return self.inner.reset(seed=seed, options=options)

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.steps += 1
        if self.crash_at and self.steps == self.crash_at:
            pad = "\N{GRINNING FACE}" * self.crash_pad
            raise RuntimeError(f"envs/Faulty-v0: injected crash at step {self.steps} on rank {self.rank}{pad}")
        if self.hang_at and self.steps == self.hang_at:
            if self.pid_dir is not None:  # lets a test wait for the hang (rank-R.hung, evaluator.hung)
                who = "evaluator" if self.in_evaluator else f"rank-{self.rank}"
                open(os.path.join(self.pid_dir, f"{who}.hung"), "w").close()
            time.sleep(self.hang_s)
        obs, reward, terminated, truncated, info = self.inner.step(action)
        if self.nan_at and self.steps >= self.nan_at and (self.nan_for == 0 or self.steps < self.nan_at + self.nan_for):
            obs = np.full_like(obs, np.nan)
        return obs, reward, terminated, truncated, info

    def close(self) -> None:
        self.inner.close()
