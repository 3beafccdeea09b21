"""Making environments from an id and checking that their spaces are ones the trainer supports.

Ids can be registered gymnasium ids, ids of this project's `envs/` namespace, or `module:Name-v0` (gymnasium imports
the module, which registers the id). Every failure a user can cause becomes a UserError with a suggestion.

Observations: Box, or Dict/Tuple spaces (nested) of Boxes, Discretes, MultiBinaries and MultiDiscretes, which
``make_env`` flattens into one Box with gymnasium's FlattenObservation (discrete parts one-hot), so that the model and
the worker only ever see Boxes. Actions: Discrete, MultiDiscrete, float Box (a3c.distributions).
"""

from __future__ import annotations

import difflib
import importlib
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from a3c.errors import UserError

# the action spaces a3c.distributions.make_distribution has a distribution for (checked here without torch: the
# preflight checks run before torch is imported)
SUPPORTED_ACTION_SPACES: tuple[type[gym.Space], ...] = (gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.Box)
# the leaves of Dict/Tuple observation spaces that FlattenObservation turns into a Box
FLATTENED_LEAVES: tuple[type[gym.Space], ...] = (
    gym.spaces.Box,
    gym.spaces.Discrete,
    gym.spaces.MultiBinary,
    gym.spaces.MultiDiscrete,
)


def _register_project_envs() -> None:
    importlib.import_module("envs")  # registers the `envs/` namespace on import


@dataclass(frozen=True)
class EnvSpec:
    """What the model and the trainer need to know about an environment: its spaces (shapes, dtypes, the action
    space itself; gymnasium spaces pickle, so workers get them too) and its registry facts."""

    env_id: str
    observation_space: gym.spaces.Box
    action_space: gym.Space
    reward_threshold: float | None
    max_episode_steps: int | None

    @property
    def obs_shape(self) -> tuple[int, ...]:
        return tuple(self.observation_space.shape)

    @property
    def obs_dim(self) -> int:
        """Observations flattened."""
        return int(np.prod(self.obs_shape))

    def describe(self) -> dict[str, Any]:
        """The spaces as plain data (checkpoints, config.json): what a later run or a loader checks against."""
        return {"observation_space": repr(self.observation_space), "action_space": repr(self.action_space)}


def _close_ids(env_id: str) -> str:
    ids = [str(k) for k in gym.registry.keys()]
    close = difflib.get_close_matches(env_id, ids, n=3, cutoff=0.5)
    if not close:
        lowered = env_id.lower()
        close = [i for i in ids if lowered.split("/")[-1].split("-")[0] in i.lower()][:3]
    return f"; did you mean {', '.join(close)}?" if close else "; see gymnasium.pprint_registry() for the ids"


def make_env(env_id: str, env_kwargs: dict[str, Any] | None = None) -> gym.Env:
    """gymnasium.make with user errors turned into UserError (unknown id, module that does not import, bad kwargs)."""
    _register_project_envs()
    kwargs = dict(env_kwargs or {})
    if ":" in env_id:
        module = env_id.split(":", 1)[0]
        try:
            importlib.import_module(module)
        except ImportError as err:
            raise UserError(
                f"env module {module!r} does not import ({err}); check the module name and PYTHONPATH"
            ) from None
        except Exception as err:  # the user's module itself fails (SyntaxError, an error at import time)
            raise UserError(
                f"env module {module!r} fails on import ({type(err).__name__}: {err}); fix the module"
            ) from None
    try:
        env = gym.make(env_id, **kwargs)
    except (gym.error.NameNotFound, gym.error.NamespaceNotFound, gym.error.VersionNotFound) as err:
        raise UserError(f"unknown env id {env_id!r} ({err}){_close_ids(env_id.split(':')[-1])}") from None
    except gym.error.Error as err:
        raise UserError(f"cannot make env {env_id!r}: {err}") from None
    except TypeError as err:
        if kwargs and ("argument" in str(err) or "keyword" in str(err)):
            raise UserError(f"env {env_id!r} rejects --env-kwargs {kwargs}: {err}; check the names and types") from None
        raise
    if isinstance(env.observation_space, (gym.spaces.Dict, gym.spaces.Tuple)) and _flattenable(env.observation_space):
        env = gym.wrappers.FlattenObservation(env)
    return env


def _flattenable(space: gym.Space) -> bool:
    """A Dict/Tuple space whose leaves (at any depth) are all spaces FlattenObservation makes numbers of."""
    if isinstance(space, gym.spaces.Dict):
        return len(space.spaces) > 0 and all(_flattenable(s) for s in space.spaces.values())
    if isinstance(space, gym.spaces.Tuple):
        return len(space.spaces) > 0 and all(_flattenable(s) for s in space.spaces)
    return isinstance(space, FLATTENED_LEAVES)


def spec_of(env: gym.Env, env_id: str) -> EnvSpec:
    """Check the spaces (Box observations, as make_env leaves them; Discrete, MultiDiscrete or float Box actions)
    and describe them; UserError for anything else."""
    obs_space, act_space = env.observation_space, env.action_space
    if not isinstance(obs_space, gym.spaces.Box) or not np.issubdtype(obs_space.dtype, np.number):
        raise UserError(
            f"env {env_id!r} has observation space {obs_space}, which is not supported; a3c supports Box "
            "observations and Dict/Tuple spaces of Box, Discrete, MultiBinary and MultiDiscrete (flattened)"
        )
    float_box = isinstance(act_space, gym.spaces.Box) and np.issubdtype(act_space.dtype, np.floating)
    if not isinstance(act_space, SUPPORTED_ACTION_SPACES) or (isinstance(act_space, gym.spaces.Box) and not float_box):
        raise UserError(
            f"env {env_id!r} has action space {act_space}, which is not supported; a3c supports Discrete, "
            "MultiDiscrete and float Box actions"
        )
    spec = env.spec
    return EnvSpec(
        env_id=env_id,
        observation_space=obs_space,
        action_space=act_space,
        reward_threshold=None if spec is None else spec.reward_threshold,
        max_episode_steps=None if spec is None else spec.max_episode_steps,
    )


def describe_env(env_id: str, env_kwargs: dict[str, Any] | None = None) -> EnvSpec:
    """Make the env once (in the main process, before any worker starts) to validate it and read its spaces."""
    env = make_env(env_id, env_kwargs)
    try:
        return spec_of(env, env_id)
    finally:
        env.close()
