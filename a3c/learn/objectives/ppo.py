"""The second objective (``--algo ppo``): PPO's clipped surrogate over a worker's own rollout, several epochs of
minibatches, each minibatch one gradient, on the reference path (autograd through the model and through the loss
written once in torch, a3c.learn.losses.clipped_surrogate_loss). No processes: the worker (a3c.run.worker) pulls the
weights before each minibatch and pushes each gradient; this module computes what is pushed.

The behaviour policy: the policy that acted. Its params are kept from acting (the worker stores each step's params
as ``act`` returned them) and its log-probabilities of the actions taken are computed from those, once per rollout;
its values and the GAE targets come from one forward pass over the rollout with the weights it acted with (the
worker has pushed nothing since it pulled them). Every minibatch's ratio is against that policy, however far the
shared model has moved since, by this worker's pushes or by others': the clip then stops the gradient of a sample
whose ratio has left [1 - c, 1 + c] in its advantage's direction, which is how this objective bounds staleness
(--max-policy-lag bounds it harder, in the worker).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from a3c.learn.distributions import Distribution
from a3c.learn.losses import clipped_surrogate_loss, gae_advantages, next_state_values, normalized_advantages
from a3c.learn.model import ActorCritic
from a3c.learn.update.protocol import Rollout
from a3c.spec.config import Config


@dataclass
class Targets:
    """What the behaviour policy leaves for a rollout's epochs, each [T, K] (sample (t, k) of the rollout):
    log pi_b(a_t|s_t), V_b(s_t), the GAE advantages and the returns (advantages + V_b)."""

    log_probs: torch.Tensor
    values: torch.Tensor
    advantages: torch.Tensor
    returns: torch.Tensor


class ClippedSurrogate:
    """One worker's PPO update on its ``model`` (whose parameters' ``.grad`` are views of the flat buffer ``grads``):
    ``targets`` once per rollout, then ``gradient`` for each of ``minibatches``."""

    def __init__(self, model: ActorCritic, dist: Distribution, config: Config, grads: torch.Tensor) -> None:
        self.model, self.dist, self.config, self.grads = model, dist, config, grads
        self.recurrent = bool(model.lstm)

    def targets(self, rollout: Rollout, behaviour_params: list[torch.Tensor]) -> Targets:
        """The behaviour policy's log-probabilities (from ``behaviour_params``: the T params [K, P] acting returned)
        and, by one forward pass with the model as it acted, its values and the GAE targets, with the bootstrap at
        truncation from V(final observation) (a3c.learn.losses.next_state_values)."""
        cfg, T, K = self.config, rollout.steps, rollout.envs
        with torch.no_grad():
            acted = torch.cat(behaviour_params).reshape(T * K, -1)
            actions = rollout.actions.reshape(T * K, *self.dist.action_shape)
            log_probs = self.dist.log_prob_entropy(acted.float(), actions)[0].reshape(T, K)
            dones = torch.maximum(rollout.terminated, rollout.truncated)
            truncated = rollout.any_truncated()
            _, values, final = self.model.unroll(
                rollout.obs, rollout.start_state, dones, rollout.final_obs if truncated else None, rollout.truncated
            )
            values = values.float()
            next_values = next_state_values(
                values[:T], values[T], values[:T] if final is None else final.float(), rollout.truncated
            )
            advantages, returns = gae_advantages(
                rollout.rewards, values[:T], next_values, rollout.terminated, dones, cfg.gamma, cfg.gae_lambda
            )
        return Targets(log_probs, values[:T].clone(), advantages, returns)

    def minibatches(self, rollout: Rollout, rng: np.random.Generator) -> list[np.ndarray]:
        """One epoch's minibatches, shuffled with ``rng``: indices of samples t * K + k (a feed-forward model), or of
        envs (an LSTM core: a minibatch is whole envs' rollouts, unrolled from their start state, since the state
        at step t depends on the steps before it). Every sample (env) is in exactly one."""
        T, K = rollout.steps, rollout.envs
        if self.recurrent:
            count, size = K, max(1, self.config.minibatch_size // T)
        else:
            count, size = T * K, self.config.minibatch_size
        order = rng.permutation(count)
        return [order[i : i + size] for i in range(0, count, size)]

    def gradient(self, rollout: Rollout, targets: Targets, index: np.ndarray) -> np.ndarray:
        """The gradient of the clipped objective over the minibatch ``index`` (of ``minibatches``), with the model's
        current weights, written into the flat gradient buffer; returns the loss's terms [total, policy, value,
        entropy] (float64)."""
        cfg, T = self.config, rollout.steps
        idx = torch.from_numpy(index)
        self.grads.zero_()  # autograd accumulates into the parameters' .grad
        with torch.enable_grad():
            if self.recurrent:
                obs = rollout.obs[:, idx]
                dones = torch.maximum(rollout.terminated, rollout.truncated)[:, idx]
                state = tuple(s[idx] for s in rollout.start_state)
                params, all_values, _ = self.model.unroll(obs, state, dones)
                values = all_values[:T].reshape(-1)

                def pick(x: torch.Tensor) -> torch.Tensor:
                    return x[:, idx].reshape(-1, *x.shape[2:])  # [T, k, ...] in the unroll's order, t-major

            else:
                flat = rollout.obs[:T].reshape(T * rollout.envs, *rollout.obs.shape[2:])
                params, values, _ = self.model(flat[idx])

                def pick(x: torch.Tensor) -> torch.Tensor:
                    return x.reshape(-1, *x.shape[2:])[idx]

            advantages = pick(targets.advantages)
            if cfg.normalize_advantage:  # per minibatch, as SB3's and CleanRL's PPO
                advantages = torch.from_numpy(normalized_advantages(advantages.numpy()))
            terms = clipped_surrogate_loss(
                self.dist,
                params.float(),
                values.float(),
                pick(rollout.actions),
                pick(targets.log_probs),
                pick(targets.values),
                advantages,
                pick(targets.returns),
                cfg.clip_range,
                cfg.clip_range_vf,
                cfg.ent_coef,
                cfg.vf_coef,
            )
            terms.total.backward()  # (a scalar root: no sympy, see a3c.learn.update.protocol.backward_from)
        return np.array([float(term.detach()) for term in terms], dtype=np.float64)
