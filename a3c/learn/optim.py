"""Shared optimizers over one flat parameter tensor: SharedAdam, SharedRMSprop and SharedRMSpropTF.

All state (moments and the step count) is created eagerly at construction and can be moved to shared memory, so a
worker process that receives the optimizer updates the same state as every other worker (Hogwild: no lock).
The step count is a tensor with one slot per worker: each worker increments only its own slot, so the total,
``steps.sum()``, is exact without a lock, and it doubles as the global update counter for measuring policy lag.

The update rules are those of torch.optim.Adam / torch.optim.RMSprop, called without torch.optim: this keeps the
first ``step()`` in a worker from importing torch.optim's compile machinery (hundreds of modules and tens of MB per
process). Adam is one call of the fused kernel torch.optim.Adam(fused=True) uses (``torch._fused_adam_``: the
moments, the bias corrections and the parameter update in one pass over the buffer, ~7 us for a 9k-parameter model
where the seven tensor operations of the single-tensor rule take ~30 us, on every update of every worker); where a
torch build lacks it, the single-tensor rule in plain tensor operations. RMSprop is written in tensor operations.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch


class _SharedOptimizer:
    state_names: tuple[str, ...] = ()

    def __init__(self, params: torch.Tensor, lr: float, slots: int) -> None:
        if params.dim() != 1:
            raise ValueError("shared optimizers work on one flat parameter tensor")
        self.params = params
        self.lr = lr
        self.steps = torch.zeros(slots, dtype=torch.int64)
        self.state = {name: torch.zeros_like(params) for name in self.state_names}
        self._steps_np: np.ndarray | None = None  # a numpy view of steps, made in each process (see _counts)

    def __getstate__(self) -> dict[str, Any]:
        # the per-process scratch (a numpy view here, the fused kernel's step tensor in SharedAdam) stays behind
        return {**self.__dict__, **dict.fromkeys(self._per_process, None)}

    _per_process: tuple[str, ...] = ("_steps_np",)

    def _counts(self) -> np.ndarray:
        """steps as a numpy view of the same (shared) memory: an increment and a sum there cost well under a
        microsecond each, through torch's dispatch over one each, and both run on every update."""
        if self._steps_np is None:
            self._steps_np = self.steps.numpy()
        return self._steps_np

    def share_memory_(self) -> _SharedOptimizer:
        self.steps.share_memory_()
        for tensor in self.state.values():
            tensor.share_memory_()
        return self

    def step_count(self) -> int:
        """Total optimizer steps taken by all workers."""
        return int(np.add.reduce(self._counts()))  # (ndarray.sum's Python wrapper doubles the cost)

    def step(self, grad: torch.Tensor, slot: int = 0, lr: float | None = None) -> int:
        """Apply ``grad`` (this process's own flat gradient) to the shared parameters, with learning rate ``lr``
        (a schedule's current value; default: the optimizer's own). Returns the step count before this step."""
        counts = self._counts()
        counts[slot] += 1
        t = int(np.add.reduce(counts))
        self._update(grad, t, self.lr if lr is None else lr)
        return t - 1

    def _update(self, grad: torch.Tensor, t: int, lr: float) -> None:
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        return {"lr": self.lr, "steps": self.steps.clone(), **{k: v.clone() for k, v in self.state.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Copy in place, so shared memory stays shared. The step slots may differ in number (another worker count):
        the total is kept, in slot 0."""
        steps = torch.as_tensor(state["steps"], dtype=torch.int64)
        self.steps.zero_()
        if steps.numel() == self.steps.numel():
            self.steps.copy_(steps)
        else:
            self.steps[0] = steps.sum()
        for name in self.state_names:
            self.state[name].copy_(state[name])


_FUSED_ADAM = getattr(torch, "_fused_adam_", None)  # torch.optim.Adam(fused=True)'s kernel (CPU since torch 2.4)


class SharedAdam(_SharedOptimizer):
    """Adam (Kingma & Ba), identical to torch.optim.Adam(amsgrad=False, weight_decay=0, fused=True); where the fused
    kernel is missing, to torch.optim.Adam(foreach=False) (the two differ by float rounding)."""

    state_names = ("exp_avg", "exp_avg_sq")

    def __init__(
        self,
        params: torch.Tensor,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        slots: int = 1,
    ) -> None:
        super().__init__(params, lr, slots)
        self.betas, self.eps = betas, eps
        self.fused = _FUSED_ADAM is not None and params.dtype in (torch.float32, torch.float64)
        self._step_tensor: torch.Tensor | None = None
        self._step_np: np.ndarray | None = None  # its numpy view

    _per_process = ("_steps_np", "_step_tensor", "_step_np")

    def _update(self, grad: torch.Tensor, t: int, lr: float) -> None:
        if self.fused:
            # The kernel reads the step count from a tensor (torch.optim increments its own before the call): here
            # the global count t, as the unfused rule's bias corrections use it. The tensor is this process's own:
            # made at the first step, left out of the pickle that carries the optimizer to a worker (a tensor
            # attribute would travel in shared memory, and the workers would write their counts into one tensor).
            assert _FUSED_ADAM is not None
            if self._step_tensor is None:
                self._step_tensor = torch.zeros(())
                self._step_np = self._step_tensor.numpy()
            assert self._step_np is not None
            self._step_np[...] = t  # (through numpy: a fifth of fill_'s cost)
            beta1, beta2 = self.betas
            _FUSED_ADAM(
                [self.params],
                [grad],
                [self.state["exp_avg"]],
                [self.state["exp_avg_sq"]],
                [],
                [self._step_tensor],
                lr=lr,
                beta1=beta1,
                beta2=beta2,
                weight_decay=0.0,
                eps=self.eps,
                amsgrad=False,
                maximize=False,
            )
            return
        self._update_unfused(grad, t, lr)

    def _update_unfused(self, grad: torch.Tensor, t: int, lr: float) -> None:
        beta1, beta2 = self.betas
        exp_avg, exp_avg_sq = self.state["exp_avg"], self.state["exp_avg_sq"]
        exp_avg.lerp_(grad, 1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        step_size = lr / (1 - beta1**t)
        denom = (exp_avg_sq.sqrt() / math.sqrt(1 - beta2**t)).add_(self.eps)
        self.params.addcdiv_(exp_avg, denom, value=-step_size)


class SharedRMSprop(_SharedOptimizer):
    """RMSprop, identical to torch.optim.RMSprop(momentum=0, centered=False, weight_decay=0, foreach=False)."""

    state_names = ("square_avg",)

    def __init__(
        self, params: torch.Tensor, lr: float = 7e-4, alpha: float = 0.99, eps: float = 1e-5, slots: int = 1
    ) -> None:
        super().__init__(params, lr, slots)
        self.alpha, self.eps = alpha, eps

    def _update(self, grad: torch.Tensor, t: int, lr: float) -> None:
        square_avg = self.state["square_avg"]
        square_avg.mul_(self.alpha).addcmul_(grad, grad, value=1 - self.alpha)
        self.params.addcdiv_(grad, square_avg.sqrt().add_(self.eps), value=-lr)


class SharedRMSpropTF(SharedRMSprop):
    """RMSprop as TensorFlow has it (and the A3C paper's and OpenAI baselines' A2C used it; Stable-Baselines3's
    RMSpropTFLike): the mean square starts at ones, not zeros, and eps is added inside the square root. PyTorch's
    RMSprop starts from zeros, so its first updates divide by sqrt((1 - alpha) g^2): steps of about 10 * lr in every
    coordinate, whatever the gradient's scale, until the average has filled (~100 updates at alpha 0.99)."""

    def __init__(
        self, params: torch.Tensor, lr: float = 7e-4, alpha: float = 0.99, eps: float = 1e-5, slots: int = 1
    ) -> None:
        super().__init__(params, lr, alpha, eps, slots)
        self.state["square_avg"].fill_(1.0)

    def _update(self, grad: torch.Tensor, t: int, lr: float) -> None:
        square_avg = self.state["square_avg"]
        square_avg.mul_(self.alpha).addcmul_(grad, grad, value=1 - self.alpha)
        self.params.addcdiv_(grad, square_avg.add(self.eps).sqrt_(), value=-lr)


OPTIMIZERS: dict[str, type[_SharedOptimizer]] = {
    "adam": SharedAdam,
    "rmsprop": SharedRMSprop,
    "rmsprop-tf": SharedRMSpropTF,
}


def make_optimizer(
    name: str, params: torch.Tensor, lr: float, slots: int, eps: float | None = None
) -> _SharedOptimizer:
    """The shared optimizer called ``name`` (a key of OPTIMIZERS), its state in shared memory; ``eps``: --optimizer-eps
    (None: the optimizer's own)."""
    return OPTIMIZERS[name](params, lr=lr, slots=slots, **({} if eps is None else {"eps": eps})).share_memory_()


def scheduled_lr(lr: float, schedule: str, progress: float) -> float:
    """The learning rate at ``progress`` = global_step / total_steps: ``constant``, or ``linear`` from lr down to 0
    at the end of the run (rl-zoo3's ``lin_<lr>``)."""
    if schedule == "linear":
        return lr * max(0.0, 1.0 - progress)
    return lr
