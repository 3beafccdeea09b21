"""Held-out envs the benchmarks name by ``scripts.benchmark.heldout_envs:ID`` (gymnasium imports this module, which
registers them): gymnasium's toy-text tasks whose bare Discrete observation a3c does not take, one-hot encoded by
gymnasium's FlattenObservation, as a3c's own error message advises. Same dynamics, rewards and time limits."""

from __future__ import annotations

import gymnasium as gym
from gymnasium.wrappers import FlattenObservation


def _one_hot(env_id: str, **kwargs: object) -> gym.Env:
    return FlattenObservation(gym.make(env_id, **kwargs))


gym.register(id="TaxiOneHot-v4", entry_point=_one_hot, kwargs={"env_id": "Taxi-v4"}, reward_threshold=8.0)
