"""PPO's objective (``--algo ppo``; Schulman et al. 2017): the clipped surrogate over a worker's own rollout, several
epochs of minibatches, each minibatch one gradient pushed to the shared model after a pull (DPPO / APPO in spirit).

The plan (``PPOUpdate.plan``), once a rollout, with the weights that acted (nothing has been pushed since): the
rollout's forward pass (a fast path reuses what acting recorded), the behaviour policy's log-probabilities of the
actions taken and its values, and the targets by the named estimator (a3c.learn.estimators: ``--targets gae`` or
``vtrace``); then --n-epochs shuffled passes over the samples in minibatches of at least --minibatch-size (the
remainder of a division is spread over the others, never a short minibatch of its own: a 1-sample minibatch's
normalised advantage is 0 or undefined, yet it would push a full step). Samples whose targets are not finite (a
non-finite observation or reward: GAE carries it back through its env's earlier steps) are left out of every
minibatch and counted; a rollout with none left is skipped whole.

A minibatch's gradient (``PPOUpdate.gradient``): the network's outputs on its samples with the weights as they are
now (``NetworkPass.forward``), the loss's terms and its gradient with respect to them (``SurrogateGradient``: the
reference ``AutogradSurrogate``, autograd through a3c.learn.losses.clipped_surrogate_loss, or ``ClosedFormSurrogate``,
the same derivative written out), and the backward pass. Every ratio is against the policy that acted, however far
the shared model has moved since, by this worker's pushes or by others': the clip stops the gradient of a sample whose
ratio has left [1 - c, 1 + c] in its advantage's direction. With ``--targets vtrace`` each epoch after the first
recomputes the targets with the freshly pulled weights (V-trace's truncated importance weights between them and the
acting policy), so the value targets follow the shared model; --max-policy-lag (the learn loop) bounds staleness
harder.

Diagnostics, per minibatch, as CleanRL and SB3 log them: approx_kl = mean((r - 1) - log r) (Schulman's low-variance
estimator of KL(acting || now)), clip_fraction = the share of samples with |r - 1| > c, and the rollout's
explained_variance = 1 - Var(R - V_b) / Var(R) of the acting values V_b against their targets R.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod

import numpy as np
import torch

from a3c.learn.distributions import Distribution
from a3c.learn.estimators import ESTIMATORS, next_values
from a3c.learn.losses import action_log_probs, clipped_surrogate_loss, normalized_advantages, policy_term_grads
from a3c.learn.model import ActorCritic
from a3c.learn.terms import PPO_TERMS
from a3c.learn.update.protocol import Learner, Minibatch, NetworkPass, Rollout, Unrolled, UpdatePath
from a3c.spec.config import Config

TERMS: tuple[str, ...] = PPO_TERMS


class Batch:
    """A minibatch's share of the rollout's targets, each [B] in ``Minibatch.samples``' order: the actions, the
    behaviour policy's log pi_b(a|s) and V_b(s), the advantages (normalised per minibatch where asked) and the value
    targets."""

    def __init__(
        self,
        actions: np.ndarray,
        log_probs: np.ndarray,
        values: np.ndarray,
        advantages: np.ndarray,
        returns: np.ndarray,
    ) -> None:
        self.actions, self.log_probs, self.values = actions, log_probs, values
        self.advantages, self.returns = advantages, returns


class SurrogateGradient(ABC):
    """The clipped surrogate's terms and its gradient with respect to the network's outputs on a minibatch, for the
    action distributions and dtypes ``supports`` accepts."""

    @classmethod
    @abstractmethod
    def supports(cls, config: Config, dist: Distribution, dtype: torch.dtype) -> str | None: ...

    def __init__(self, config: Config, dist: Distribution) -> None:
        self.config, self.dist = config, dist

    @abstractmethod
    def __call__(
        self, params: np.ndarray | torch.Tensor, values: np.ndarray, batch: Batch
    ) -> tuple[np.ndarray, np.ndarray | torch.Tensor, np.ndarray | torch.Tensor]:
        """(terms [total, policy, value, entropy, approx_kl, clip_fraction] float64, d loss / d params [B, P],
        d loss / d values [B]) for the network's outputs ``params`` [B, P] and ``values`` [B]."""


class AutogradSurrogate(SurrogateGradient):
    """The reference: autograd through a3c.learn.losses.clipped_surrogate_loss (the objective written once, in
    torch), for every distribution and dtype."""

    @classmethod
    def supports(cls, config: Config, dist: Distribution, dtype: torch.dtype) -> str | None:
        return None

    def __call__(
        self, params: np.ndarray | torch.Tensor, values: np.ndarray, batch: Batch
    ) -> tuple[np.ndarray, np.ndarray | torch.Tensor, np.ndarray | torch.Tensor]:
        cfg = self.config
        leaf = torch.as_tensor(params).detach().requires_grad_(True)
        current = torch.as_tensor(values).detach().requires_grad_(True)
        dtype = leaf.dtype
        with torch.enable_grad():
            terms = clipped_surrogate_loss(
                self.dist,
                leaf,
                current,
                torch.as_tensor(batch.actions),
                torch.as_tensor(batch.log_probs, dtype=dtype),
                torch.as_tensor(batch.values, dtype=dtype),
                torch.as_tensor(batch.advantages, dtype=dtype),
                torch.as_tensor(batch.returns, dtype=dtype),
                cfg.clip_range,
                cfg.clip_range_vf,
                cfg.ent_coef,
                cfg.vf_coef,
            )
            terms.total.backward()  # (a scalar root: no sympy, see a3c.learn.update.protocol.backward_from)
        assert leaf.grad is not None and current.grad is not None
        with torch.no_grad():
            log_probs = self.dist.log_prob_entropy(leaf.detach(), torch.as_tensor(batch.actions))[0]
        kl, clipped = ratio_diagnostics(log_probs.double().numpy(), batch.log_probs, cfg.clip_range)
        values_of_terms = [float(term.detach()) for term in terms]
        return np.array([*values_of_terms, kl, clipped], dtype=np.float64), leaf.grad, current.grad


class ClosedFormSurrogate(SurrogateGradient):
    """The clipped surrogate's derivative written out (the fast paths' loss gradient), in numpy, from the
    distribution's closed-form policy gradient (a3c.learn.losses.policy_term_grads) with per-sample weights:

        d policy / d log pi_i = -(1/B) g_i r_i,   g_i = A_i (w_i + (1 - w_i) [1 - c <= r_i <= 1 + c])
        d value / d V_i       = (1/B) (u_i e_i + (1 - u_i) e'_i [|V_i - V_b,i| <= cv])     (with --clip-range-vf)

    where e = V - R, e' = V_b + clip(V - V_b, -cv, cv) - R, and w_i (u_i) is 1 where the unclipped term is the
    smaller (the larger) of the two, 0 where the clipped one is, 1/2 at a tie (torch.minimum's and torch.maximum's
    gradient, which the reference's autograd takes: at the first minibatch every ratio is 1, a tie)."""

    @classmethod
    def supports(cls, config: Config, dist: Distribution, dtype: torch.dtype) -> str | None:
        return None  # (a family without a closed form takes autograd over its head's output alone)

    def __call__(
        self, params: np.ndarray | torch.Tensor, values: np.ndarray, batch: Batch
    ) -> tuple[np.ndarray, np.ndarray | torch.Tensor, np.ndarray | torch.Tensor]:
        cfg, dist = self.config, self.dist
        size = values.shape[0]
        adv = batch.advantages.astype(values.dtype, copy=False)
        log_probs = action_log_probs(dist, params, batch.actions)  # log pi(a|s) now
        ratio = np.exp(log_probs.astype(np.float64) - batch.log_probs)
        clip = cfg.clip_range
        clipped_ratio = np.clip(ratio, 1.0 - clip, 1.0 + clip)
        unclipped, clipped = ratio * adv, clipped_ratio * adv
        smaller = np.where(unclipped < clipped, 1.0, np.where(unclipped > clipped, 0.0, 0.5))
        inside = (ratio >= 1.0 - clip) & (ratio <= 1.0 + clip)
        weights = adv * (smaller + (1.0 - smaller) * inside) * ratio
        _, entropies, dparams = policy_term_grads(
            dist, params, batch.actions, weights.astype(values.dtype), cfg.ent_coef
        )
        policy_loss = -float(np.add.reduce(np.minimum(unclipped, clipped))) / size
        errors = values.astype(np.float64) - batch.returns
        if cfg.clip_range_vf is None:
            value_loss = 0.5 * float(np.add.reduce(errors * errors)) / size
            derror = errors
        else:
            cv, old = cfg.clip_range_vf, batch.values
            change = values.astype(np.float64) - old
            errors_c = old + np.clip(change, -cv, cv) - batch.returns
            sq, sq_c = errors * errors, errors_c * errors_c
            larger = np.where(sq > sq_c, 1.0, np.where(sq < sq_c, 0.0, 0.5))
            value_loss = 0.5 * float(np.add.reduce(np.maximum(sq, sq_c))) / size
            derror = larger * errors + (1.0 - larger) * errors_c * (np.abs(change) <= cv)
        dvalues = (derror * (cfg.vf_coef / size)).astype(values.dtype)
        entropy = float(np.add.reduce(entropies.astype(np.float64))) / size
        kl, clip_fraction = ratio_diagnostics(log_probs.astype(np.float64), batch.log_probs, clip)
        total = policy_loss + cfg.vf_coef * value_loss - cfg.ent_coef * entropy
        terms = np.array([total, policy_loss, value_loss, entropy, kl, clip_fraction], dtype=np.float64)
        return terms, dparams, dvalues


def ratio_diagnostics(log_probs: np.ndarray, behaviour_log_probs: np.ndarray, clip_range: float) -> tuple[float, float]:
    """(approx_kl = mean((r - 1) - log r), clip_fraction = mean(|r - 1| > c)) of the ratios r = pi / pi_b."""
    log_ratio = log_probs - behaviour_log_probs
    ratio = np.exp(log_ratio)
    size = max(1, log_ratio.shape[0])
    kl = float(np.add.reduce((ratio - 1.0) - log_ratio)) / size
    return kl, float(np.count_nonzero(np.abs(ratio - 1.0) > clip_range)) / size


def explained_variance(predicted: np.ndarray, targets: np.ndarray) -> float:
    """1 - Var(targets - predicted) / Var(targets) (NaN where the targets do not vary), as SB3 and CleanRL log it."""
    spread = float(np.var(targets))
    return math.nan if spread == 0.0 else 1.0 - float(np.var(targets - predicted)) / spread


def split(order: np.ndarray, size: int) -> list[np.ndarray]:
    """``order`` in consecutive minibatches of at least ``size`` (one of everything where there are fewer): the
    remainder of len // size is spread over the minibatches (np.array_split), never a short one of its own."""
    count = max(1, len(order) // max(1, size))
    return np.array_split(order, count)


class PPOUpdate(Learner):
    """PPO's learner on one path: a network pass and a surrogate gradient (see the module docstring)."""

    terms: tuple[str, ...] = TERMS

    def __init__(
        self,
        name: str,
        network: NetworkPass,
        loss: SurrogateGradient,
        model: ActorCritic,
        dist: Distribution,
        config: Config,
    ) -> None:
        self.name, self.network, self.loss, self.dist, self.config = name, network, loss, dist, config
        self.act = network.act
        self.recurrent = bool(model.lstm)
        self.estimator_name = config.targets
        self.estimator = ESTIMATORS[self.estimator_name]
        self.dropped_samples = 0  # samples left out for non-finite targets, over the worker's life (counted)
        # the rollout in hand's targets, flat [T K] in t-major order (set by ``plan``)
        self.actions = np.zeros(0)
        self.log_probs = np.zeros(0)
        self.values = np.zeros(0)
        self.advantages = np.zeros(0)
        self.returns = np.zeros(0)
        self.explained = math.nan
        self.targets_epoch = 0  # the epoch the targets in hand were computed for (V-trace recomputes them)

    def plan(self, rollout: Rollout, rng: np.random.Generator) -> list[Minibatch]:
        cfg, T, K = self.config, rollout.steps, rollout.envs
        with torch.no_grad():
            unrolled = self.network.unroll(rollout)  # the weights that acted: a fast path's record is reused
        params = _numpy(unrolled.params)[: T * K]
        actions = rollout.actions_np.reshape(T * K, *self.dist.action_shape)
        self.actions = actions
        self.log_probs = action_log_probs(self.dist, params, actions).astype(np.float64)
        self.targets(rollout, unrolled, None)
        self.targets_epoch = 0
        self.values = unrolled.values[:T].astype(np.float64).reshape(-1)
        finite = np.isfinite(self.advantages) & np.isfinite(self.returns) & np.isfinite(self.log_probs)
        self.explained = explained_variance(self.values[finite], self.returns[finite]) if finite.any() else math.nan
        if self.recurrent:  # a minibatch is whole envs' rollouts (the state at step t depends on the steps before it)
            good_envs = np.flatnonzero(finite.reshape(T, K).all(axis=0))
            self.dropped_samples += T * (K - len(good_envs))
            groups = [split(rng.permutation(good_envs), max(1, cfg.minibatch_size // T)) for _ in range(cfg.n_epochs)]
            steps = np.arange(T)[:, None] * K
            return [
                Minibatch((steps + envs[None, :]).reshape(-1), envs, True, epoch)
                for epoch, epoch_groups in enumerate(groups)
                for envs in epoch_groups
                if len(envs)
            ]
        good = np.flatnonzero(finite)
        self.dropped_samples += T * K - len(good)
        if not len(good):
            return []
        return [
            Minibatch(samples, None, True, epoch)
            for epoch in range(cfg.n_epochs)
            for samples in split(good[rng.permutation(len(good))], cfg.minibatch_size)
        ]

    def targets(self, rollout: Rollout, unrolled: Unrolled, log_rhos: np.ndarray | None) -> None:
        """The advantages and value targets [T K] by the estimator, from ``unrolled`` (its values and the final
        observations'), with ``log_rhos`` [T, K] the current policy's log-ratio to the acting one (V-trace)."""
        cfg, T = self.config, rollout.steps
        values = unrolled.values.astype(np.float64)
        final = None if unrolled.final_values is None else unrolled.final_values.astype(np.float64)
        terminated = rollout.terminated_np.astype(np.float64)
        dones = np.maximum(terminated, rollout.truncated_np)
        advantages, returns = self.estimator(
            rollout.rewards_np.astype(np.float64),
            values[:T],
            next_values(values, final, rollout.truncated_np),
            terminated,
            dones,
            cfg.gamma,
            cfg.gae_lambda,
            log_rhos,
            cfg.vtrace_rho_bar,
            cfg.vtrace_c_bar,
        )
        self.advantages, self.returns = advantages.reshape(-1), returns.reshape(-1)

    def gradient(self, rollout: Rollout, minibatch: Minibatch) -> np.ndarray:
        if self.estimator_name == "vtrace" and minibatch.epoch > self.targets_epoch:
            self.retarget(rollout)  # a new epoch: its first minibatch's pull has just brought the weights it trains
            self.targets_epoch = minibatch.epoch
        index = minibatch.samples
        assert index is not None
        advantages = self.advantages[index]
        if self.config.normalize_advantage:  # per minibatch, as SB3's and CleanRL's PPO
            advantages = normalized_advantages(advantages)
        batch = Batch(self.actions[index], self.log_probs[index], self.values[index], advantages, self.returns[index])
        out = self.network.forward(rollout, minibatch)
        terms, dparams, dvalues = self.loss(out.params, out.values, batch)
        self.network.backward(out, dparams, dvalues)
        return np.append(terms, self.explained)

    def retarget(self, rollout: Rollout) -> None:
        """--targets vtrace, at an epoch's start: the targets again with the weights as they are now (just pulled),
        weighted by their log-ratio to the policy that acted."""
        T, K = rollout.steps, rollout.envs
        with torch.no_grad():
            unrolled = self.network.unroll(rollout)
        params = _numpy(unrolled.params)[: T * K]
        now = action_log_probs(self.dist, params, self.actions).astype(np.float64)
        log_rhos = np.nan_to_num((now - self.log_probs).reshape(T, K), nan=0.0, posinf=0.0, neginf=0.0)
        self.targets(rollout, unrolled, log_rhos)


def _numpy(x: np.ndarray | torch.Tensor) -> np.ndarray:
    return x if isinstance(x, np.ndarray) else x.detach().numpy()


class PPOObjective:
    """``--algo ppo``."""

    name = "ppo"
    terms: tuple[str, ...] = TERMS

    def learner(
        self, path: UpdatePath, model: ActorCritic, dist: Distribution, config: Config, grads: torch.Tensor
    ) -> PPOUpdate:
        return PPOUpdate(path.name, path.network(model, config, grads), path.loss(config, dist), model, dist, config)


PPO = PPOObjective()
