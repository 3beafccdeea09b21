"""`envs/Catch-v0`: a small pixel game, the CI-scale proof that the CNN path learns (Pong takes an hour).

A ball falls from the top row of a ``size`` x ``size`` grid, one row a step, in a random column, drifting one column
left or right at random (``drift``: the probability a step); a paddle ``paddle`` cells wide moves along the bottom
row (actions: 0 left, 1 stay, 2 right). When the ball reaches the bottom row: +1 if the paddle is under it, -1 if
not, and the next ball starts at the top. An episode is ``balls`` drops, so returns lie in [-balls, balls].

The observation is the grid drawn as an image, channels last, shape (size, size, 2): channel 0 the ball, channel 1
the paddle. ``dtype`` "bool" (default: True where a thing is) or "uint8" (255 where a thing is, as a frame's pixels
are). A random policy scores about -0.6 a ball at the defaults; a policy that follows the ball scores 1 a ball.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

DTYPES = {"bool": np.bool_, "uint8": np.uint8}


class CatchEnv(gym.Env):
    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, size: int = 10, paddle: int = 2, balls: int = 3, drift: float = 0.2, dtype: str = "bool"):
        if not (isinstance(size, int) and size >= 3):
            raise ValueError(f"envs/Catch-v0: size must be an integer >= 3 (got {size!r})")
        if not (isinstance(paddle, int) and 1 <= paddle < size):
            raise ValueError(f"envs/Catch-v0: paddle must be an integer from 1 to size - 1 (got {paddle!r})")
        if not (isinstance(balls, int) and balls >= 1):
            raise ValueError(f"envs/Catch-v0: balls must be an integer >= 1 (got {balls!r})")
        if not (isinstance(drift, (int, float)) and 0.0 <= drift <= 1.0):
            raise ValueError(f"envs/Catch-v0: drift must be a probability from 0 to 1 (got {drift!r})")
        if dtype not in DTYPES:
            raise ValueError(f"envs/Catch-v0: dtype must be one of {', '.join(DTYPES)} (got {dtype!r})")
        self.size, self.paddle, self.balls, self.drift = size, paddle, balls, float(drift)
        self.dtype = np.dtype(DTYPES[dtype])
        high = 1 if self.dtype == np.bool_ else 255
        self.observation_space = gym.spaces.Box(0, high, shape=(size, size, 2), dtype=self.dtype)
        self.action_space = gym.spaces.Discrete(3)
        self.ball_row = self.ball_col = self.paddle_col = self.dropped = 0

    def _new_ball(self) -> None:
        self.ball_row, self.ball_col = 0, int(self.np_random.integers(self.size))

    def _obs(self) -> np.ndarray:
        on = True if self.dtype == np.bool_ else 255
        obs = np.zeros((self.size, self.size, 2), dtype=self.dtype)
        obs[self.ball_row, self.ball_col, 0] = on
        obs[self.size - 1, self.paddle_col : self.paddle_col + self.paddle, 1] = on
        return obs

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.paddle_col = int(self.np_random.integers(self.size - self.paddle + 1))
        self.dropped = 0
        self._new_ball()
        return self._obs(), {}

    def step(self, action):
        move = int(action) - 1  # -1 left, 0 stay, +1 right
        self.paddle_col = min(max(self.paddle_col + move, 0), self.size - self.paddle)
        # the ball drifts on its way down, never on the step onto the bottom row (a drift the policy cannot see
        # coming would make a perfect catcher miss)
        if self.ball_row + 1 < self.size - 1 and self.np_random.random() < self.drift:
            self.ball_col = min(max(self.ball_col + int(self.np_random.choice((-1, 1))), 0), self.size - 1)
        self.ball_row += 1
        reward, terminated = 0.0, False
        if self.ball_row == self.size - 1:  # the ball is on the paddle's row: judged
            caught = self.paddle_col <= self.ball_col < self.paddle_col + self.paddle
            reward = 1.0 if caught else -1.0
            self.dropped += 1
            terminated = self.dropped == self.balls
            if not terminated:
                self._new_ball()  # what the policy sees next is the next ball (the state it acts in)
            return self._obs(), reward, terminated, False, {"caught": caught}
        return self._obs(), reward, terminated, False, {}
