"""A worker's K environments stepped as one: the ``EnvBatch`` interface the rollout loop calls once a step, and its
plain backend, ``GymEnvBatch`` (K envs made by ``make_env``, stepped in turn: the reference, for every env).

A step takes the K envs' actions and returns ``BatchStep``: the K observations after it (a new episode's first where
one ended: every env is reset as its episode ends, within the step), the env's own rewards (float64: returns are
reported unscaled and unclipped), the terminated and truncated flags as the env gave them, and ``ended``, one
``Ended`` per env whose learner episode ended at this step, with the episode's last observation (the bootstrap of a
truncation) and whether the end was a lost life only (``LIFE_LOST``: Atari's game goes on, the observation too).

``--env-backend ale-vector`` steps an Atari game's K envs in ale-py's C++ vector env instead
(a3c.spec.atari_vector); ``make_env_batch`` picks the backend. Nothing else in a worker knows which one it has.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol

import numpy as np

from a3c.spec.environment import LIFE_LOST, make_env


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


class GymEnvBatch:
    """K gymnasium envs (``make_env``), stepped in turn and each reset at its episode's end: the reference backend,
    for every env. The per-env loop only steps and collects; the worker's bookkeeping is one numpy operation a step
    for all K."""

    def __init__(self, env_id: str, env_kwargs: dict[str, Any] | None, num_envs: int) -> None:
        self.envs = [make_env(env_id, env_kwargs) for _ in range(num_envs)]
        self.num_envs = num_envs
        self._obs: list[Any] = [None] * num_envs
        self._rewards, self._terms, self._truncs = [0.0] * num_envs, [False] * num_envs, [False] * num_envs

    def reset(self, seeds: Sequence[int], action_seeds: Sequence[int]) -> list[Any]:
        first = []
        for env, seed, action_seed in zip(self.envs, seeds, action_seeds, strict=True):
            env.action_space.seed(action_seed)
            first.append(env.reset(seed=seed)[0])
        return first

    def step(self, actions: Sequence[Any]) -> BatchStep:
        # the same lists every step: the worker copies what it keeps (into its buffers) before the next step
        next_obs, rewards, terms, truncs = self._obs, self._rewards, self._terms, self._truncs
        ended: list[Ended] = []
        for k, (env, action) in enumerate(zip(self.envs, actions, strict=True)):
            obs, reward, terms[k], truncs[k], info = env.step(action)
            rewards[k] = float(reward)
            if terms[k] or truncs[k]:
                ended.append(Ended(k, obs, bool(info.get(LIFE_LOST))))
                obs, _ = env.reset()
            next_obs[k] = obs
        return BatchStep(next_obs, np.array(rewards), terms, truncs, ended)

    def close(self) -> None:
        for env in self.envs:
            env.close()
        self.envs = []


def make_env_batch(env_id: str, env_kwargs: dict[str, Any] | None, num_envs: int, backend: str) -> EnvBatch:
    """The K envs of a worker on ``backend`` (one of a3c.spec.config's ``ENV_BACKENDS``; Config.validate has
    checked that ale-vector is given an ALE id)."""
    if backend == "ale-vector":
        from a3c.spec.atari_vector import AtariVectorBatch

        return AtariVectorBatch(env_id, env_kwargs, num_envs)
    return GymEnvBatch(env_id, env_kwargs, num_envs)
