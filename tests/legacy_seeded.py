"""An env that seeds numpy's legacy RandomState with the seed reset() gets, as many third-party envs do: it refuses
seeds of 2**32 and above ("Seed must be between 0 and 2**32 - 1"). Importable by worker processes as
``legacy_seeded:LegacySeeded-v0`` with tests/ on PYTHONPATH."""

import gymnasium as gym
import numpy as np
from gymnasium import spaces


class LegacySeeded(gym.Env):
    observation_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = spaces.Discrete(2)

    def __init__(self) -> None:
        self.random = np.random.RandomState(0)
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if seed is not None:
            self.random = np.random.RandomState(seed)
        self.t = 0
        return self.random.uniform(-1, 1, 2).astype(np.float32), {}

    def step(self, action):
        self.t += 1
        return self.random.uniform(-1, 1, 2).astype(np.float32), 1.0, self.t >= 10, False, {}


gym.register(id="LegacySeeded-v0", entry_point=LegacySeeded)
