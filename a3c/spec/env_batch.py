"""A worker's K environments: the plain backend, ``GymEnvBatch`` (K envs made by ``make_env``, stepped in turn: the
reference, for every env), and the registry of env backends that ``make_env_batch`` picks one from by
``--env-backend`` (``ENV_BACKEND_MAKERS``: gymnasium, and ale-vector, ale-py's C++ vector env for an Atari game's K
envs, a3c/spec/atari_vector.py). The interface they share, ``EnvBatch``, is a3c/spec/batch.py's; nothing else in a
worker knows which backend it has. A new backend is a class of that interface and one entry here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from a3c.spec.atari_vector import AtariVectorBatch
from a3c.spec.batch import BatchStep, Ended, EnvBatch
from a3c.spec.environment import LIFE_LOST, make_env

__all__ = ["ENV_BACKEND_MAKERS", "BatchStep", "Ended", "EnvBatch", "GymEnvBatch", "make_env_batch"]


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


# --env-backend NAME -> the class that makes a worker's K envs from (env id, env kwargs, K); its keys are
# a3c.spec.flags.ENV_BACKENDS (checked by a test)
ENV_BACKEND_MAKERS: dict[str, Callable[[str, dict[str, Any] | None, int], EnvBatch]] = {
    "gymnasium": GymEnvBatch,
    "ale-vector": AtariVectorBatch,  # (ale-py is imported when one is made, not here)
}


def make_env_batch(env_id: str, env_kwargs: dict[str, Any] | None, num_envs: int, backend: str) -> EnvBatch:
    """The K envs of a worker on ``backend`` (a key of ``ENV_BACKEND_MAKERS``; Config.validate has checked that
    ale-vector is given an ALE id)."""
    return ENV_BACKEND_MAKERS[backend](env_id, env_kwargs, num_envs)
