"""A3C's objective (Mnih et al. 2016): one gradient a rollout, on the weights that acted. Its plan is one minibatch,
the whole rollout, taken without a pull (SB3 reads A2C the same way: PPO's buffer read once, whole); its gradient is
the path's three steps: the rollout's forward pass (a fast path reuses what acting recorded), the loss's terms and
gradient with respect to the network's outputs (``LossGradient``: GAE with the truncation bootstrap, the policy,
value and entropy terms; a3c.learn.update.reference writes it in torch, the closed form and the C kernel are its
fast twins), and the backward pass into the flat gradient buffer.
"""

from __future__ import annotations

import numpy as np
import torch

from a3c.learn.distributions import Distribution
from a3c.learn.model import ActorCritic
from a3c.learn.terms import A3C_TERMS
from a3c.learn.update.protocol import Learner, LossGradient, Minibatch, NetworkPass, Rollout, UpdatePath
from a3c.spec.config import Config

TERMS: tuple[str, ...] = A3C_TERMS
WHOLE_ROLLOUT = [Minibatch()]  # the plan of every rollout: one minibatch of all its samples, no pull before it


class A3CUpdate(Learner):
    """A3C's learner on one path: its steps as bound methods (one attribute read each on the hot path)."""

    terms: tuple[str, ...] = TERMS

    def __init__(self, name: str, network: NetworkPass, loss: LossGradient) -> None:
        self.name, self.network, self.loss = name, network, loss
        self.act = network.act
        self.unroll = network.unroll
        self.loss_grads = loss.__call__
        self.backward = network.backward

    def plan(self, rollout: Rollout, rng: np.random.Generator) -> list[Minibatch]:
        return WHOLE_ROLLOUT

    def gradient(self, rollout: Rollout, minibatch: Minibatch) -> np.ndarray:
        unrolled = self.unroll(rollout)
        loss_values, dparams, dvalues = self.loss_grads(rollout, unrolled)
        self.backward(unrolled, dparams, dvalues)  # into the .grad views of the worker's flat buffer
        return loss_values


class A3CObjective:
    """``--algo a3c``."""

    name = "a3c"
    terms: tuple[str, ...] = TERMS

    def learner(
        self, path: UpdatePath, model: ActorCritic, dist: Distribution, config: Config, grads: torch.Tensor
    ) -> A3CUpdate:
        loss = path.loss(config, dist, config.n_steps, config.envs_per_worker)
        return A3CUpdate(path.name, path.network(model, config, grads), loss)


A3C = A3CObjective()
