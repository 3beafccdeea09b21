"""Slow data sources: the `SlowEnv` wrapper, which makes every step (and reset) of an environment take a set time,
and `envs/SlowCartPole-v1`, CartPole-v1 behind it.

Two kinds of slowness, because they scale differently with worker processes:
  mode="sleep"  an I/O-bound source (a network feed, a sensor, a remote simulator): the process sleeps, the core is
                free for other workers, so N workers on C cores can approach N times the speed of one.
  mode="cpu"    a CPU-bound source (a heavy local simulator): the process burns `latency` seconds of its own CPU time
                in a busy loop. The deadline is on the thread's CPU clock (time.thread_time), not the wall clock: the
                work is a fixed amount of computation, so when more processes than cores compete, each step takes
                longer in wall time and the speed-up stops at the core count, as it would with a real simulator.

The delay is added after the wrapped env's own step, so a step costs `latency` plus whatever the env itself takes.
"""

from __future__ import annotations

import time
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control import CartPoleEnv

MODES = ("sleep", "cpu")


def _check_seconds(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a number of seconds >= 0 (got {value!r}); e.g. --env-kwargs {name}=0.01")
    return float(value)


def burn_cpu(seconds: float) -> None:
    """Busy-loop until this thread has used ``seconds`` of CPU time (holds the GIL and a core the whole time)."""
    deadline = time.thread_time() + seconds
    x = 0.0
    while time.thread_time() < deadline:
        for i in range(64):  # a little arithmetic between clock reads, like a simulator's inner loop
            x = x * 0.5 + i


class SlowEnv(gym.Wrapper):
    """Make each step take ``latency`` seconds more and each reset ``reset_latency`` seconds more.

    latency        seconds added to every step
    reset_latency  seconds added to every reset (None: the same as ``latency``; a reset fetches an observation too)
    jitter         half-width, in seconds, of uniform noise added to each delay (clipped so a delay is never < 0);
                   drawn from a generator seeded by ``reset(seed=...)``, so seeded runs see the same delays
    mode           "sleep" (I/O-bound: time.sleep) or "cpu" (CPU-bound: a busy loop on the thread's CPU clock)

    The delay of the last step or reset is in ``info["latency_s"]``.
    """

    def __init__(
        self,
        env: gym.Env,
        latency: float = 0.01,
        reset_latency: float | None = None,
        jitter: float = 0.0,
        mode: str = "sleep",
    ) -> None:
        super().__init__(env)
        self.latency = _check_seconds("latency", latency)
        self.reset_latency = self.latency if reset_latency is None else _check_seconds("reset_latency", reset_latency)
        self.jitter = _check_seconds("jitter", jitter)
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)} (got {mode!r}); e.g. --env-kwargs mode=sleep")
        self.mode = mode
        self._delay_rng = np.random.default_rng()

    def _wait(self, base: float) -> float:
        delay = base
        if self.jitter > 0.0:
            delay = max(0.0, base + float(self._delay_rng.uniform(-self.jitter, self.jitter)))
        if delay > 0.0:
            if self.mode == "sleep":
                time.sleep(delay)
            else:
                burn_cpu(delay)
        return delay

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        info = dict(info)
        info["latency_s"] = self._wait(self.latency)
        return obs, reward, terminated, truncated, info

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        if seed is not None:
            self._delay_rng = np.random.default_rng(seed)
        obs, info = self.env.reset(seed=seed, options=options)
        info = dict(info)
        info["latency_s"] = self._wait(self.reset_latency)
        return obs, info


def make_slow_cartpole(
    latency: float = 0.01,
    reset_latency: float | None = None,
    jitter: float = 0.0,
    mode: str = "sleep",
    render_mode: str | None = None,
) -> gym.Env:
    """Entry point of envs/SlowCartPole-v1: CartPole (its time limit comes from the registration) behind SlowEnv."""
    return SlowEnv(CartPoleEnv(render_mode=render_mode), latency, reset_latency, jitter, mode)
