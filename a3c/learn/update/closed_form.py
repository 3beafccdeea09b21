"""The loss's gradient with respect to the network's outputs in closed form (a fast path's loss gradient,
a3c.learn.update.paths): the targets in numpy (a3c.learn.losses.rollout_targets, normalized_advantages) and the policy
and
entropy terms' gradient from the distribution's own closed form (``policy_grad_np`` in numpy for the Categorical
families, ``policy_grad`` in torch for the Gaussian ones; autograd over the head's output alone for a family without
one), the value term's written out (a3c.learn.losses.actor_critic_loss_grads). The same numbers as the reference's
autograd through a3c.learn.losses.actor_critic_loss, to float rounding (tests/learn/update/test_paths.py), without
autograd's per-operation bookkeeping: on a rollout of 40 samples a few dozen numpy operations.
"""

from __future__ import annotations

import torch

from a3c.learn.distributions import Distribution
from a3c.learn.losses import actor_critic_loss_grads, normalized_advantages, rollout_targets
from a3c.learn.update.protocol import LossGradient, LossGrads, Rollout, Unrolled
from a3c.spec.config import Config


class ClosedFormLoss(LossGradient):
    """The A3C loss's gradient in closed form, for every action distribution and dtype."""

    @classmethod
    def supports(cls, config: Config, dist: Distribution, dtype: torch.dtype) -> str | None:
        return None  # (a family without a closed form takes autograd over its head's output alone)

    def __init__(self, config: Config, dist: Distribution, steps: int, envs: int) -> None:
        self.config, self.dist = config, dist
        self.batch_actions = (steps * envs, *dist.action_shape)

    def __call__(self, rollout: Rollout, unrolled: Unrolled) -> LossGrads:
        cfg, values = self.config, unrolled.values
        # the bootstrap (V(s_{t+1}): the final observation's where an episode was truncated) and GAE, in numpy on
        # the rollout buffers' memory
        adv, returns = rollout_targets(
            rollout.rewards_np,
            values,
            unrolled.final_values,
            rollout.terminated_np,
            rollout.truncated_np,
            cfg.gamma,
            cfg.gae_lambda,
        )
        # --normalize-advantage: the policy gradient's advantages only; the returns came from the raw ones
        policy_adv = normalized_advantages(adv) if cfg.normalize_advantage else adv
        return actor_critic_loss_grads(
            self.dist,
            unrolled.params,
            values[:-1].reshape(-1),
            rollout.actions_np.reshape(self.batch_actions),
            policy_adv.reshape(-1),
            returns.reshape(-1),
            cfg.ent_coef,
            cfg.vf_coef,
        )
