"""An env whose returns follow a script, not the policy, for the tests of --stop-when-solved and --stop-at: every
episode is one step long and pays ``first`` for the env instance's first ``switch`` episodes, then ``then``. A run
therefore "solves" (the 100-episode mean meets the threshold, 10) and "collapses" when the script says, whatever it
learns. Importable by worker processes as ``scripted_returns:ScriptedReturns-v0`` with tests/ on PYTHONPATH."""

import gymnasium as gym
import numpy as np
from gymnasium import spaces

THRESHOLD = 10.0


class ScriptedReturns(gym.Env):
    observation_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = spaces.Discrete(2)

    def __init__(self, first: float = 20.0, then: float = 0.0, switch: int = 30) -> None:
        self.first, self.then, self.switch = float(first), float(then), int(switch)
        self.episodes = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(2, dtype=np.float32), {}

    def step(self, action):
        reward = self.first if self.episodes < self.switch else self.then
        self.episodes += 1
        return np.zeros(2, dtype=np.float32), reward, True, False, {}


gym.register(id="ScriptedReturns-v0", entry_point=ScriptedReturns, reward_threshold=THRESHOLD)
