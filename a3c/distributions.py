"""Policy distributions: what the worker, the loss and evaluation ask of the policy head, one class per action-space
family, chosen in one place (``make_distribution``). Nothing else in a3c tests which kind of action space it has.

A distribution is stateless: every method takes the head's output ``params`` [B, param_dim] (for Categorical, the
logits). The worker samples with ``sample`` (cheap, numpy), evaluation acts with ``mode``, the loss uses
``log_prob_entropy`` (differentiable) or, where the family has one, ``policy_grad`` (the policy and entropy terms'
gradient with respect to ``params`` in closed form: autograd then runs only through the network).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from a3c.errors import UserError


class Distribution(ABC):
    param_dim: int  # width of the policy head's output
    action_shape: tuple[int, ...]  # shape of one action as stored in the rollout buffer
    action_dtype: torch.dtype

    @abstractmethod
    def sample(self, params: torch.Tensor, rng: np.random.Generator) -> np.ndarray:
        """One action per row of params [B, P], drawn with ``rng``: [B, *action_shape]."""

    @abstractmethod
    def mode(self, params: torch.Tensor) -> np.ndarray:
        """The deterministic action (the most likely one): [B, *action_shape]."""

    @abstractmethod
    def log_prob_entropy(self, params: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """log pi(a|s) [B] and H(pi(.|s)) [B], differentiable with respect to params."""

    def policy_grad(
        self, params: torch.Tensor, actions: torch.Tensor, advantages: torch.Tensor, ent_coef: float
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
        """(log pi(a) [B], H [B], d/d params of [-mean(log pi(a) * A) - ent_coef * mean(H)]) in closed form, or None
        where the family has no closed form (the loss then differentiates log_prob_entropy)."""
        return None

    def env_actions(self, actions: np.ndarray) -> list[Any]:
        """The rows of ``sample``/``mode`` as the env's step() takes them, one per env."""
        return list(actions)


class Categorical(Distribution):
    """Discrete(n): params are the n logits."""

    action_shape = ()
    action_dtype = torch.int64

    def __init__(self, n: int, start: int = 0) -> None:
        self.param_dim, self.start = n, start  # Discrete(n, start): actions start, ..., start + n - 1

    def sample(self, params: torch.Tensor, rng: np.random.Generator) -> np.ndarray:
        """Inverse CDF, without torch.distributions: constructing a Categorical per env step costs several times the
        forward pass itself; softmax + cumsum + one uniform draw per row is exact and cheap. int64 [B]."""
        probs = torch.softmax(params, dim=-1).numpy()
        cdf = np.cumsum(probs, axis=-1)
        u = rng.random((cdf.shape[0], 1)) * cdf[:, -1:]  # scale by the last entry so rounding can never overflow
        actions = (u >= cdf).sum(axis=-1)
        return np.minimum(actions, probs.shape[-1] - 1).astype(np.int64)

    def mode(self, params: torch.Tensor) -> np.ndarray:
        return params.argmax(dim=-1).numpy().astype(np.int64)

    def log_prob_entropy(self, params: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        log_probs = torch.log_softmax(params, dim=-1)
        action_log_probs = log_probs.gather(-1, actions.unsqueeze(-1)).squeeze(-1)
        return action_log_probs, -(log_probs.exp() * log_probs).sum(-1)

    def policy_grad(
        self, params: torch.Tensor, actions: torch.Tensor, advantages: torch.Tensor, ent_coef: float
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """With p = softmax(z) over B samples:
        d policy / d z_i    = (A_i / B) * (p_i - onehot(a_i))
        d (-c_e H) / d z_i  = (c_e / B) * p_i * (log p_i + H_i)      where H_i = -sum_j p_ij log p_ij
        """
        with torch.no_grad():
            batch = params.shape[0]
            log_probs = torch.log_softmax(params, dim=-1)
            probs = log_probs.exp()
            action_log_probs = log_probs.gather(-1, actions.unsqueeze(-1)).squeeze(-1)
            entropies = -(probs * log_probs).sum(-1)
            scaled_adv = (advantages / batch).unsqueeze(-1)
            dparams = probs * scaled_adv
            dparams.scatter_add_(-1, actions.unsqueeze(-1), -scaled_adv)
            dparams.add_(probs * (log_probs + entropies.unsqueeze(-1)), alpha=ent_coef / batch)
        return action_log_probs, entropies, dparams

    def env_actions(self, actions: np.ndarray) -> list[Any]:
        return (actions + self.start).tolist() if self.start else actions.tolist()  # Python ints, cheap to step with


def make_distribution(action_space: gym.Space) -> Distribution:
    """The distribution family of an action space; UserError for spaces a3c does not support."""
    if isinstance(action_space, gym.spaces.Discrete):
        return Categorical(int(action_space.n), int(action_space.start))
    raise UserError(f"action space {action_space} is not supported; a3c supports Discrete actions")
