"""The interface of a worker's K environments stepped as one: ``EnvBatch`` (what the rollout loop calls once a step),
``BatchStep`` (what a step returns) and ``Ended`` (an env whose learner episode ended at the step). Its backends:
a3c/spec/env_batch.py (gymnasium's envs in turn, and the registry that picks a backend by --env-backend) and
a3c/spec/atari_vector.py (ale-py's C++ vector env). Both import this module; neither imports the other.

A step takes the K envs' actions and returns ``BatchStep``: the K observations after it (a new episode's first where
one ended: every env is reset as its episode ends, within the step), the env's own rewards (float64: returns are
reported unscaled and unclipped), the terminated and truncated flags as the env gave them, and ``ended``, one
``Ended`` per env whose learner episode ended at this step, with the episode's last observation (the bootstrap of a
truncation) and whether the end was a lost life only (``LIFE_LOST``: Atari's game goes on, the observation too).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol

import numpy as np


class Ended(NamedTuple):
    """An env whose learner episode ended at a step: its index in the batch, the episode's last observation, and
    whether the end was a lost life (the game, and the episode the worker reports, go on)."""

    env: int
    final_obs: Any
    life_lost: bool


class BatchStep(NamedTuple):
    """What one step of K envs returns (the module docstring). ``terminated`` and ``truncated`` are read only where
    ``ended`` is not empty (a list of bools or a bool array: whichever the backend has at hand)."""

    obs: Any  # [K, *obs_shape]: a list of K arrays, or one array
    rewards: np.ndarray  # [K] float64, the env's own
    terminated: Sequence[bool] | np.ndarray  # [K]
    truncated: Sequence[bool] | np.ndarray  # [K]
    ended: list[Ended]


class EnvBatch(Protocol):
    """K envs as one (the module docstring)."""

    num_envs: int

    def reset(self, seeds: Sequence[int], action_seeds: Sequence[int]) -> Any:
        """Reset env k with ``seeds[k]`` (its action space's sampler with ``action_seeds[k]``); the K observations."""
        ...

    def step(self, actions: Sequence[Any]) -> BatchStep: ...

    def close(self) -> None: ...
