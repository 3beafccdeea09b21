"""`envs/Spaces-v0`: a tiny task in every observation and action space a3c supports, for tests of the model built
from the spaces (``--env-kwargs obs=dict action=box``).

obs: ``box`` (a vector of 3), ``dict`` ({"position": Box(2), "velocity": Box(1)}), ``tuple`` (Box(2), Box(1)),
``image`` (uint8 [10, 12, 3], channels last) or ``image_chw`` (uint8 [3, 10, 12]). action: ``discrete`` (3),
``multidiscrete`` ([3, 2]), ``box`` (2 in [-1, 1]) or ``box64`` (2 in [-0.1, 0.3], float64: bounds float32 cannot
hold). The observation is random; the reward prefers the action 0 in
every component (discrete) or an action near 0.5 (box), so a learner has a signal. Episodes end after 8 steps
(truncated, by the registered time limit); every fifth step terminates with probability 1/2.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

OBS = ("box", "dict", "tuple", "image", "image_chw")
ACTIONS = ("discrete", "multidiscrete", "box", "box64")


class SpacesEnv(gym.Env):
    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, obs: str = "box", action: str = "discrete") -> None:
        if obs not in OBS or action not in ACTIONS:
            raise ValueError(f"envs/Spaces-v0: obs must be one of {OBS} and action one of {ACTIONS}")
        self.kind = obs
        vector = gym.spaces.Box(-1.0, 1.0, shape=(3,), dtype=np.float32)
        self.observation_space = {
            "box": vector,
            "dict": gym.spaces.Dict(
                {"position": gym.spaces.Box(-1.0, 1.0, (2,), np.float32), "velocity": gym.spaces.Box(-1.0, 1.0, (1,))}
            ),
            "tuple": gym.spaces.Tuple((gym.spaces.Box(-1.0, 1.0, (2,), np.float32), gym.spaces.Box(-1.0, 1.0, (1,)))),
            "image": gym.spaces.Box(0, 255, (10, 12, 3), np.uint8),
            "image_chw": gym.spaces.Box(0, 255, (3, 10, 12), np.uint8),
        }[obs]
        self.action_space = {
            "discrete": gym.spaces.Discrete(3),
            "multidiscrete": gym.spaces.MultiDiscrete([3, 2]),
            "box": gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
            "box64": gym.spaces.Box(-0.1, 0.3, (2,), np.float64),
        }[action]
        self.t = 0

    def _obs(self) -> Any:
        sample = self.observation_space.sample()
        return sample

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.observation_space.seed(int(self.np_random.integers(2**31)))
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        a = np.asarray(action)
        if not self.action_space.contains(a.astype(self.action_space.dtype)):
            raise ValueError(f"action {action!r} outside {self.action_space}")
        if isinstance(self.action_space, gym.spaces.Box):
            reward = -float(np.abs(a - 0.5).sum())
        else:
            reward = float((a == 0).all())
        terminated = self.t % 5 == 0 and bool(self.np_random.random() < 0.5)
        return self._obs(), reward, terminated, False, {}
