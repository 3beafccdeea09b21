"""A tiny env whose true value is known in closed form, for tests/test_agent.py: every step pays REWARD, every
episode lasts exactly LENGTH steps, and the observation is the fraction of steps left. Under discount gamma the value
of the state with k steps left is REWARD * (1 - gamma**k) / (1 - gamma). The action changes nothing."""

import gymnasium as gym
import numpy as np
from gymnasium import spaces

LENGTH, REWARD = 4, 2.0


def true_value(steps_left: int, gamma: float) -> float:
    return REWARD * (1 - gamma**steps_left) / (1 - gamma)


class Countdown(gym.Env):
    observation_space = spaces.Box(0.0, 1.0, (1,), np.float32)
    action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.left = LENGTH
        return self._obs(), {}

    def _obs(self):
        return np.array([self.left / LENGTH], dtype=np.float32)

    def step(self, action):
        self.left -= 1
        return self._obs(), REWARD, self.left == 0, False, {}


gym.register(id="Countdown-v0", entry_point=Countdown)
