"""Policy distributions: what the worker, the loss and evaluation ask of the policy head, one class per action-space
family, chosen in one place (``make_distribution``). Nothing else in a3c tests which kind of action space it has.

A distribution is stateless: every method takes the head's output ``params`` [B, param_dim] (for Categorical, the
logits). The worker samples with ``sample`` (cheap, numpy), evaluation acts with ``mode``, the loss uses
``log_prob_entropy`` (differentiable) or, where the family has one, ``policy_grad`` (the policy and entropy terms'
gradient with respect to ``params`` in closed form: autograd then runs only through the network). ``make_head``
builds the network's last layer, the one module whose output is ``params``.

The families: Categorical (Discrete), independent Categoricals (MultiDiscrete), and a diagonal Gaussian (Box) with
a state-independent learned log-std. The Gaussian is *clipped*, not squashed: the env is stepped with the sample
clipped to the bounds while the log-prob is that of the unclipped sample (kept in the rollout buffer), the entropy is
the Gaussian's closed form and the deterministic action is the mean. A tanh-squashed Gaussian would keep every
action inside the bounds, but its entropy has no closed form (it needs a sample estimate, noisy in a loss of 5-step
rollouts) and its log-prob needs the log-det correction at every sample; clipping costs neither, is what SB3's A2C
does (its rl-zoo3 presets for Pendulum and the continuous LunarLander use it), and its one bias (the probability mass
beyond a bound acts as the bound) shrinks as the policy sharpens.

That bias has a cost where a mean lies past a bound: every sample there reaches the env as the bound, whatever it
was, so the advantage says nothing about it, and the density's gradient for that dimension is noise, large where the
std is small (it scales with 1 / sigma), that enters the shared layers with every update. ``--clipped-log-prob``
(Fujita & Maeda 2018, "Clipped Action Policy Gradient") gives the loss the log-probability of the action the env was
given: for a sample beyond a bound, log P(x beyond the bound) = log Phi(distance / sigma). Its gradient moves the
mean toward or away from the bound as the advantage of the bound's action says, and vanishes as reaching the bound
becomes certain; within the bounds the term is the density, as without the option. It estimates the same policy
gradient without bias and with less variance (the paper's result); the entropy stays the Gaussian's. A policy that
learns to saturate its actions gains most: HalfCheetah's trained policies hold 91-95% of their means beyond [-1, 1]
(maximal torques); without the option seed 1 collapsed at 600k steps, with it neither seed 1 nor 2 did
(docs/benchmarks/continuous.md).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from a3c.spec.errors import UserError

_ARANGES: dict[int, np.ndarray] = {}


def _arange(n: int) -> np.ndarray:
    """np.arange(n), made once per n (the row index of every update's fancy indexing)."""
    rows = _ARANGES.get(n)
    if rows is None:
        rows = _ARANGES[n] = np.arange(n)
        rows.flags.writeable = False
    return rows


def _check_rows(params: torch.Tensor, rngs: Sequence[np.random.Generator]) -> None:
    """``sample_rows``' rule: one sampler a row."""
    if len(rngs) != params.shape[0]:
        raise ValueError(f"sample_rows: {len(rngs)} samplers for {params.shape[0]} rows")


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
        where the family has no closed form (the loss then differentiates log_prob_entropy). By default
        ``policy_grad_np``'s, on the tensors' memory."""
        z = params.detach().cpu().numpy()
        closed = self.policy_grad_np(
            z, actions.cpu().numpy(), advantages.detach().cpu().numpy().astype(z.dtype, copy=False), ent_coef
        )
        if closed is None:
            return None
        log_probs, entropies, dparams = closed
        return torch.from_numpy(log_probs), torch.from_numpy(entropies), torch.from_numpy(dparams)

    def policy_grad_np(
        self, params: np.ndarray, actions: np.ndarray, advantages: np.ndarray, ent_coef: float
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """``policy_grad`` on numpy arrays, in numpy (the worker's update path, where each torch operation on a few
        dozen numbers costs several times its arithmetic), or None where the family has no numpy form."""
        return None

    def log_prob_np(self, params: np.ndarray, actions: np.ndarray) -> np.ndarray | None:
        """log pi(a|s) [B] alone, in numpy, in the params' dtype (PPO's ratio, before the weights of its gradient are
        known), or None where the family has none (``policy_grad_np``'s first output serves then)."""
        return None

    def env_actions(self, actions: np.ndarray) -> list[Any]:
        """The rows of ``sample``/``mode`` as the env's step() takes them, one per env."""
        return list(actions)

    def new_rollout(self, n_envs: int, rng: np.random.Generator) -> None:
        """A rollout of ``n_envs`` envs starts (the worker calls this before its first ``sample``): a family whose
        exploration noise is held over a rollout (gSDE) draws it here; the others have nothing to do."""
        return None

    def new_episodes(self, rngs: Sequence[np.random.Generator]) -> None:
        """Episodes start, one a row, each with a sampler of its own (evaluation, ``sample_rows``): a family whose
        noise is held over an episode (gSDE) draws row i's from rngs[i]; the others have nothing to do."""
        return None

    def sample_rows(self, params: torch.Tensor, rngs: Sequence[np.random.Generator]) -> np.ndarray:
        """``sample`` with row i drawn from rngs[i] alone, so that a row's action does not depend on the batch it sits
        in (the same episode played in a batch or alone draws the same)."""
        _check_rows(params, rngs)
        return np.concatenate([self.sample(params[i : i + 1], rng) for i, rng in enumerate(rngs)])

    def make_head(self, width: int) -> nn.Module:
        """The policy head: features [B, width] -> params [B, param_dim]. A linear layer with small orthogonal
        weights (a near-uniform initial policy) unless the family needs more."""
        return _linear(width, self.param_dim, 0.01)


class Categorical(Distribution):
    """Discrete(n): params are the n logits."""

    action_shape = ()
    action_dtype = torch.int64

    def __init__(self, n: int, start: int = 0) -> None:
        self.param_dim, self.start = n, start  # Discrete(n, start): actions start, ..., start + n - 1

    def sample(self, params: torch.Tensor, rng: np.random.Generator) -> np.ndarray:
        """Inverse CDF, without torch.distributions: constructing a Categorical per env step costs several times the
        forward pass itself; the cumulative sum of exp(logits - max) and one uniform draw per row, scaled by the
        last entry (the normaliser, so rounding can never overflow), is exact and cheap; in numpy (torch's softmax
        alone costs what this whole function does). int64 [B]."""
        z = params.numpy() if isinstance(params, torch.Tensor) else params
        cdf = np.add.accumulate(np.exp(z - np.maximum.reduce(z, axis=-1, keepdims=True)), axis=-1)
        u = rng.random((cdf.shape[0], 1))
        u *= cdf[:, -1:]
        actions = np.add.reduce(u >= cdf, axis=-1, dtype=np.int64)
        return np.minimum(actions, cdf.shape[-1] - 1, out=actions)

    def mode(self, params: torch.Tensor) -> np.ndarray:
        return params.argmax(dim=-1).numpy().astype(np.int64)

    def log_prob_entropy(self, params: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        log_probs = torch.log_softmax(params, dim=-1)
        action_log_probs = log_probs.gather(-1, actions.unsqueeze(-1)).squeeze(-1)
        return action_log_probs, -(log_probs.exp() * log_probs).sum(-1)

    def log_prob_np(self, params: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """log softmax(z)[a], as ``policy_grad_np`` computes it (the max subtracted first)."""
        shifted = params - np.maximum.reduce(params, axis=-1, keepdims=True)
        total = np.add.reduce(np.exp(shifted), axis=-1)
        return shifted[_arange(params.shape[0]), actions] - np.log(total)

    def policy_grad_np(
        self, params: np.ndarray, actions: np.ndarray, advantages: np.ndarray, ent_coef: float
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """With p = softmax(z) over B samples:
        d policy / d z_i    = (A_i / B) * (p_i - onehot(a_i))
        d (-c_e H) / d z_i  = (c_e / B) * p_i * (log p_i + H_i)      where H_i = -sum_j p_ij log p_ij
        In numpy (the torch ``policy_grad`` is this): a dozen operations on [B, n] arrays cost a microsecond each
        here and several through torch's dispatch, on every update. They run on the logits transposed, [n, B]: a
        reduction over the n actions is then a vectorised pass down B-long rows, where along a short last axis it
        costs two to three times as much; the gradient comes back as a [B, n] view of the [n, B] result (what the policy
        head's backward multiplies reads it as it is). ``advantages`` in the dtype of ``params``."""
        batch = params.shape[0]
        z = np.ascontiguousarray(params.T)
        shifted = z - np.maximum.reduce(z, axis=0)  # log_softmax, as torch computes it
        probs = np.exp(shifted)
        total = np.add.reduce(probs, axis=0)
        log_probs = np.subtract(shifted, np.log(total), out=shifted)
        probs /= total
        entropies = -np.add.reduce(probs * log_probs, axis=0)
        scaled_adv = advantages / batch
        inner = log_probs + entropies
        inner *= ent_coef / batch
        inner += scaled_adv
        dparams = np.multiply(probs, inner, out=inner)
        rows = _arange(batch)
        dparams[actions, rows] -= scaled_adv
        return log_probs[actions, rows], entropies, dparams.T

    def env_actions(self, actions: np.ndarray) -> list[Any]:
        return (actions + self.start).tolist() if self.start else actions.tolist()  # Python ints, cheap to step with


class MultiCategorical(Distribution):
    """MultiDiscrete(nvec): one independent Categorical per component; params are their logits side by side
    (sum(nvec) wide), log-probs and entropies add up over the components."""

    action_dtype = torch.int64

    def __init__(self, nvec: np.ndarray, start: np.ndarray, dtype: np.dtype) -> None:
        self.action_shape = tuple(nvec.shape)
        self.sizes = [int(n) for n in nvec.reshape(-1)]
        self.start = start.reshape(-1).astype(np.int64)
        self.dtype = dtype
        self.param_dim = sum(self.sizes)
        self.parts = [Categorical(n) for n in self.sizes]

    def _split(self, params: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return params.split(self.sizes, dim=-1)

    def sample(self, params: torch.Tensor, rng: np.random.Generator) -> np.ndarray:
        columns = [part.sample(p, rng) for part, p in zip(self.parts, self._split(params), strict=True)]
        return np.stack(columns, axis=-1).reshape(params.shape[0], *self.action_shape)

    def mode(self, params: torch.Tensor) -> np.ndarray:
        columns = [part.mode(p) for part, p in zip(self.parts, self._split(params), strict=True)]
        return np.stack(columns, axis=-1).reshape(params.shape[0], *self.action_shape)

    def log_prob_entropy(self, params: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        flat = actions.reshape(actions.shape[0], -1)
        pairs = [
            part.log_prob_entropy(p, flat[:, j])
            for j, (part, p) in enumerate(zip(self.parts, self._split(params), strict=True))
        ]
        return torch.stack([lp for lp, _ in pairs]).sum(0), torch.stack([h for _, h in pairs]).sum(0)

    def policy_grad_np(
        self, params: np.ndarray, actions: np.ndarray, advantages: np.ndarray, ent_coef: float
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """log pi(a) = sum_j log pi_j(a_j) and H = sum_j H_j, and component j's logits enter only its own terms: the
        gradient is each component's Categorical gradient (same advantages, same coefficient) side by side."""
        flat = actions.reshape(actions.shape[0], -1)
        columns = np.split(params, np.cumsum(self.sizes)[:-1], axis=-1)
        parts = [
            part.policy_grad_np(p, flat[:, j], advantages, ent_coef)
            for j, (part, p) in enumerate(zip(self.parts, columns, strict=True))
        ]
        log_probs = np.add.reduce(np.stack([lp for lp, _, _ in parts]), axis=0)
        entropies = np.add.reduce(np.stack([h for _, h, _ in parts]), axis=0)
        return log_probs, entropies, np.concatenate([d for _, _, d in parts], axis=-1)

    def env_actions(self, actions: np.ndarray) -> list[Any]:
        shaped = (actions.reshape(actions.shape[0], -1) + self.start).astype(self.dtype)
        return list(shaped.reshape(actions.shape))


class DiagGaussian(Distribution):
    """Box actions: a diagonal Gaussian over the flattened action, params = [mean (A), log_std (A)]. The head makes
    the mean from the features and the log-std from one state-independent parameter (``GaussianHead``). Samples are
    stored unclipped; ``env_actions`` clips them to the bounds (see the module's docstring)."""

    action_dtype = torch.float32

    def __init__(self, space: gym.spaces.Box, log_std_init: float = 0.0, clipped_log_prob: bool = False) -> None:
        self.action_shape = tuple(space.shape)
        self.dim = int(np.prod(space.shape))
        self.param_dim = 2 * self.dim
        self.low = space.low.reshape(-1).astype(np.float64)
        self.high = space.high.reshape(-1).astype(np.float64)
        self.dtype = space.dtype
        self.log_std_init = log_std_init
        self.clipped_log_prob = clipped_log_prob
        # the bounds as the loss compares samples with them; an infinite bound is never reached (its mask is all
        # False, and 0 stands in for it so that no inf enters the arithmetic of the branch not taken)
        self._has_low = torch.from_numpy(np.isfinite(self.low))
        self._has_high = torch.from_numpy(np.isfinite(self.high))
        self._low = torch.from_numpy(np.where(np.isfinite(self.low), self.low, 0.0)).float()
        self._high = torch.from_numpy(np.where(np.isfinite(self.high), self.high, 0.0)).float()

    def _log_terms(
        self, flat: torch.Tensor, mean: torch.Tensor, log_std: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, tuple[torch.Tensor, ...] | None]:
        """Per dimension [B, A]: z = (a - mu) / sigma, 1 / sigma, and the action's log-probability term: the
        density's, or with --clipped-log-prob, where the sample lies at or beyond a bound, log Phi(x) of the bound's
        standardised distance, the probability the env's clipping gives that bound: P(a >= high) = Phi((mu - high) /
        sigma), P(a <= low) = Phi((low - mu) / sigma). The last item is None without the option, else (upper: the
        masks of samples at or beyond the upper bound, beyond: beyond either, x, log Phi(x)). x is clamped at -30: a
        branch not taken (or a mean 30 stds inside a bound, which no sample passes) must not overflow its
        derivative."""
        inv_std = torch.exp(-log_std)
        z = (flat - mean) * inv_std
        log_terms = -(0.5 * z.pow(2) + log_std) - _HALF_LOG_2PI
        if not self.clipped_log_prob:
            return z, inv_std, log_terms, None
        upper = self._has_high & (flat >= self._high)
        lower = self._has_low & (flat <= self._low) & ~upper
        beyond = upper | lower
        x = torch.where(upper, mean - self._high, self._low - mean).mul(inv_std).clamp(min=-30.0)
        log_cdf = torch.special.log_ndtr(x)
        return z, inv_std, torch.where(beyond, log_cdf, log_terms), (upper, beyond, x, log_cdf)

    def _mean_log_std(self, params: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return params[:, : self.dim], params[:, self.dim :]

    def sample(self, params: torch.Tensor, rng: np.random.Generator) -> np.ndarray:
        p = params.numpy()
        mean, log_std = p[:, : self.dim], p[:, self.dim :]
        noise = rng.standard_normal(mean.shape, dtype=np.float32)
        return (mean + np.exp(log_std) * noise).reshape(p.shape[0], *self.action_shape)

    def mode(self, params: torch.Tensor) -> np.ndarray:
        return params[:, : self.dim].numpy().astype(np.float32).reshape(params.shape[0], *self.action_shape)

    def log_prob_entropy(self, params: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """log N(a; mu, sigma) = -sum_d [ (a_d - mu_d)^2 / (2 sigma_d^2) + log sigma_d + log(2 pi) / 2 ]
        H = sum_d [ log sigma_d + (1 + log(2 pi)) / 2 ]
        With --clipped-log-prob, a dimension whose sample lies beyond a bound counts log P(x >= high) (or
        log P(x <= low)) instead of its density: the probability of the action the env was given."""
        mean, log_std = self._mean_log_std(params)
        _, _, log_terms, _ = self._log_terms(actions.reshape(actions.shape[0], -1), mean, log_std)
        entropy = log_std.sum(-1) + self.dim * (0.5 + _HALF_LOG_2PI)
        return log_terms.sum(-1), entropy

    def policy_grad(
        self, params: torch.Tensor, actions: torch.Tensor, advantages: torch.Tensor, ent_coef: float
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
        """With z = (a - mu) / sigma and s = log sigma, over B samples:
        d policy / d mu_i   = -(A_i / B) * z_i / sigma_i
        d policy / d s_i    = -(A_i / B) * (z_i^2 - 1)
        d (-c_e H) / d s_i  = -c_e / B
        With --clipped-log-prob, where a sample is beyond the upper bound its term is log Phi(x), x = (mu - high) /
        sigma, whose derivative is m = phi(x) / Phi(x) (the inverse Mills ratio) times dx: dx/dmu = 1 / sigma,
        dx/ds = -x; beyond the lower bound x = (low - mu) / sigma, dx/dmu = -1 / sigma, dx/ds = -x:
        d policy / d mu_i   = -/+ (A_i / B) * m / sigma_i      d policy / d s_i = (A_i / B) * m * x
        """
        with torch.no_grad():
            batch = params.shape[0]
            mean, log_std = self._mean_log_std(params)
            z, inv_std, log_terms, clipped = self._log_terms(actions.reshape(batch, -1), mean, log_std)
            scaled_adv = (advantages / batch).unsqueeze(-1)
            dmean = -scaled_adv * z * inv_std
            dlog_std = -scaled_adv * (z.pow(2) - 1.0)
            if clipped is not None:
                upper, beyond, x, log_cdf = clipped
                mills = torch.exp(-0.5 * x.pow(2) - _HALF_LOG_2PI - log_cdf)  # phi(x) / Phi(x), in logs: no 0 / 0
                sign = torch.where(upper, -1.0, 1.0)
                dmean = torch.where(beyond, sign * scaled_adv * mills * inv_std, dmean)
                dlog_std = torch.where(beyond, scaled_adv * mills * x, dlog_std)
            log_probs = log_terms.sum(-1)
            entropies = log_std.sum(-1) + self.dim * (0.5 + _HALF_LOG_2PI)
            dlog_std = dlog_std - ent_coef / batch
        return log_probs, entropies, torch.cat([dmean, dlog_std], dim=-1)

    def policy_grad_np(
        self, params: np.ndarray, actions: np.ndarray, advantages: np.ndarray, ent_coef: float
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """``policy_grad``'s formulas in numpy, where PPO's update calls them twice a minibatch on a few dozen rows
        (each torch operation there costs several times its arithmetic); None with --clipped-log-prob (its log Phi
        has no numpy function here: ``policy_grad`` computes that case in torch)."""
        if self.clipped_log_prob:
            return None
        batch, dim = params.shape[0], self.dim
        mean, log_std = params[:, :dim], params[:, dim:]
        inv_std = np.exp(-log_std)
        z = (actions.reshape(batch, -1) - mean) * inv_std
        log_terms = -(0.5 * z * z + log_std) - _HALF_LOG_2PI
        scaled_adv = (advantages / batch)[:, None]
        dparams = np.empty_like(params)
        np.multiply(-scaled_adv, z * inv_std, out=dparams[:, :dim])
        np.multiply(-scaled_adv, z * z - 1.0, out=dparams[:, dim:])
        dparams[:, dim:] -= ent_coef / batch
        entropies = np.add.reduce(log_std, axis=-1) + dim * (0.5 + _HALF_LOG_2PI)
        return np.add.reduce(log_terms, axis=-1), entropies, dparams

    def log_prob_np(self, params: np.ndarray, actions: np.ndarray) -> np.ndarray | None:
        """``policy_grad_np``'s log-probability alone (None with --clipped-log-prob, as there)."""
        if self.clipped_log_prob:
            return None
        dim = self.dim
        log_std = params[:, dim:]
        z = (actions.reshape(params.shape[0], -1) - params[:, :dim]) * np.exp(-log_std)
        return np.add.reduce(-(0.5 * z * z + log_std) - _HALF_LOG_2PI, axis=-1)

    def env_actions(self, actions: np.ndarray) -> list[Any]:
        # np.clip's semantics (NaN stays NaN, an infinite bound clips nothing) by two ufuncs: np.clip's Python
        # wrapper costs ~9 us a call, on every env step
        flat = np.minimum(np.maximum(actions.reshape(actions.shape[0], -1), self.low), self.high).astype(self.dtype)
        return list(flat.reshape(actions.shape))

    def make_head(self, width: int) -> nn.Module:
        return GaussianHead(width, self.dim, self.log_std_init)


class GSDEGaussian(DiagGaussian):
    """Box actions with generalized state-dependent exploration (gSDE; Raffin et al. 2021, SB3's ``use_sde``).

    The exploration noise is a function of the state, eps(s) = z(s) @ E, with z(s) the policy's last features
    [W] and E [W, A] a matrix drawn ~ N(0, sigma^2) (sigma [W, A] learned, one std per feature and action dimension)
    once per env at the start of each rollout and held for the rollout: within a rollout the same state gets the same
    noise and nearby states similar noise, so exploration is smooth in time rather than white noise at every step
    (which on Pendulum averages out before it moves the pendulum). Given s the action is Gaussian with mean mu(s) and
    variance var_a = sum_j z_j^2 sigma_ja^2 (+ 1e-6): that is the log-prob and the entropy in the loss. z enters the
    variance detached (SB3's default, learn_features=False): the std is learned through sigma only.

    params = [mean (A), z (W), log sigma (W * A)]: everything ``sample`` and the loss need, row by row (the log sigma
    block is the same in every row). The log-prob and entropy are DiagGaussian's with that std; no closed-form
    gradient: the loss differentiates ``log_prob_entropy``."""

    VARIANCE_EPS = 1e-6

    def __init__(self, space: gym.spaces.Box, log_std_init: float, width: int, clipped_log_prob: bool = False) -> None:
        super().__init__(space, log_std_init, clipped_log_prob)
        self.width = width
        self.param_dim = self.dim + width + width * self.dim
        self.noise: np.ndarray | None = None  # [n_envs, W, A] standard normal, scaled by sigma when used

    def new_rollout(self, n_envs: int, rng: np.random.Generator) -> None:
        self.noise = rng.standard_normal((n_envs, self.width, self.dim), dtype=np.float32)

    def _split(self, params: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        A, W = self.dim, self.width
        return params[:, :A], params[:, A : A + W], params[:, A + W :].reshape(-1, W, A)

    def _std(self, latent: torch.Tensor, log_sigma: torch.Tensor) -> torch.Tensor:
        variance = (latent.pow(2).unsqueeze(-1) * torch.exp(2.0 * log_sigma)).sum(1)  # [B, A]
        return torch.sqrt(variance + self.VARIANCE_EPS)

    def new_episodes(self, rngs: Sequence[np.random.Generator]) -> None:
        self.noise = np.stack([rng.standard_normal((self.width, self.dim), dtype=np.float32) for rng in rngs])

    def sample_rows(self, params: torch.Tensor, rngs: Sequence[np.random.Generator]) -> np.ndarray:
        _check_rows(params, rngs)
        if self.noise is None or self.noise.shape[0] != len(rngs):
            self.new_episodes(rngs)  # (episodes begun without new_episodes: each row's matrix from its sampler)
        return self.sample(params, rngs[0])  # the held matrices: gSDE draws nothing more a step

    def sample(self, params: torch.Tensor, rng: np.random.Generator) -> np.ndarray:
        mean, latent, log_sigma = (x.numpy() for x in self._split(params))
        if self.noise is None or self.noise.shape[0] != mean.shape[0]:
            self.new_rollout(mean.shape[0], rng)  # a caller outside a rollout (a3c.load's act): fresh noise
        matrices = np.exp(log_sigma) * self.noise  # E = sigma * N(0, 1), [B, W, A]
        noise = np.einsum("bw,bwa->ba", latent, matrices)
        return (mean + noise).astype(np.float32).reshape(mean.shape[0], *self.action_shape)

    def _mean_log_std(self, params: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The Gaussian given the state (DiagGaussian's log_prob_entropy uses it as it is)."""
        mean, latent, log_sigma = self._split(params)
        return mean, torch.log(self._std(latent, log_sigma))

    def policy_grad(
        self, params: torch.Tensor, actions: torch.Tensor, advantages: torch.Tensor, ent_coef: float
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
        return None  # no closed form here: the loss differentiates log_prob_entropy (see the class docstring)

    def policy_grad_np(
        self, params: np.ndarray, actions: np.ndarray, advantages: np.ndarray, ent_coef: float
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        return None  # (not DiagGaussian's: gSDE's log-probability is not the independent Gaussian's)

    def log_prob_np(self, params: np.ndarray, actions: np.ndarray) -> np.ndarray | None:
        return None  # (as policy_grad_np)

    def make_head(self, width: int) -> nn.Module:
        if width != self.width:
            raise ValueError(f"gSDE distribution made for features of width {self.width}, head asked for {width}")
        return GSDEHead(width, self.dim, self.log_std_init)


class GSDEHead(nn.Module):
    """features [B, W] -> [mean [B, A], features detached [B, W], log sigma [B, W * A]] (``GSDEGaussian``)."""

    def __init__(self, width: int, dim: int, log_std_init: float) -> None:
        super().__init__()
        self.mean = _linear(width, dim, 0.01)
        self.log_std = nn.Parameter(torch.full((width, dim), float(log_std_init)))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        rows = features.shape[0]
        log_sigma = self.log_std.reshape(1, -1).expand(rows, -1)
        return torch.cat([self.mean(features), features.detach(), log_sigma], dim=-1)


class GaussianHead(nn.Module):
    """features [B, width] -> [mean [B, A], log_std [B, A]]: the mean from a linear layer (small weights: it starts
    near 0), the log-std one learned parameter per action dimension, the same for every state."""

    def __init__(self, width: int, dim: int, log_std_init: float) -> None:
        super().__init__()
        self.mean = _linear(width, dim, 0.01)
        self.log_std = nn.Parameter(torch.full((dim,), float(log_std_init)))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        mean = self.mean(features)
        return torch.cat([mean, self.log_std.expand_as(mean)], dim=-1)


_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


def _linear(width: int, out: int, gain: float) -> nn.Linear:
    layer = nn.Linear(width, out)
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.zeros_(layer.bias)
    return layer


def make_distribution(
    action_space: gym.Space, log_std_init: float = 0.0, gsde_width: int = 0, clipped_log_prob: bool = False
) -> Distribution:
    """The distribution family of an action space; UserError for spaces a3c does not support. ``log_std_init``:
    the Gaussian's initial log standard deviation (Box actions only); ``gsde_width``: with Box actions, the width of
    the features the head sees, for gSDE (0: the plain diagonal Gaussian); ``clipped_log_prob``: the Gaussian's
    log-prob of a sample beyond a bound is that of the bound (--clipped-log-prob)."""
    if isinstance(action_space, gym.spaces.Discrete):
        return Categorical(int(action_space.n), int(action_space.start))
    if isinstance(action_space, gym.spaces.MultiDiscrete):
        start = getattr(action_space, "start", np.zeros_like(action_space.nvec))
        return MultiCategorical(np.asarray(action_space.nvec), np.asarray(start), action_space.dtype)
    if isinstance(action_space, gym.spaces.Box) and np.issubdtype(action_space.dtype, np.floating):
        if gsde_width:
            return GSDEGaussian(action_space, log_std_init, gsde_width, clipped_log_prob)
        return DiagGaussian(action_space, log_std_init, clipped_log_prob)
    raise UserError(
        f"action space {action_space} is not supported; a3c supports Discrete, MultiDiscrete and float Box actions"
    )
