"""The network passes by hand as the update protocol's ``NetworkPass`` (a3c.learn.update.protocol): one adapter for
every model family that has its passes written out (``MlpBackprop`` in mlp.py, ``CnnBackprop`` in cnn.py). Acting
goes through the family's ``policy`` with each step recorded, the rollout's forward pass reuses the record (the
weights do not change between a rollout's acting and its first gradient: pulled before, pushed after), a minibatch's
forward runs at the weights as they are now, and the backward writes into the .grad views of the worker's flat
gradient buffer.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import torch

from a3c.learn.model import ActorCritic, State
from a3c.learn.update.protocol import Minibatch, NetworkPass, Rollout, Unrolled
from a3c.spec.config import Config


class PassByHand(NetworkPass):
    """A family's passes by hand (``backprop``: the class with ``covers``, ``of``, ``record``, ``policy``,
    ``unroll``, ``forward``, ``backward`` and ``writes_all_grads``) as a network pass."""

    backprop: ClassVar[Any]

    @classmethod
    def supports(cls, config: Config, model: ActorCritic) -> str | None:
        why_not: str | None = cls.backprop.covers(model)
        return why_not

    def __init__(self, model: ActorCritic, config: Config, grads: torch.Tensor) -> None:
        passes = self.backprop.of(model)
        assert passes is not None, "a model this pass covers, its parameters' .grad views of the flat buffer"
        # the acting passes' activations (and a linear head's params) kept for the update, which then does not
        # compute them again
        passes.record(config.n_steps, config.envs_per_worker)
        self.passes, self.grads, self._policy = passes, grads, passes.policy

    def act(self, rollout: Rollout, step: int, state: State) -> tuple[torch.Tensor, State]:
        return self._policy(rollout.obs_np[step], step), state  # (no core: no state)

    def unroll(self, rollout: Rollout) -> Unrolled:
        final_obs = rollout.final_obs_np if rollout.any_truncated() else None
        return Unrolled(*self.passes.unroll(rollout.obs_np, final_obs))

    def forward(self, rollout: Rollout, minibatch: Minibatch) -> Unrolled:
        T, K = rollout.steps, rollout.envs
        flat = rollout.obs_np[:T].reshape(T * K, *rollout.obs_np.shape[2:])
        params, values, saved = self.passes.forward(flat[minibatch.samples])
        return Unrolled(params, values, None, saved)

    def backward(
        self, unrolled: Unrolled, dparams: np.ndarray | torch.Tensor, dvalues: np.ndarray | torch.Tensor
    ) -> None:
        if not self.passes.writes_all_grads:  # (a head under autograd accumulates: zeros first)
            self.grads.zero_()
        self.passes.backward(unrolled.saved, dparams, dvalues)
