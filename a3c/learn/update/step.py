"""What the learning side does to a worker's gradient between its backward pass and the shared optimizer: its norm,
the skip of a non-finite update, the clip to ``--max-grad-norm``, and the learning rate the schedule gives at the
run's progress (a3c.learn.optim.scheduled_lr). In one place, whatever the update path (a3c.learn.update.paths) and the
backend: a backend only moves the gradient (with this lr) and the weights.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from a3c.learn.optim import scheduled_lr
from a3c.spec.config import Config

# GradientStep.clip measures the gradient's norm with numpy's float32 dot, which warns when the sum of squares
# overflows (a diverging run's gradients); it then measures it again in float64 and skips the step if it is not
# finite, and the worker counts it: nothing for the user to act on, so not a warning on their terminal (this module's
# only).
warnings.filterwarnings("ignore", "overflow encountered in dot", RuntimeWarning, __name__)


class GradientStep:
    """A worker's side of the optimizer step, from its config: ``clip`` the gradient, then the ``lr`` to push it
    with."""

    def __init__(self, config: Config) -> None:
        self.max_norm, self.base_lr, self.schedule = config.max_grad_norm, config.lr, config.lr_schedule
        self.total_steps = config.total_steps

    def clip(self, grads: np.ndarray, loss_values: np.ndarray) -> float | None:
        """The norm of ``grads`` (a flat float array, clipped in place to ``max_norm``), or None where the update
        is not finite (a non-finite gradient entry or loss term): it would poison the shared model for every
        worker, so it is not to be pushed."""
        # numpy's dot (BLAS) is a fifth of torch's dot + item on this path; its overflow warning is filtered above
        grad_norm = math.sqrt(np.dot(grads, grads))
        if not math.isfinite(grad_norm):  # overflow of the float32 sum of squares, or a non-finite entry: in float64
            grad_norm = float(np.linalg.norm(grads.astype(np.float64)))
        # (the four loss terms' sum is finite exactly when each is: float64 sums of float32-sized terms never overflow)
        if not (math.isfinite(grad_norm) and math.isfinite(np.add.reduce(loss_values))):
            return None
        if grad_norm > self.max_norm:
            np.multiply(grads, self.max_norm / (grad_norm + 1e-6), out=grads)
        return grad_norm

    def lr(self, global_step: int) -> float:
        """The learning rate at ``global_step`` of the run (``--lr-schedule``: constant, or linear down to 0 at
        ``--total-steps``)."""
        return scheduled_lr(self.base_lr, self.schedule, global_step / self.total_steps)
