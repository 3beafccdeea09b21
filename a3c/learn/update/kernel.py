"""The loss gradient of the update protocol (a3c.learn.update.protocol) in one compiled call, for a Discrete action
space
(Categorical) in float32: the bootstrap and GAE (``rollout_targets``), ``--normalize-advantage``
(``normalized_advantages``) and the loss's terms and gradient with respect to the outputs (``actor_critic_loss_grads``
with ``Categorical.policy_grad_np``), by the C kernel a3c/learn/update/_update_kernel.c. ``KernelLoss`` is the piece the
fast paths mlp+kernel and cnn+kernel are made of (a3c.learn.update.paths).

Why: with the network's passes by hand (a3c.learn.update.mlp), these three were about forty numpy operations on arrays
of a rollout's 40 numbers, a third of the update's time on CartPole's defaults and nearly all of it call overhead;
the kernel is one call, with the arithmetic in double and each output rounded to float32 once: against the float64
answer it is as exact as the numpy functions in float32, or more where those cancel large terms (tests/learn/
test_fused_loss.py). Those functions (a3c.learn.update.closed_form) are the path for everything the kernel does not
cover
(other action families, float64 models) and for an install without the compiled kernel (it is built by ``pip
install`` where a C compiler is found, and optional: without one the package installs and runs as before).
``A3C_UPDATE_KERNEL=0`` in the environment turns it off (benchmarks compare the two that way). The kernel checks
every buffer's element type and length itself.
"""

from __future__ import annotations

import os
from types import ModuleType

import numpy as np
import torch

from a3c.learn.distributions import Categorical, Distribution
from a3c.learn.update.protocol import LossGradient, LossGrads, Rollout, Unrolled
from a3c.spec.config import Config

KERNEL_ENV = "A3C_UPDATE_KERNEL"  # "0": the numpy path even where the kernel is built


def _load_kernel() -> ModuleType | None:
    try:
        from a3c.learn.update import _update_kernel  # type: ignore[attr-defined]  # built by pip install; optional
    except ImportError:
        return None
    return _update_kernel


_KERNEL = _load_kernel()


def kernel_available() -> bool:
    """Whether the compiled kernel was built and imports (whatever ``A3C_UPDATE_KERNEL`` says)."""
    return _KERNEL is not None


class FusedCategoricalUpdate:
    """The kernel for one rollout shape (T steps x K envs, n actions), with its output buffers made once."""

    def __init__(self, steps: int, envs: int, n_actions: int) -> None:
        assert _KERNEL is not None
        self._kernel = _KERNEL.categorical_update
        self.steps, self.envs, self.n_actions = steps, envs, n_actions
        batch = steps * envs
        self._dlogits_t = np.empty((n_actions, batch), dtype=np.float32)  # stored transposed, as policy_grad_np's
        self._dvalues = np.empty(batch, dtype=np.float32)

    def __call__(
        self,
        rewards: np.ndarray,
        values: np.ndarray,
        final_values: np.ndarray | None,
        terminated: np.ndarray,
        truncated: np.ndarray,
        logits: np.ndarray,
        actions: np.ndarray,
        gamma: float,
        gae_lambda: float,
        ent_coef: float,
        vf_coef: float,
        normalize_advantage: bool,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """rollout_targets(rewards, values, final_values, terminated, truncated, gamma, gae_lambda), then
        actor_critic_loss_grads(Categorical(n), logits, values[:T], actions, advantages (normalised with
        ``normalize_advantage``), returns, ent_coef, vf_coef), in one call: float32 arrays, C-contiguous, in the
        shapes rollout_targets takes, logits [T K, n], actions int64 [T, K]. Returns what actor_critic_loss_grads
        returns: (the loss's terms [total, policy, value, entropy], float64, a new array; dlogits [T K, n] and
        dvalues [T K], float32, in buffers the next call overwrites)."""
        losses = np.empty(4)
        self._kernel(
            rewards,
            values,
            final_values,
            terminated,
            truncated,
            logits,
            actions,
            self._dlogits_t,
            self._dvalues,
            losses,
            self.steps,
            self.envs,
            self.n_actions,
            gamma,
            gae_lambda,
            ent_coef,
            vf_coef,
            normalize_advantage,
        )
        return losses, self._dlogits_t.T, self._dvalues


class KernelLoss(LossGradient):
    """The A3C loss's gradient by the C kernel: a Categorical distribution, a float32 model, the kernel built and not
    turned off (``A3C_UPDATE_KERNEL=0``)."""

    @classmethod
    def supports(cls, config: Config, dist: Distribution, dtype: torch.dtype) -> str | None:
        if _KERNEL is None:
            return "the C kernel is not built (no C compiler at install)"
        if os.environ.get(KERNEL_ENV, "1") == "0":
            return f"{KERNEL_ENV}=0"
        if type(dist) is not Categorical:
            return f"{type(dist).__name__} actions (the kernel's are Categorical)"
        if dtype != torch.float32:
            return f"a {dtype} model (the kernel's is float32)"
        return None

    def __init__(self, config: Config, dist: Distribution, steps: int, envs: int) -> None:
        self.config, self.kernel = config, FusedCategoricalUpdate(steps, envs, dist.param_dim)

    def __call__(self, rollout: Rollout, unrolled: Unrolled) -> LossGrads:
        cfg, params = self.config, unrolled.params
        logits = params if isinstance(params, np.ndarray) else np.ascontiguousarray(params.detach().numpy())
        return self.kernel(
            rollout.rewards_np,
            unrolled.values,
            unrolled.final_values,
            rollout.terminated_np,
            rollout.truncated_np,
            logits,
            rollout.actions_np,
            cfg.gamma,
            cfg.gae_lambda,
            cfg.ent_coef,
            cfg.vf_coef,
            cfg.normalize_advantage,
        )
