"""The update protocol: what a worker's learn loop asks of its update, whatever the objective and however the
update is computed.

A worker's update runs over the rollout in hand (``Rollout``, its buffers) in these steps:
  act        the policy's params for one step's observations (acting; a fast path keeps what it computes)
  plan       the rollout's minibatches (``Minibatch``), in order: the objective's epochs of them (A3C: one, the whole
             rollout; PPO: --n-epochs passes of shuffled minibatches), after computing the rollout's targets
  gradient   one minibatch's loss and its gradient, written into the worker's flat gradient buffer
and the learn loop (a3c.learn.update.loop) does the rest around each gradient: the pull before it, the clip, the skip
of a non-finite one, the push, the record, and the heartbeat and the stop between minibatches.

How a gradient is computed is an ``UpdatePath``: a ``NetworkPass`` (act; unroll: the rollout's forward pass, params
[T K, P], values [T + 1, K], V(final observations); forward: a minibatch's outputs with the weights as they are now;
backward: a gradient with respect to those outputs through the network, into the flat buffer) paired with the
objective's loss gradient (its terms and its gradient with respect to the network's outputs), under a name. Each
part says what it covers (``supports``: None where it does, else why not), so a path covers a config, a model, an
action distribution and a dtype when both parts do. An objective (a3c.learn.objectives) builds the worker's
``Learner`` from a path.

The reference paths (a3c.learn.update.reference for A3C, a3c.learn.objectives.ppo for PPO: autograd through the model
and through the loss written once in torch) cover every model the flags can build; the fast paths (the passes by hand,
the closed-form and compiled loss gradients) are registered beside them (a3c.learn.update.paths), and one conformance
test holds each to its objective's float64 reference (tests/learn/update/test_paths.py). The worker picks its path
once, at start; the loop never asks again.

What comes after the gradient (its norm, the skip of a non-finite update, the clip, the learning rate) is not a
path's business: a3c.learn.update.step.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import torch

from a3c.learn.distributions import Distribution
from a3c.learn.model import ActorCritic, State
from a3c.spec.config import Config

# the loss's terms [total, policy, value, entropy] (float64), d loss / d params [T K, P], d loss / d values [T K]
LossGrads = tuple[np.ndarray, "np.ndarray | torch.Tensor", "np.ndarray | torch.Tensor"]


@dataclass
class Rollout:
    """A worker's rollout buffers, indexed [step, env], as the update reads them: each as a tensor and as a numpy
    array on the same memory (a path takes whichever it computes with; making a view costs a microsecond a call).
    obs [T + 1, K, ...] (obs[T]: the boundary observation), final_obs [T, K, ...] (the observation returned with
    truncated=True, where one was), actions [T, K, ...], rewards, terminated, truncated [T, K]; ``start_state``: the
    recurrent state before obs[0] (empty without a core), set by the worker at each rollout's start."""

    obs: torch.Tensor
    final_obs: torch.Tensor
    actions: torch.Tensor
    rewards: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor
    start_state: State = ()
    obs_np: np.ndarray = field(init=False)
    final_obs_np: np.ndarray = field(init=False)
    actions_np: np.ndarray = field(init=False)
    rewards_np: np.ndarray = field(init=False)
    terminated_np: np.ndarray = field(init=False)
    truncated_np: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        for name in ("obs", "final_obs", "actions", "rewards", "terminated", "truncated"):
            setattr(self, f"{name}_np", getattr(self, name).numpy())

    @classmethod
    def allocate(
        cls, steps: int, envs: int, obs_shape: tuple[int, ...], obs_dtype: np.dtype | type, dist: Distribution
    ) -> Rollout:
        """Zeroed buffers for rollouts of ``steps`` x ``envs``, observations in ``obs_dtype``."""
        return cls(
            torch.from_numpy(np.zeros((steps + 1, envs, *obs_shape), dtype=obs_dtype)),
            torch.from_numpy(np.zeros((steps, envs, *obs_shape), dtype=obs_dtype)),
            torch.zeros(steps, envs, *dist.action_shape, dtype=dist.action_dtype),
            torch.zeros(steps, envs),
            torch.zeros(steps, envs),
            torch.zeros(steps, envs),
        )

    @property
    def steps(self) -> int:
        return self.rewards_np.shape[0]

    @property
    def envs(self) -> int:
        return self.rewards_np.shape[1]

    def any_truncated(self) -> bool:
        """Whether an episode was truncated in this rollout (then V of its final observation is a target)."""
        return bool(np.maximum.reduce(self.truncated_np, axis=None))  # (ndarray.any: a Python wrapper, 3x)


@dataclass
class Unrolled:
    """A rollout's forward pass: params [T K, P] (an array, or a tensor where autograd holds its graph), values
    [T + 1, K] and final_values [T, K] (V of the final observations; None where no episode was truncated) as
    numpy arrays, and whatever the network pass keeps for its backward (``saved``)."""

    params: np.ndarray | torch.Tensor
    values: np.ndarray
    final_values: np.ndarray | None
    saved: Any


class NetworkPass(ABC):
    """Acting, the rollout's forward pass and its backward pass, for the models ``supports`` accepts. Built once per
    worker on its model, whose parameters' ``.grad`` are views of the worker's flat gradient buffer ``grads``."""

    @classmethod
    @abstractmethod
    def supports(cls, config: Config, model: ActorCritic) -> str | None:
        """None where this pass covers ``model`` (built from ``config``); else why not, in a few words."""

    @abstractmethod
    def __init__(self, model: ActorCritic, config: Config, grads: torch.Tensor) -> None: ...

    @abstractmethod
    def act(self, rollout: Rollout, step: int, state: State) -> tuple[torch.Tensor, State]:
        """The policy's params for obs[step] (no autograd) and the recurrent state after it."""

    @abstractmethod
    def unroll(self, rollout: Rollout) -> Unrolled:
        """The rollout's forward pass with the weights as they are (a fast path reuses what acting recorded: the
        weights are the acting ones until the first push)."""

    @abstractmethod
    def forward(self, rollout: Rollout, minibatch: Minibatch) -> Unrolled:
        """The outputs on ``minibatch``'s samples with the weights as they are now: params [B, P], values [B] (in
        ``minibatch.samples``' order), no final values; for a recurrent model the minibatch's envs unrolled from
        their start state (``samples`` then lists their steps t-major)."""

    @abstractmethod
    def backward(
        self, unrolled: Unrolled, dparams: np.ndarray | torch.Tensor, dvalues: np.ndarray | torch.Tensor
    ) -> None:
        """Into the flat gradient buffer (written, or accumulated into zeros: what was there does not count): the
        gradient of sum(dparams * params[:B]) + sum(dvalues * values[:B]), B = len(dparams), for ``unrolled`` from
        ``unroll`` (B = T K) or from ``forward``."""


class LossGradient(ABC):
    """The loss's targets, terms and gradient with respect to the network's outputs, for the action distributions
    and dtypes ``supports`` accepts."""

    @classmethod
    @abstractmethod
    def supports(cls, config: Config, dist: Distribution, dtype: torch.dtype) -> str | None:
        """None where this covers ``dist`` with a model of ``dtype``; else why not, in a few words."""

    @abstractmethod
    def __init__(self, config: Config, dist: Distribution, steps: int, envs: int) -> None: ...

    @abstractmethod
    def __call__(self, rollout: Rollout, unrolled: Unrolled) -> LossGrads:
        """(the loss's terms [total, policy, value, entropy] as float64 numbers, d loss / d params [T K, P],
        d loss / d values [T K]) of the rollout's A3C loss, with ``unrolled`` its forward pass."""


@dataclass(frozen=True)
class Minibatch:
    """One gradient's share of a rollout. ``samples``: indices t K + k into the rollout's T K samples (None: all of
    them, in order: A3C's one minibatch); ``envs``: for a recurrent model, the envs whose whole rollouts it holds
    (``samples`` then lists their steps t-major); ``pull``: whether the worker pulls the shared weights before it
    (A3C's gradient is taken on the weights that acted; PPO pulls before every minibatch); ``epoch``: which pass over
    the rollout it belongs to."""

    samples: np.ndarray | None = None
    envs: np.ndarray | None = None
    pull: bool = False
    epoch: int = 0


class Learner(ABC):
    """An objective's update on one path, built for one worker (``UpdatePath.build``): what the learn loop runs."""

    name: str  # the path's (summary.json's update_path)
    terms: tuple[str, ...]  # what ``gradient`` returns, in order (a3c.record.rows.UPDATE_TERMS names)
    act: Any  # the network pass's act, bound (one attribute read a step on the hot path)

    @abstractmethod
    def plan(self, rollout: Rollout, rng: np.random.Generator) -> list[Minibatch]:
        """The rollout's targets (with the weights that acted: nothing has been pushed since), then its
        minibatches in the order they are to be taken."""

    @abstractmethod
    def gradient(self, rollout: Rollout, minibatch: Minibatch) -> np.ndarray:
        """``minibatch``'s loss gradient into the worker's flat gradient buffer; returns the ``terms`` (float64)."""


class Objective(Protocol):
    """What an update optimises (a3c.learn.objectives): its name (``--algo``), the terms its learner reports, and how
    it builds a learner on a path whose loss gradient is one of its own."""

    name: str
    terms: tuple[str, ...]

    def learner(
        self, path: UpdatePath, model: ActorCritic, dist: Distribution, config: Config, grads: torch.Tensor
    ) -> Learner: ...


@dataclass(frozen=True)
class UpdatePath:
    """A way of computing an objective's update, under a ``name`` (summary.json's ``update_path``): a network pass and
    one of the objective's loss gradients. ``build`` makes the worker's ``Learner``."""

    name: str
    network: type[NetworkPass]
    loss: Any  # the objective's loss-gradient class, with a ``supports(config, dist, dtype)`` classmethod
    objective: Objective

    def supports(self, config: Config, model: ActorCritic, dist: Distribution) -> str | None:
        """None where this path covers the model (and its distribution, in its parameters' dtype); else why not."""
        dtype = next(model.parameters()).dtype
        why_not: str | None = self.network.supports(config, model) or self.loss.supports(config, dist, dtype)
        return why_not

    def build(self, model: ActorCritic, dist: Distribution, config: Config, grads: torch.Tensor) -> Learner:
        return self.objective.learner(self, model, dist, config, grads)


def backward_from(outputs: tuple[torch.Tensor, ...], grads: tuple[torch.Tensor, ...]) -> None:
    """Accumulate into the leaves' .grad the gradient of sum_i <grads[i], outputs[i]>, exactly what
    ``torch.autograd.backward(outputs, grads)`` does, but from one scalar root.

    Why: given explicit gradient tensors, torch.autograd.backward checks their shapes with
    ``torch.fx.experimental.symbolic_shapes``, importing it and with it sympy and mpmath (about 500 modules, half a
    second and 40 MB) in every process on its first call, so the fork server had to preload them for every run. From
    a scalar, autograd seeds the root with a 1 and never imports them. The values are the same bit for bit: the
    sum's backward hands each product a gradient of ones, and the product's backward multiplies it by grads[i]
    (1.0 * g == g exactly); where two roots feed one node (a shared torso), the two contributions are added, as
    before, and two-term addition does not depend on the order."""
    root = sum(((out * grad.detach()).sum() for out, grad in zip(outputs, grads, strict=True)), torch.zeros(()))
    root.backward()
