"""The part of a worker's update between the network's forward and backward passes, in one call where it can be:
the bootstrap and GAE (``rollout_targets``), ``--normalize-advantage`` (``normalized_advantages``) and the loss's
terms and gradient with respect to the outputs (``actor_critic_loss_grads``), for a Discrete action space
(Categorical) in float32, by the C kernel a3c/learn/_update_kernel.c.

Why: with the network's passes by hand (a3c.learn.backprop), these three were about forty numpy operations on arrays
of a rollout's 40 numbers, a third of the update's time on CartPole's defaults and nearly all of it call overhead;
the kernel is one call, with the arithmetic in double and each output rounded to float32 once: against the float64
answer it is as exact as the numpy functions in float32, or more where those cancel large terms (tests/learn/
test_fused_loss.py). Those functions stay the reference
and the path for everything the kernel does not cover (other action families, float64 models) and for an install
without the compiled kernel (it is built by ``pip install`` where a C compiler is found, and optional: without one
the package installs and runs as before). ``A3C_UPDATE_KERNEL=0`` in the environment turns it off (benchmarks
compare the two that way).
"""

from __future__ import annotations

import os
from types import ModuleType

import numpy as np
import torch

from a3c.learn.distributions import Categorical, Distribution

KERNEL_ENV = "A3C_UPDATE_KERNEL"  # "0": the numpy path even where the kernel is built


def _load_kernel() -> ModuleType | None:
    try:
        from a3c.learn import _update_kernel  # type: ignore[attr-defined]  # built by pip install; optional
    except ImportError:
        return None
    return _update_kernel


_KERNEL = _load_kernel()


def kernel_available() -> bool:
    """Whether the compiled kernel was built and imports (whatever ``A3C_UPDATE_KERNEL`` says)."""
    return _KERNEL is not None


class FusedCategoricalUpdate:
    """The kernel for one rollout shape (T steps x K envs, n actions), with its output buffers made once. Build it
    with ``FusedCategoricalUpdate.of``, which is None where the kernel does not apply (the caller then runs the numpy
    functions)."""

    def __init__(self, steps: int, envs: int, n_actions: int) -> None:
        assert _KERNEL is not None
        self._kernel = _KERNEL.categorical_update
        self.steps, self.envs, self.n_actions = steps, envs, n_actions
        batch = steps * envs
        self._dlogits_t = np.empty((n_actions, batch), dtype=np.float32)  # stored transposed, as policy_grad_np's
        self._dvalues = np.empty(batch, dtype=np.float32)

    @classmethod
    def of(
        cls, dist: Distribution, steps: int, envs: int, dtype: np.dtype | type | torch.dtype
    ) -> FusedCategoricalUpdate | None:
        """For a worker with this action distribution and model dtype, or None: the kernel is not built or is turned
        off, the family is not Categorical (MultiCategorical, Bernoulli and the continuous ones have their own
        gradients), or the model is not float32."""
        return cls(steps, envs, dist.param_dim) if cls.applies(dist, dtype) else None

    @staticmethod
    def applies(dist: Distribution, dtype: np.dtype | type | torch.dtype) -> bool:
        """Whether a worker with this distribution and model dtype (numpy's or torch's) takes the kernel in this
        environment (what summary.json's ``update_kernel`` reports)."""
        if _KERNEL is None or os.environ.get(KERNEL_ENV, "1") == "0":
            return False
        float32 = dtype == torch.float32 if isinstance(dtype, torch.dtype) else np.dtype(dtype) == np.float32
        return type(dist) is Categorical and float32

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
