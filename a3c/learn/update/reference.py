"""The reference update: autograd through the model (``AutogradNetwork``) and through the loss (``AutogradLoss``),
which is written here once, in torch, from a3c.learn.losses' targets and terms. It covers every model the flags can
build (an LSTM core, any torso, any head, any dtype) and every action distribution: it is the definition each fast
path (a3c.learn.update.paths) is held to by the conformance test, the path a model no fast path covers runs on, and the
one
``A3C_UPDATE_PATH=reference`` forces for a comparison.

A new A3C loss term is written here, in ``AutogradLoss.loss`` (PPO's reference loss gradient is
a3c.learn.objectives.ppo's ``AutogradSurrogate``, on this module's network pass): the fast paths that do not compute it
say so in their ``supports`` and the reference runs instead, until a benchmark shows one pays.
"""

from __future__ import annotations

import numpy as np
import torch

from a3c.learn.distributions import Distribution
from a3c.learn.losses import LossTerms, actor_critic_loss, gae_advantages, next_state_values, normalized_advantages
from a3c.learn.model import ActorCritic, State
from a3c.learn.update.protocol import LossGradient, LossGrads, Minibatch, NetworkPass, Rollout, Unrolled, backward_from
from a3c.spec.config import Config


class AutogradNetwork(NetworkPass):
    """The model's own forward passes (ActorCritic.policy, ActorCritic.unroll) and autograd's backward."""

    @classmethod
    def supports(cls, config: Config, model: ActorCritic) -> str | None:
        return None  # every model

    def __init__(self, model: ActorCritic, config: Config, grads: torch.Tensor) -> None:
        self.model, self.grads = model, grads

    def act(self, rollout: Rollout, step: int, state: State) -> tuple[torch.Tensor, State]:
        with torch.inference_mode():
            return self.model.policy(rollout.obs[step], state)

    def unroll(self, rollout: Rollout) -> Unrolled:
        dones = torch.maximum(rollout.terminated, rollout.truncated)
        truncated = rollout.any_truncated()
        params, values, final = self.model.unroll(
            rollout.obs, rollout.start_state, dones, rollout.final_obs if truncated else None, rollout.truncated
        )
        values_np = np.ascontiguousarray(values.detach().numpy())
        final_np = None if final is None else np.ascontiguousarray(final.detach().numpy())
        return Unrolled(params, values_np, final_np, (params, values))

    def forward(self, rollout: Rollout, minibatch: Minibatch) -> Unrolled:
        T, K = rollout.steps, rollout.envs
        with torch.enable_grad():
            if self.model.lstm:  # whole envs' rollouts, unrolled from their start state
                assert minibatch.envs is not None
                envs = torch.from_numpy(minibatch.envs)
                dones = torch.maximum(rollout.terminated, rollout.truncated)[:, envs]
                state = tuple(s[envs] for s in rollout.start_state)
                params, values, _ = self.model.unroll(rollout.obs[:, envs], state, dones)
            else:
                assert minibatch.samples is not None
                flat = rollout.obs[:T].reshape(T * K, *rollout.obs.shape[2:])
                params, values, _ = self.model(flat[torch.from_numpy(minibatch.samples)])
        rows = params.shape[0]
        values_np = np.ascontiguousarray(values.detach().reshape(-1)[:rows].numpy())
        return Unrolled(params, values_np, None, (params, values))

    def backward(
        self, unrolled: Unrolled, dparams: np.ndarray | torch.Tensor, dvalues: np.ndarray | torch.Tensor
    ) -> None:
        params, values = unrolled.saved
        rows = dparams.shape[0]  # (an unroll's values hold the boundary row too: [T + 1, K], t-major)
        self.grads.zero_()  # autograd accumulates into the parameters' .grad
        # (from one scalar root, not autograd.backward with gradient tensors: that imports sympy; backward_from)
        backward_from((params, values.reshape(-1)[:rows]), (torch.as_tensor(dparams), torch.as_tensor(dvalues)))


class AutogradLoss(LossGradient):
    """The A3C loss in torch (GAE targets with the bootstrap at truncation, --normalize-advantage, the policy, value
    and entropy terms: a3c.learn.losses), and its gradient with respect to the network's outputs by autograd."""

    @classmethod
    def supports(cls, config: Config, dist: Distribution, dtype: torch.dtype) -> str | None:
        return None  # every distribution, every dtype

    def __init__(self, config: Config, dist: Distribution, steps: int, envs: int) -> None:
        self.config, self.dist = config, dist

    def __call__(self, rollout: Rollout, unrolled: Unrolled) -> LossGrads:
        T = rollout.steps
        values = torch.from_numpy(unrolled.values)
        params = torch.as_tensor(unrolled.params).detach().requires_grad_(True)
        current = torch.from_numpy(unrolled.values[:T].reshape(-1)).requires_grad_(True)  # V(s_t): differentiated
        with torch.enable_grad():
            terms = self.loss(rollout, params, current, values, unrolled.final_values)
            terms.total.backward()  # (a scalar root: no sympy, see a3c.learn.update.protocol.backward_from)
        assert params.grad is not None and current.grad is not None
        loss_values = np.array([float(term.detach()) for term in terms], dtype=np.float64)
        return loss_values, params.grad, current.grad

    def loss(
        self,
        rollout: Rollout,
        params: torch.Tensor,
        current: torch.Tensor,
        values: torch.Tensor,
        final_values: np.ndarray | None,
    ) -> LossTerms:
        """The loss of one rollout: params [T K, P] and current = V(s_t) [T K] to differentiate; values [T + 1, K]
        (targets only), final_values [T, K] (V of the final observations) or None where no episode was truncated."""
        cfg, T = self.config, rollout.steps
        final = values[:T] if final_values is None else torch.from_numpy(final_values)  # (unused without truncation)
        next_values = next_state_values(values[:T], values[T], final, rollout.truncated)
        dones = torch.maximum(rollout.terminated, rollout.truncated)
        advantages, returns = gae_advantages(
            rollout.rewards, values[:T], next_values, rollout.terminated, dones, cfg.gamma, cfg.gae_lambda
        )
        # --normalize-advantage: the policy term's advantages only; the returns come from the raw ones
        policy_adv = (
            torch.from_numpy(normalized_advantages(advantages.numpy())) if cfg.normalize_advantage else advantages
        )
        actions = rollout.actions.reshape(T * rollout.envs, *self.dist.action_shape)
        return actor_critic_loss(
            self.dist,
            params,
            current,
            actions,
            policy_adv.reshape(-1),
            returns.reshape(-1),
            cfg.ent_coef,
            cfg.vf_coef,
        )
