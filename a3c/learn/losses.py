"""Pure functions from rollout tensors to advantages, returns and the two objectives' losses (A3C's actor-critic loss,
PPO's clipped surrogate), in torch (the references) and their numpy forms. No processes, no state.

Shapes: T = rollout length (n_steps), K = envs of one worker; every [T, K] tensor is indexed [step, env].

Terminated vs truncated (the bootstrap at truncation): an episode that *terminated* (the MDP reached a terminal
state) is worth nothing afterwards, so its target bootstraps from zero. An episode that was *truncated* (time limit)
did not end in the MDP: its target bootstraps from V(final observation), the observation the env returned with
truncated=True, not the reset observation that follows. The rollout boundary is a truncation of the same kind:
it bootstraps from V(observation after the last step). Both are expressed by `next_values`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import torch

from a3c.learn import estimators
from a3c.learn.distributions import Distribution


def next_state_values(
    values: torch.Tensor, last_values: torch.Tensor, final_values: torch.Tensor, truncated: torch.Tensor
) -> torch.Tensor:
    """V(s_{t+1}) for every step: values[t+1] inside the rollout, last_values [K] after its last step, and
    final_values[t] (V of the final observation) where the episode was truncated at step t. [T, K]"""
    next_values = torch.cat([values[1:], last_values.unsqueeze(0)], dim=0)
    return torch.where(truncated.bool(), final_values, next_values)


def gae_advantages(
    rewards: torch.Tensor,
    values: torch.Tensor,
    next_values: torch.Tensor,
    terminated: torch.Tensor,
    dones: torch.Tensor,
    gamma: float,
    gae_lambda: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation (Schulman et al. 2016) with terminated/truncated handled apart.

    delta_t = r_t + gamma * (1 - terminated_t) * next_values_t - values_t
    A_t     = delta_t + gamma * lambda * (1 - done_t) * A_{t+1},  A_T = 0
    where done_t = terminated_t or truncated_t (the trace stops at any episode end, the bootstrap only at
    termination). Returns (advantages, returns = advantages + values), both [T, K]. Advantages carry no gradient:
    they are targets, computed from detached values. (In numpy: ``rollout_targets``.)
    """
    dtype = values.dtype
    adv = estimators.gae(
        rewards.detach().cpu().to(dtype).numpy(),
        values.detach().cpu().numpy(),
        next_values.detach().cpu().to(dtype).numpy(),
        terminated.cpu().to(dtype).numpy(),
        dones.cpu().to(dtype).numpy(),
        gamma,
        gae_lambda,
    )
    advantages = torch.from_numpy(adv).to(values.device)
    return advantages, advantages + values


def rollout_targets(
    rewards: np.ndarray,
    values: np.ndarray,
    final_values: np.ndarray | None,
    terminated: np.ndarray,
    truncated: np.ndarray,
    gamma: float,
    gae_lambda: float,
) -> tuple[np.ndarray, np.ndarray]:
    """``next_state_values`` and ``gae_advantages`` in one, in numpy, as a worker's update computes them: values
    [T+1, K] (the rollout's and the boundary observation's), final_values [T, K] (V of the final observation; None
    when no episode was truncated), the rest [T, K] -> (advantages, returns), [T, K] each. The same arithmetic as the
    two torch functions; on [T, K] = [5, 8] arrays a numpy operation costs about a microsecond where torch's dispatch
    costs several, and this is on every update."""
    current = values[:-1]
    following = estimators.next_values(values, final_values, truncated)
    adv = estimators.gae(rewards, current, following, terminated, np.maximum(terminated, truncated), gamma, gae_lambda)
    return adv, adv + current


def normalized_advantages(advantages: np.ndarray) -> np.ndarray:
    """(A - mean A) / (std A + 1e-8) over one update's samples, the std with Bessel's correction (as SB3's
    normalize_advantage): the policy gradient's scale is then that of the score function whatever the rewards' scale,
    while the entropy bonus and the value loss keep theirs. A single sample centres to 0. A new array, in the
    dtype of ``advantages``; the value targets are computed from the raw advantages, never from these."""
    wide = advantages.astype(np.float64)  # (float32 advantages far from 0 lose their spread to the mean's rounding)
    centred = wide - np.add.reduce(wide, axis=None) / wide.size
    if wide.size > 1:
        centred /= math.sqrt(float(np.add.reduce(centred * centred, axis=None)) / (wide.size - 1)) + 1e-8
    return centred.astype(advantages.dtype, copy=False)


def n_step_returns(
    rewards: torch.Tensor, next_values: torch.Tensor, terminated: torch.Tensor, dones: torch.Tensor, gamma: float
) -> torch.Tensor:
    """The classic A3C target: R_t = r_t + gamma * R_{t+1} inside an episode, bootstrapped from next_values where
    the episode was cut (truncation or the rollout boundary) and from 0 where it terminated. [T, K]

    Equal to gae_advantages(...)[1] with gae_lambda = 1.
    """
    not_terminated = 1.0 - terminated.to(rewards.dtype)
    not_done = 1.0 - dones.to(rewards.dtype)
    returns = torch.zeros_like(rewards)
    following = next_values[-1]
    for t in range(rewards.shape[0] - 1, -1, -1):
        # inside an episode the next state's worth is R_{t+1}; at an episode end or the boundary it is V(s_{t+1})
        bootstrap = not_done[t] * following + (1.0 - not_done[t]) * next_values[t]
        returns[t] = rewards[t] + gamma * not_terminated[t] * bootstrap
        following = returns[t]
    return returns


class LossTerms(NamedTuple):
    total: torch.Tensor  # scalar to backpropagate
    policy: torch.Tensor
    value: torch.Tensor
    entropy: torch.Tensor


def actor_critic_loss(
    dist: Distribution,
    params: torch.Tensor,
    values: torch.Tensor,
    actions: torch.Tensor,
    advantages: torch.Tensor,
    returns: torch.Tensor,
    ent_coef: float,
    vf_coef: float,
) -> LossTerms:
    """A3C loss over a batch of B samples: the policy distribution's params [B, P] (logits for Categorical),
    values [B], actions [B, ...], advantages [B], returns [B].

    policy = -mean(log pi(a|s) * A)   (A treated as a constant)
    value  = mean((R - V(s))^2) / 2
    entropy = mean(H(pi(.|s)))
    total  = policy + vf_coef * value - ent_coef * entropy
    """
    action_log_probs, entropies = dist.log_prob_entropy(params, actions)
    errors = values - returns.detach()
    return LossTerms(*_combine(action_log_probs, advantages.detach(), entropies, errors, ent_coef, vf_coef))


def clipped_surrogate_loss(
    dist: Distribution,
    params: torch.Tensor,
    values: torch.Tensor,
    actions: torch.Tensor,
    behaviour_log_probs: torch.Tensor,
    behaviour_values: torch.Tensor,
    advantages: torch.Tensor,
    returns: torch.Tensor,
    clip_range: float,
    clip_range_vf: float | None,
    ent_coef: float,
    vf_coef: float,
) -> LossTerms:
    """PPO's clipped objective (Schulman et al. 2017) over a minibatch of B samples: params [B, P] and values [B] of
    the network now, and of the policy that acted (the behaviour policy) its log pi_b(a|s) [B] and V_b(s) [B];
    advantages [B] (normalised by the caller where asked) and returns [B], all targets.

    ratio   = pi(a|s) / pi_b(a|s)
    policy  = -mean(min(ratio * A, clip(ratio, 1 - c, 1 + c) * A))
    value   = mean((V(s) - R)^2) / 2, or with ``clip_range_vf`` cv:
              mean(max((V(s) - R)^2, (V_b(s) + clip(V(s) - V_b(s), -cv, cv) - R)^2)) / 2
    entropy = mean(H(pi(.|s)))
    total   = policy + vf_coef * value - ent_coef * entropy
    The value term keeps actor_critic_loss's 1/2 (CleanRL's convention: SB3's PPO's vf_coef c is a3c's 2c)."""
    log_probs, entropies = dist.log_prob_entropy(params, actions)
    ratio = torch.exp(log_probs - behaviour_log_probs.detach())
    adv = advantages.detach()
    policy_loss = -torch.minimum(ratio * adv, ratio.clamp(1.0 - clip_range, 1.0 + clip_range) * adv).mean()
    errors = values - returns.detach()
    if clip_range_vf is None:
        value_loss = 0.5 * (errors**2).mean()
    else:
        old = behaviour_values.detach()
        clipped = old + (values - old).clamp(-clip_range_vf, clip_range_vf) - returns.detach()
        value_loss = 0.5 * torch.maximum(errors**2, clipped**2).mean()
    entropy = entropies.mean()
    return LossTerms(policy_loss + vf_coef * value_loss - ent_coef * entropy, policy_loss, value_loss, entropy)


def _combine(
    action_log_probs: Any,
    advantages: Any,
    entropies: Any,
    errors: Any,
    ent_coef: float,
    vf_coef: float,
    mean: Callable[[Any], Any] = lambda x: x.mean(),
) -> tuple[Any, Any, Any, Any]:
    """(total, policy, value, entropy) from the per-sample terms, in one formula for both kinds of arrays: torch
    tensors (actor_critic_loss: the loss to differentiate) and numpy arrays (_loss_values: the numbers the worker
    records, with ``mean`` = _np_mean)."""
    policy_loss = -mean(action_log_probs * advantages)
    value_loss = 0.5 * mean(errors**2)
    entropy = mean(entropies)
    return policy_loss + vf_coef * value_loss - ent_coef * entropy, policy_loss, value_loss, entropy


def _np_mean(x: np.ndarray) -> float:
    """A numpy vector's mean as a Python float: ndarray.mean() goes through numpy's Python-level wrapper (~4 us on
    40 numbers), the add ufunc's reduce straight to C (under 1 us); this runs three times on every update."""
    return float(np.add.reduce(x)) / x.shape[0]


def actor_critic_loss_grads(
    dist: Distribution,
    params: torch.Tensor | np.ndarray,
    values: torch.Tensor | np.ndarray,
    actions: torch.Tensor | np.ndarray,
    advantages: torch.Tensor | np.ndarray,
    returns: torch.Tensor | np.ndarray,
    ent_coef: float,
    vf_coef: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The loss of actor_critic_loss (same arguments, as CPU tensors or numpy arrays), with its gradient with respect
    to the distribution's params and the values, so that the loss itself adds nothing to the network's autograd
    graph: ``torch.autograd.backward((params, values), (dparams, dvalues))`` then backpropagates only through the
    network. Returns numpy arrays: (the loss's terms [total, policy, value, entropy] in float64, dparams [B, P],
    dvalues [B]).

    The policy and entropy part comes in closed form from the distribution where it has one, in numpy where the
    family has a numpy form (Categorical: on the worker's update path the whole function is then a few dozen numpy
    operations, no torch dispatch); otherwise from autograd over the head's output alone. The value part is always
    closed form:
      d (c_v value) / d V_i = (c_v / B) * (V_i - R_i)
    """
    batch = params.shape[0]
    errors = _numpy(values) - _numpy(returns)
    dvalues = errors * (vf_coef / batch)
    adv = _numpy(advantages)
    closed = policy_term_grads(dist, params, actions, adv, ent_coef)
    action_log_probs_np, entropies_np, dparams_np = closed
    return _loss_values(action_log_probs_np, adv, entropies_np, errors, ent_coef, vf_coef), dparams_np, dvalues


def policy_term_grads(
    dist: Distribution,
    params: torch.Tensor | np.ndarray,
    actions: torch.Tensor | np.ndarray,
    weights: np.ndarray,
    ent_coef: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(log pi(a|s) [B], H(pi(.|s)) [B], d/d params [B, P]) of -mean(weights * log pi(a|s)) - ent_coef mean(H), the
    weights constants: A3C's advantages, or PPO's per-sample weights (a3c.learn.objectives.ppo). In closed form from
    the distribution where it has one (numpy for the Categorical families, torch for the Gaussian ones), else by
    autograd over the head's output alone."""
    z = _numpy(params)
    closed = dist.policy_grad_np(z, _numpy(actions), weights.astype(z.dtype, copy=False), ent_coef)
    if closed is not None:
        return closed
    tensors = [torch.as_tensor(x) for x in (params, actions, weights)]
    closed_t = dist.policy_grad(tensors[0].detach(), tensors[1], tensors[2], ent_coef)
    if closed_t is None:
        leaf = tensors[0].detach().requires_grad_(True)
        with torch.enable_grad():
            action_log_probs, entropies = dist.log_prob_entropy(leaf, tensors[1])
            surrogate = -(action_log_probs * tensors[2]).mean() - ent_coef * entropies.mean()
            (dparams,) = torch.autograd.grad(surrogate, leaf)
        closed_t = (action_log_probs, entropies, dparams)
    return _numpy(closed_t[0]), _numpy(closed_t[1]), _numpy(closed_t[2])


def action_log_probs(
    dist: Distribution, params: torch.Tensor | np.ndarray, actions: torch.Tensor | np.ndarray
) -> np.ndarray:
    """log pi(a|s) [B] in the params' dtype: the distribution's numpy form where it has one, else
    ``policy_term_grads``'s first output (which computes a gradient beside it)."""
    z, a = _numpy(params), _numpy(actions)
    log_probs = dist.log_prob_np(z, a)
    if log_probs is not None:
        return log_probs
    return policy_term_grads(dist, z, a, np.zeros(z.shape[0], dtype=z.dtype), 0.0)[0]


def _numpy(x: torch.Tensor | np.ndarray) -> np.ndarray:
    """A CPU tensor's numpy view (detached first where it carries a graph: detach costs a microsecond a call); an
    array as it is."""
    if isinstance(x, np.ndarray):
        return x
    return (x.detach() if x.requires_grad else x).cpu().numpy()


def _loss_values(
    action_log_probs: np.ndarray,
    advantages: np.ndarray,
    entropies: np.ndarray,
    errors: np.ndarray,
    ent_coef: float,
    vf_coef: float,
) -> np.ndarray:
    """_combine's four terms as numbers, for the record (the gradients are computed apart), in numpy, in the
    inputs' precision: float64 [total, policy, value, entropy]."""
    adv = advantages.astype(action_log_probs.dtype, copy=False)
    terms = _combine(action_log_probs, adv, entropies, errors, ent_coef, vf_coef, _np_mean)
    return np.array(terms, dtype=np.float64)
