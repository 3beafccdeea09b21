"""Losses against slow loops written like the maths, one env and one step at a time."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from a3c.learn.distributions import Categorical
from a3c.learn.losses import (
    action_log_probs,
    actor_critic_loss,
    actor_critic_loss_grads,
    gae_advantages,
    n_step_returns,
    next_state_values,
    normalized_advantages,
    rollout_targets,
)


def slow_gae(rewards, values, last_value, final_values, terminated, truncated, gamma, lam):
    """Per-env, per-step GAE for ONE env, following the definitions literally."""
    T = len(rewards)
    adv = [0.0] * T
    for t in reversed(range(T)):
        if terminated[t]:
            v_next = 0.0
        elif truncated[t]:
            v_next = final_values[t]  # V(final observation), not of the reset observation
        elif t == T - 1:
            v_next = last_value  # the rollout boundary
        else:
            v_next = values[t + 1]
        delta = rewards[t] + gamma * v_next - values[t]
        episode_goes_on = not (terminated[t] or truncated[t]) and t < T - 1
        adv[t] = delta + (gamma * lam * adv[t + 1] if episode_goes_on else 0.0)
    return adv, [a + v for a, v in zip(adv, values, strict=True)]


def slow_n_step(rewards, values, last_value, final_values, terminated, truncated, gamma):
    T = len(rewards)
    out = [0.0] * T
    for t in range(T):
        # sum rewards until the episode ends or the rollout does, then bootstrap
        g, discount, k = 0.0, 1.0, t
        while True:
            g += discount * rewards[k]
            discount *= gamma
            if terminated[k]:
                break
            if truncated[k]:
                g += discount * final_values[k]
                break
            if k == T - 1:
                g += discount * last_value
                break
            k += 1
        out[t] = g
    return out


def col(x, k):
    return x[:, k].tolist()


def rollout_case(seed, T=7, K=3):
    g = torch.Generator().manual_seed(seed)
    rewards = torch.randn(T, K, generator=g, dtype=torch.float64)
    values = torch.randn(T, K, generator=g, dtype=torch.float64)
    last = torch.randn(K, generator=g, dtype=torch.float64)
    final = torch.randn(T, K, generator=g, dtype=torch.float64)
    terminated = torch.zeros(T, K, dtype=torch.float64)
    truncated = torch.zeros(T, K, dtype=torch.float64)
    terminated[2, 0] = 1  # termination mid-rollout
    truncated[3, 1] = 1  # truncation mid-rollout
    truncated[T - 1, 2] = 1  # truncation on the last step
    terminated[5, 1] = 1
    return rewards, values, last, final, terminated, truncated


@pytest.mark.parametrize("gamma,lam", [(0.99, 0.95), (0.9, 1.0), (1.0, 0.0), (0.5, 0.5)])
@pytest.mark.parametrize("seed", [0, 1])
def test_gae_matches_slow_loop_with_truncation_mid_rollout(gamma, lam, seed):
    rewards, values, last, final, terminated, truncated = rollout_case(seed)
    next_values = next_state_values(values, last, final, truncated)
    dones = torch.maximum(terminated, truncated)
    adv, ret = gae_advantages(rewards, values, next_values, terminated, dones, gamma, lam)
    for k in range(rewards.shape[1]):
        exp_adv, exp_ret = slow_gae(
            col(rewards, k),
            col(values, k),
            float(last[k]),
            col(final, k),
            col(terminated, k),
            col(truncated, k),
            gamma,
            lam,
        )
        assert adv[:, k].tolist() == pytest.approx(exp_adv, rel=1e-12, abs=1e-12)
        assert ret[:, k].tolist() == pytest.approx(exp_ret, rel=1e-12, abs=1e-12)


@settings(max_examples=60, deadline=None)
@given(
    T=st.integers(1, 8),
    K=st.integers(1, 5),
    gamma=st.floats(0.0, 1.0),
    lam=st.floats(0.0, 1.0),
    seed=st.integers(0, 2**16),
    truncations=st.booleans(),
)
def test_the_workers_numpy_targets_follow_the_definitions(T, K, gamma, lam, seed, truncations):
    """rollout_targets (the worker's: bootstrap and GAE in one, in numpy, float32 as the buffers are) against the
    slow loop written like the maths; episodes end anywhere, terminated or truncated, never both."""
    rng = np.random.default_rng(seed)
    rewards, values, final = (rng.normal(size=s).astype(np.float32) for s in ((T, K), (T + 1, K), (T, K)))
    ends = rng.random((T, K)) < 0.3
    truncated_at = ends & (rng.random((T, K)) < 0.5) if truncations else np.zeros((T, K), bool)
    terminated = (ends & ~truncated_at).astype(np.float32)
    truncated = truncated_at.astype(np.float32)
    adv, ret = rollout_targets(rewards, values, final if truncations else None, terminated, truncated, gamma, lam)
    assert adv.dtype == ret.dtype == np.float32 and adv.shape == ret.shape == (T, K)
    for k in range(K):
        exp_adv, exp_ret = slow_gae(
            rewards[:, k].tolist(),
            values[:T, k].tolist(),
            float(values[T, k]),
            final[:, k].tolist(),
            terminated[:, k].tolist(),
            truncated[:, k].tolist(),
            gamma,
            lam,
        )
        np.testing.assert_allclose(adv[:, k], exp_adv, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(ret[:, k], exp_ret, rtol=1e-5, atol=1e-5)


@settings(max_examples=60, deadline=None)
@given(T=st.integers(1, 8), K=st.integers(1, 5), seed=st.integers(0, 2**16), truncations=st.booleans())
def test_the_workers_numpy_targets_are_the_torch_references_bit_for_bit(T, K, seed, truncations):
    """rollout_targets (the worker's bootstrap and GAE in numpy, on the rollout buffers) gives exactly the float32
    numbers of the torch references next_state_values + gae_advantages."""
    rng = np.random.default_rng(seed)
    rewards, values, final = (rng.normal(size=s).astype(np.float32) for s in ((T, K), (T + 1, K), (T, K)))
    ends = rng.random((T, K)) < 0.3
    truncated_at = ends & (rng.random((T, K)) < 0.5) if truncations else np.zeros((T, K), bool)
    terminated, truncated = (ends & ~truncated_at).astype(np.float32), truncated_at.astype(np.float32)
    adv, ret = rollout_targets(rewards, values, final if truncations else None, terminated, truncated, 0.99, 0.95)
    v, t = torch.from_numpy(values), torch.from_numpy(truncated)
    next_values = next_state_values(v[:T], v[T], torch.from_numpy(final) if truncations else v[1:], t)
    ref_adv, ref_ret = gae_advantages(
        torch.from_numpy(rewards),
        v[:T],
        next_values,
        torch.from_numpy(terminated),
        torch.maximum(torch.from_numpy(terminated), t),
        0.99,
        0.95,
    )
    np.testing.assert_array_equal(adv, ref_adv.numpy())
    np.testing.assert_array_equal(ret, ref_ret.numpy())


@pytest.mark.parametrize("gamma", [0.99, 0.7, 1.0])
def test_n_step_returns_match_slow_loop_and_gae_lambda_one(gamma):
    rewards, values, last, final, terminated, truncated = rollout_case(3)
    next_values = next_state_values(values, last, final, truncated)
    dones = torch.maximum(terminated, truncated)
    returns = n_step_returns(rewards, next_values, terminated, dones, gamma)
    for k in range(rewards.shape[1]):
        expected = slow_n_step(
            col(rewards, k), col(values, k), float(last[k]), col(final, k), col(terminated, k), col(truncated, k), gamma
        )
        assert returns[:, k].tolist() == pytest.approx(expected, rel=1e-12, abs=1e-12)
    _, gae_returns = gae_advantages(rewards, values, next_values, terminated, dones, gamma, 1.0)
    torch.testing.assert_close(gae_returns, returns)


def test_hand_computed_three_step_example():
    # one env: r = 1, 2, 3; V = 0.5, 0.5, 0.5; episode truncated at t=1 with V(final) = 10; boundary V = 4
    rewards = torch.tensor([[1.0], [2.0], [3.0]], dtype=torch.float64)
    values = torch.full((3, 1), 0.5, dtype=torch.float64)
    final = torch.tensor([[0.0], [10.0], [0.0]], dtype=torch.float64)
    truncated = torch.tensor([[0.0], [1.0], [0.0]], dtype=torch.float64)
    terminated = torch.zeros(3, 1, dtype=torch.float64)
    nv = next_state_values(values, torch.tensor([4.0], dtype=torch.float64), final, truncated)
    returns = n_step_returns(rewards, nv, terminated, truncated, 0.5)
    # R2 = 3 + .5*4 = 5; R1 = 2 + .5*10 = 7 (bootstrap from the final obs); R0 = 1 + .5*R1 = 4.5
    assert returns[:, 0].tolist() == [4.5, 7.0, 5.0]
    # the same episode terminated instead: R1 = 2
    returns = n_step_returns(rewards, nv, truncated, truncated, 0.5)
    assert returns[:, 0].tolist() == [2.0, 2.0, 5.0]


def test_actor_critic_loss_matches_torch_distributions():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(6, 4, generator=g, requires_grad=True)
    values = torch.randn(6, generator=g, requires_grad=True)
    actions = torch.randint(0, 4, (6,), generator=g)
    adv = torch.randn(6, generator=g)
    ret = torch.randn(6, generator=g)
    terms = actor_critic_loss(Categorical(4), logits, values, actions, adv, ret, ent_coef=0.01, vf_coef=0.5)
    dist = torch.distributions.Categorical(logits=logits)
    policy = -(dist.log_prob(actions) * adv).mean()
    value = 0.5 * ((ret - values) ** 2).mean()
    entropy = dist.entropy().mean()
    assert math.isclose(terms.policy.item(), policy.item(), rel_tol=1e-6)
    assert math.isclose(terms.value.item(), value.item(), rel_tol=1e-6)
    assert math.isclose(terms.entropy.item(), entropy.item(), rel_tol=1e-6)
    assert math.isclose(terms.total.item(), (policy + 0.5 * value - 0.01 * entropy).item(), rel_tol=1e-6)
    # advantages are constants for the policy term: no gradient reaches them through the loss
    adv.requires_grad_(True)
    actor_critic_loss(Categorical(4), logits, values, actions, adv, ret, 0.01, 0.5).total.backward()
    assert adv.grad is None


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_closed_form_loss_gradients_match_autograd(seed):
    g = torch.Generator().manual_seed(seed)
    B, A = 12, 3
    logits = torch.randn(B, A, generator=g, dtype=torch.float64, requires_grad=True)
    values = torch.randn(B, generator=g, dtype=torch.float64, requires_grad=True)
    actions = torch.randint(0, A, (B,), generator=g)
    adv = torch.randn(B, generator=g, dtype=torch.float64)
    ret = torch.randn(B, generator=g, dtype=torch.float64)
    reference = actor_critic_loss(Categorical(A), logits, values, actions, adv, ret, ent_coef=0.05, vf_coef=0.7)
    reference.total.backward()
    terms, dlogits, dvalues = actor_critic_loss_grads(
        Categorical(A), logits, values, actions, adv, ret, ent_coef=0.05, vf_coef=0.7
    )
    for ours, theirs in zip(terms, reference, strict=True):
        assert ours.item() == pytest.approx(theirs.item(), rel=1e-12)
    torch.testing.assert_close(torch.from_numpy(dlogits), logits.grad, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(torch.from_numpy(dvalues), values.grad, rtol=1e-12, atol=1e-12)


def test_closed_form_gradients_reach_the_network_like_autograd():
    from a3c.learn.model import flatten_parameters, mlp_actor_critic

    torch.manual_seed(0)
    model = mlp_actor_critic(4, 2, (16, 16)).double()
    _, grads = flatten_parameters(model)
    obs = torch.randn(10, 4, dtype=torch.float64)
    actions = torch.randint(0, 2, (8,))
    adv, ret = torch.randn(8, dtype=torch.float64), torch.randn(8, dtype=torch.float64)
    dist = Categorical(2)
    logits, values, _ = model(obs)  # the last 2 rows take no part in the loss (like the rollout's boundary row)
    actor_critic_loss(dist, logits[:8], values[:8], actions, adv, ret, 0.01, 0.5).total.backward()
    expected = grads.clone()
    grads.zero_()
    logits, values, _ = model(obs)
    _, dlogits, dvalues = actor_critic_loss_grads(dist, logits[:8], values[:8], actions, adv, ret, 0.01, 0.5)
    torch.autograd.backward((logits[:8], values[:8]), (torch.from_numpy(dlogits), torch.from_numpy(dvalues)))
    torch.testing.assert_close(grads, expected, rtol=1e-10, atol=1e-12)


class NoClosedForm(Categorical):
    """Categorical without its closed form: the loss falls back to autograd over the head's output."""

    def policy_grad(self, params, actions, advantages, ent_coef):
        return None

    def policy_grad_np(self, params, actions, advantages, ent_coef):
        return None


def test_loss_gradients_without_a_closed_form_match_the_closed_form():
    g = torch.Generator().manual_seed(4)
    B, A = 10, 5
    logits = torch.randn(B, A, generator=g, dtype=torch.float64)
    values = torch.randn(B, generator=g, dtype=torch.float64)
    actions = torch.randint(0, A, (B,), generator=g)
    adv, ret = torch.randn(B, generator=g, dtype=torch.float64), torch.randn(B, generator=g, dtype=torch.float64)
    closed = actor_critic_loss_grads(Categorical(A), logits, values, actions, adv, ret, 0.03, 0.5)
    general = actor_critic_loss_grads(NoClosedForm(A), logits, values, actions, adv, ret, 0.03, 0.5)
    for ours, theirs in zip(general[0], closed[0], strict=True):
        assert ours.item() == pytest.approx(theirs.item(), rel=1e-12)
    np.testing.assert_allclose(general[1], closed[1], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(general[2], closed[2])


@settings(max_examples=80, deadline=None)
@given(
    shape=st.sampled_from([(1, 1), (1, 2), (5, 8), (20, 4), (3, 1)]),
    scale=st.floats(1e-6, 1e4),
    shift=st.floats(-1e3, 1e3),
    seed=st.integers(0, 2**16),
    dtype=st.sampled_from([np.float32, np.float64]),
)
def test_normalized_advantages_have_mean_zero_and_unit_sample_std_and_keep_the_order(shape, scale, shift, seed, dtype):
    """--normalize-advantage's transform against torch's (A - A.mean()) / (A.std() + 1e-8), SB3's, on
    advantages of any scale and offset: a new array of the same dtype and shape, the input untouched, the order of
    the samples kept; one sample centres to 0."""
    adv = (np.random.default_rng(seed).normal(size=shape) * scale + shift).astype(dtype)
    before = adv.copy()
    out = normalized_advantages(adv)
    assert out.dtype == adv.dtype and out.shape == adv.shape and np.array_equal(adv, before)
    if adv.size == 1:
        assert out.item() == 0.0
        return
    ref = torch.from_numpy(adv.astype(np.float64))
    expected = ((ref - ref.mean()) / (ref.std() + 1e-8)).numpy()
    # the float64 arithmetic of both sides loses ~eps64 * |shift| / scale to the offset (shift 820, scale 1e-6:
    # 1.8e-7): beyond that conditioning no implementation can agree closer
    tol = max(1e-5 if dtype == np.float32 else 1e-7, 8 * np.finfo(np.float64).eps * (abs(shift) / scale + 1))
    np.testing.assert_allclose(out, expected, rtol=tol, atol=tol)
    assert abs(float(out.astype(np.float64).mean())) < tol
    order = np.argsort(adv, axis=None)
    assert np.all(np.diff(out.ravel()[order]) >= 0)  # a monotone map: the samples' order is kept


def test_normalized_advantages_of_equal_samples_are_zeros_not_nan():
    """A rollout whose advantages are all equal (std 0): the 1e-8 keeps the result finite, zeros."""
    out = normalized_advantages(np.full((5, 8), 0.25, np.float32))
    assert np.array_equal(out, np.zeros((5, 8), np.float32))


def test_action_log_probs_takes_the_numpy_form_or_falls_back_to_the_gradient_s():
    """One log pi(a|s) whichever way it is computed: the distribution's numpy form (Categorical), or, where a family
    has none (NoClosedForm: autograd), the first output of policy_term_grads."""
    g = torch.Generator().manual_seed(8)
    logits, actions = torch.randn(6, 4, generator=g, dtype=torch.float64), torch.randint(0, 4, (6,), generator=g)
    expected = torch.log_softmax(logits, -1).gather(-1, actions[:, None])[:, 0].numpy()
    for dist in (Categorical(4), NoClosedForm(4)):
        np.testing.assert_allclose(action_log_probs(dist, logits, actions), expected, rtol=1e-12, atol=1e-12)
