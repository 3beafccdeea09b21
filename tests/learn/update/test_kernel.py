"""The compiled update kernel (a3c.learn.update.kernel) against the numpy functions it stands in for (rollout_targets,
normalized_advantages, actor_critic_loss_grads with Categorical): as exact as those in float32 on every rollout
shape, episode-end pattern and setting; its refusals of buffers it cannot read safely; where it applies."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from a3c.learn.distributions import Categorical, MultiCategorical
from a3c.learn.losses import actor_critic_loss_grads, normalized_advantages, rollout_targets
from a3c.learn.update.kernel import KERNEL_ENV, FusedCategoricalUpdate, KernelLoss, kernel_available
from a3c.spec.config import Config

pytestmark = pytest.mark.skipif(not kernel_available(), reason="the C kernel is not built (no C compiler)")


def numpy_update(rewards, values, final_values, terminated, truncated, logits, actions, gamma, lam, ent, vf, normalize):
    """What Worker.loss_grads computes: the reference."""
    T, K = rewards.shape
    adv, returns = rollout_targets(rewards, values, final_values, terminated, truncated, gamma, lam)
    policy_adv = normalized_advantages(adv) if normalize else adv
    return actor_critic_loss_grads(
        Categorical(logits.shape[1]),
        logits,
        values[:T].reshape(-1),
        actions.reshape(T * K),
        policy_adv.reshape(-1),
        returns.reshape(-1),
        ent,
        vf,
    )


def rollout(seed, T, K, n, truncations, scale=1.0):
    rng = np.random.default_rng(seed)
    f32 = np.float32
    terminated = (rng.random((T, K)) < 0.2).astype(f32)
    truncated = ((rng.random((T, K)) < 0.2) & (terminated == 0)).astype(f32) if truncations else np.zeros((T, K), f32)
    return dict(
        rewards=(rng.standard_normal((T, K)) * scale).astype(f32),
        values=(rng.standard_normal((T + 1, K)) * scale).astype(f32),
        final_values=(rng.standard_normal((T, K)) * scale).astype(f32) if truncations else None,
        terminated=terminated,
        truncated=truncated,
        logits=(rng.standard_normal((T * K, n)) * 3).astype(f32),
        actions=rng.integers(0, n, (T, K)),
    )


@settings(max_examples=150, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    T=st.integers(1, 12),
    K=st.integers(1, 9),
    n=st.integers(1, 7),
    truncations=st.booleans(),
    normalize=st.booleans(),
    gamma=st.sampled_from([0.0, 0.9, 0.99, 1.0]),
    lam=st.sampled_from([0.0, 0.95, 1.0]),
    ent=st.sampled_from([0.0, 0.01, 0.1]),
    vf=st.sampled_from([0.25, 0.5, 1.0]),
    scale=st.sampled_from([0.01, 1.0, 100.0]),
)
# found by hypothesis: advantages of ~100 over 2 samples, where the float32 numpy update's p A/B - A/B loses digits
@example(
    seed=4306888, T=1, K=2, n=2, truncations=False, normalize=False, gamma=0.0, lam=0.0, ent=0.0, vf=0.25, scale=100.0
)
def test_the_kernel_is_as_exact_as_the_numpy_update(seed, T, K, n, truncations, normalize, gamma, lam, ent, vf, scale):
    """Against the numpy functions in float64 (the exact answer, to float32's eyes): the kernel's error is within a
    small multiple of the float32 numpy update's own (both round their float32 advantages step by step; where the
    float32 update cancels large terms, A/B p - A/B, it loses digits the kernel, in double, keeps) plus float32
    rounding of the result."""
    data = rollout(seed, T, K, n, truncations, scale)
    settings_ = (gamma, lam, ent, vf, normalize)
    got = FusedCategoricalUpdate(T, K, n)(*data.values(), *settings_)
    float32 = numpy_update(*data.values(), *settings_)
    wide = {k: (v.astype(np.float64) if v is not None and v.dtype == np.float32 else v) for k, v in data.items()}
    exact = numpy_update(*wide.values(), *settings_)
    assert got[1].shape == (T * K, n) and got[2].shape == (T * K,) and got[0].dtype == np.float64
    for name, kernel, reference, truth in zip(("losses", "dlogits", "dvalues"), got, float32, exact, strict=True):
        float32_error = np.abs(reference - truth).max()
        tolerance = 4 * float32_error + 1e-6 * max(1.0, np.abs(truth).max())
        assert np.abs(kernel - truth).max() <= tolerance, name


def test_the_default_rollout_matches_to_1e_6():
    """CartPole's defaults (8 envs x 5 steps, 2 actions), with every kind of episode end in the rollout."""
    data = rollout(7, 5, 8, 2, truncations=True)
    assert data["terminated"].any() and data["truncated"].any()
    settings_ = (0.99, 1.0, 0.0, 0.5, False)
    got = FusedCategoricalUpdate(5, 8, 2)(*data.values(), *settings_)
    for a, b in zip(got, numpy_update(*data.values(), *settings_), strict=True):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)


@pytest.mark.parametrize("where", ["values", "logits", "rewards"])
def test_a_nan_input_gives_non_finite_loss_terms_as_the_numpy_update_does(where):
    """The worker skips an update whose loss terms are not finite: a NaN anywhere must reach them."""
    data = rollout(3, 5, 8, 2, truncations=False)
    data[where].flat[5] = np.nan
    losses, _, _ = FusedCategoricalUpdate(5, 8, 2)(*data.values(), 0.99, 0.95, 0.01, 0.5, False)
    expected, _, _ = numpy_update(*data.values(), 0.99, 0.95, 0.01, 0.5, False)
    assert not np.isfinite(losses.sum()) and not np.isfinite(expected.sum())


def test_the_outputs_are_reused_but_the_loss_terms_are_a_new_array():
    data = rollout(1, 5, 8, 2, truncations=False)
    update = FusedCategoricalUpdate(5, 8, 2)
    first = update(*data.values(), 0.99, 0.95, 0.01, 0.5, False)
    second = update(*data.values(), 0.99, 0.95, 0.01, 0.5, True)
    assert first[0] is not second[0] and np.shares_memory(first[1], second[1])


def test_buffers_of_the_wrong_size_layout_or_action_range_are_refused():
    update = FusedCategoricalUpdate(5, 8, 2)
    good = rollout(1, 5, 8, 2, truncations=False)
    short = dict(good, rewards=good["rewards"][:4])
    with pytest.raises(ValueError, match="rewards"):
        update(*short.values(), 0.99, 0.95, 0.01, 0.5, False)
    strided = dict(good, values=np.zeros((6, 16), np.float32)[:, ::2])
    with pytest.raises((ValueError, BufferError)):
        update(*strided.values(), 0.99, 0.95, 0.01, 0.5, False)
    wide = dict(good, actions=good["actions"].astype(np.int32))  # 4 bytes an action where 8 are read
    with pytest.raises(TypeError, match="actions"):
        update(*wide.values(), 0.99, 0.95, 0.01, 0.5, False)
    # the element types are the kernel's to check: a float64 array of the right size in bytes is still refused
    # (40 float64 rewards are the 320 bytes of 80 float32 ones), as are float actions and an int64 loss buffer
    for name, array in (
        ("rewards", np.zeros((5, 4), np.float64)),
        ("logits", good["logits"].astype(np.float64)[:, :1].copy()),
        ("actions", good["actions"].astype(np.float64)),
    ):
        with pytest.raises(TypeError, match=name):
            update(*dict(good, **{name: array}).values(), 0.99, 0.95, 0.01, 0.5, False)
    with pytest.raises(TypeError, match="losses"):
        update._kernel(
            *good.values(), update._dlogits_t, update._dvalues, np.zeros(4, np.int64), 5, 8, 2, 0.99, 0.95, 0.0, 0.5, 0
        )
    outside = dict(good, actions=np.full((5, 8), 2))
    with pytest.raises(ValueError, match="outside"):
        update(*outside.values(), 0.99, 0.95, 0.01, 0.5, False)
    readonly = good["values"].copy()
    readonly.flags.writeable = False  # inputs may be read-only: only the outputs are written
    update(*dict(good, values=readonly).values(), 0.99, 0.95, 0.01, 0.5, False)


def test_it_applies_to_float32_categorical_only_and_can_be_turned_off(monkeypatch):
    config = Config()
    assert KernelLoss.supports(config, Categorical(3), torch.float32) is None
    assert "float64" in KernelLoss.supports(config, Categorical(3), torch.float64)
    multi = MultiCategorical(np.array([2, 3]), np.zeros(2, np.int64), np.dtype(np.int64))
    assert "MultiCategorical" in KernelLoss.supports(config, multi, torch.float32)
    monkeypatch.setenv(KERNEL_ENV, "0")
    assert KernelLoss.supports(config, Categorical(3), torch.float32) == f"{KERNEL_ENV}=0"
