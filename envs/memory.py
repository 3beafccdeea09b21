"""`envs/Memory-v0`: a task that needs memory. The first observation shows a cue (one of ``n_cues``, one-hot); then
come ``delay`` blank observations and a query observation (the last component set); the action taken at the query is
judged: reward 1 if it names the cue, else 0, and the episode terminates. Actions before the query do nothing.

An episode is ``delay + 2`` steps. A policy without memory sees the same query whatever the cue was, so it scores
1 / n_cues on average (0.5 with two cues); a recurrent policy can score 1.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


class MemoryEnv(gym.Env):
    """obs [n_cues + 1] float32: the cue one-hot at t = 0, zeros while waiting, [0, ..., 0, 1] at the query."""

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, delay: int = 10, n_cues: int = 2) -> None:
        if not (isinstance(delay, int) and delay >= 0):
            raise ValueError(f"envs/Memory-v0: delay must be an integer >= 0 (got {delay!r})")
        if not (isinstance(n_cues, int) and n_cues >= 2):
            raise ValueError(f"envs/Memory-v0: n_cues must be an integer >= 2 (got {n_cues!r})")
        self.delay, self.n_cues = delay, n_cues
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(n_cues + 1,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(n_cues)
        self.cue, self.t = 0, 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.cue, self.t = int(self.np_random.integers(self.n_cues)), 0
        obs = np.zeros(self.n_cues + 1, dtype=np.float32)
        obs[self.cue] = 1.0
        return obs, {}

    def step(self, action):
        self.t += 1
        obs = np.zeros(self.n_cues + 1, dtype=np.float32)
        if self.t <= self.delay:  # waiting
            return obs, 0.0, False, False, {}
        if self.t == self.delay + 1:  # the query
            obs[-1] = 1.0
            return obs, 0.0, False, False, {}
        return obs, float(int(action) == self.cue), True, False, {"cue": self.cue}
