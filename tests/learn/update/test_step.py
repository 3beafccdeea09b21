"""a3c.learn.update.step: the gradient's norm, the skip of a non-finite update, the clip to --max-grad-norm and the lr
of the schedule at the run's progress, whatever the path and the backend."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

from a3c.learn.update.step import GradientStep
from a3c.spec.config import Config

FINITE_LOSS = np.zeros(4)


def test_a_gradient_above_the_norm_is_clipped_in_place_and_its_norm_returned():
    step = GradientStep(Config(max_grad_norm=0.5))
    grads = np.full(16, 0.5, dtype=np.float32)  # norm 2
    assert step.clip(grads, FINITE_LOSS) == pytest.approx(2.0)
    assert math.sqrt(float(np.dot(grads, grads))) == pytest.approx(0.5, rel=1e-5)
    small = np.full(4, 0.1, dtype=np.float32)
    assert step.clip(small, FINITE_LOSS) == pytest.approx(0.2) and np.allclose(small, 0.1)


@pytest.mark.parametrize("where", ["gradient", "loss"])
def test_a_non_finite_gradient_or_loss_term_is_not_to_be_pushed(where):
    grads, losses = np.ones(8, dtype=np.float32), FINITE_LOSS.copy()
    (grads if where == "gradient" else losses)[3] = np.nan
    assert GradientStep(Config()).clip(grads, losses) is None


def test_the_lr_follows_the_schedule_over_the_run():
    linear = GradientStep(Config(lr=1e-2, lr_schedule="linear", total_steps=1000))
    assert linear.lr(0) == 1e-2 and linear.lr(750) == pytest.approx(2.5e-3) and linear.lr(2000) == 0.0
    assert GradientStep(Config(lr=1e-2, lr_schedule="constant", total_steps=1000)).lr(750) == 1e-2


OVERFLOW = """
import numpy as np
from a3c.learn.update.step import GradientStep
from a3c.spec.config import Config
grads = np.full(100, 1e30, dtype=np.float32)  # every entry finite, their float32 sum of squares not
norm = GradientStep(Config(max_grad_norm=1.0)).clip(grads, np.zeros(4))
assert norm is not None and np.isfinite(norm) and abs(float(np.linalg.norm(grads.astype(np.float64))) - 1.0) < 1e-3
print("clipped")
"""


def test_a_float32_square_sum_that_overflows_is_measured_again_without_a_warning():
    """In a fresh interpreter with warnings shown (pytest resets filters between tests)."""
    proc = subprocess.run([sys.executable, "-W", "default", "-c", OVERFLOW], capture_output=True, text=True)
    assert proc.returncode == 0 and "clipped" in proc.stdout, proc.stderr[-3000:]
    assert "Warning" not in proc.stderr, proc.stderr
