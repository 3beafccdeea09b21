"""a3c.learn.estimators: the vectorised estimators held to their loops written one sample at a time (GAE and V-trace
on random rollouts with terminations, truncations and the rollout's end), and V-trace's relations to GAE: with every
log-ratio 0 its value targets are GAE's returns, and with lambda 1 as well its advantages are GAE's; its truncation
of the importance weights at rho_bar and c_bar."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from a3c.learn.estimators import ESTIMATORS, gae, gae_loop, next_values, vtrace, vtrace_loop


def random_rollout(seed: int, steps: int, envs: int, end_rate: float) -> dict[str, np.ndarray]:
    """A rollout's arrays [T, K] as the update reads them: rewards, V(s_t), V(s_{t+1}) (the next step's inside the
    rollout, the boundary observation's after the last step, the final observation's where the episode was
    truncated), and episode ends of both kinds (never both at one step, as the worker records them)."""
    rng = np.random.default_rng(seed)
    values = rng.normal(size=(steps + 1, envs))
    final = rng.normal(size=(steps, envs))
    ends = rng.random((steps, envs)) < end_rate
    terminated = (ends & (rng.random((steps, envs)) < 0.5)).astype(np.float64)
    truncated = (ends & (terminated == 0)).astype(np.float64)
    return {
        "rewards": rng.normal(size=(steps, envs)) * 2.0,
        "values": values[:steps],
        "next_values": next_values(values, final, truncated),
        "terminated": terminated,
        "dones": np.maximum(terminated, truncated),
        "log_rhos": rng.normal(size=(steps, envs)),  # ratios on both sides of 1 (rho_bar, c_bar bind on some)
    }


rollouts = st.builds(
    random_rollout,
    seed=st.integers(0, 2**32 - 1),
    steps=st.integers(1, 9),
    envs=st.integers(1, 4),
    end_rate=st.sampled_from([0.0, 0.2, 0.5, 1.0]),
)
discounts = st.floats(0.0, 1.0)


def ended_both_ways(seed: int = 3) -> dict[str, np.ndarray]:
    data = random_rollout(seed, 12, 3, 0.3)
    assert data["terminated"].any() and (data["dones"] > data["terminated"]).any()  # terminations and truncations
    return data


def without(data: dict[str, np.ndarray], *names: str) -> list[np.ndarray]:
    return [data[name] for name in ("rewards", "values", "next_values", "terminated", "dones") if name not in names]


@settings(max_examples=200, deadline=None)
@given(data=rollouts, gamma=discounts, lam=discounts)
def test_gae_is_its_loop(data, gamma, lam):
    expected = gae_loop(*without(data), gamma, lam)
    np.testing.assert_allclose(gae(*without(data), gamma, lam), expected, rtol=1e-10, atol=1e-10)


@settings(max_examples=200, deadline=None)
@given(
    data=rollouts,
    gamma=discounts,
    lam=discounts,
    rho_bar=st.sampled_from([0.5, 1.0, 2.0, 1e9]),
    c_bar=st.sampled_from([0.5, 1.0, 2.0, 1e9]),
)
def test_vtrace_is_its_loop(data, gamma, lam, rho_bar, c_bar):
    got = vtrace(*without(data), gamma, lam, data["log_rhos"], rho_bar, c_bar)
    expected = vtrace_loop(*without(data), gamma, lam, data["log_rhos"], rho_bar, c_bar)
    for got_part, expected_part in zip(got, expected, strict=True):  # (advantages, value targets)
        np.testing.assert_allclose(got_part, expected_part, rtol=1e-9, atol=1e-9)


@settings(max_examples=100, deadline=None)
@given(data=rollouts, gamma=discounts, lam=discounts)
def test_vtrace_on_policy_targets_are_gae_s_returns(data, gamma, lam):
    """Every log-ratio 0 (the policy trained is the one that acted): v_t = V_t + A_t^GAE(lambda)."""
    _, targets = vtrace(*without(data), gamma, lam, np.zeros_like(data["values"]))
    returns = gae_loop(*without(data), gamma, lam) + data["values"]
    np.testing.assert_allclose(targets, returns, rtol=1e-9, atol=1e-9)


@settings(max_examples=100, deadline=None)
@given(data=rollouts, gamma=discounts)
def test_vtrace_on_policy_with_lambda_one_has_gae_s_advantages(data, gamma):
    advantages, _ = vtrace(*without(data), gamma, 1.0, np.zeros_like(data["values"]))
    np.testing.assert_allclose(advantages, gae_loop(*without(data), gamma, 1.0), rtol=1e-9, atol=1e-9)


@settings(max_examples=100, deadline=None)
@given(data=rollouts, gamma=discounts, lam=discounts)
def test_vtrace_truncates_the_importance_weights_at_rho_bar_and_c_bar(data, gamma, lam):
    """Every ratio above 1 with rho_bar = c_bar = 1: each weight is truncated to 1, so the targets are the on-policy
    ones (GAE's returns); with the truncation lifted they are not."""
    above = np.abs(data["log_rhos"]) + 0.5
    advantages, targets = vtrace(*without(data), gamma, lam, above, 1.0, 1.0)
    on_policy = vtrace(*without(data), gamma, lam, np.zeros_like(above))
    np.testing.assert_allclose(targets, on_policy[1], rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(advantages, on_policy[0], rtol=1e-9, atol=1e-9)


def test_the_truncation_changes_the_targets_where_a_ratio_passes_it():
    """(What makes the test above able to fail: untruncated, ratios above 1 give other targets; rho_bar alone
    scales the TD errors, c_bar alone the trace.)"""
    data = ended_both_ways()
    above = np.abs(data["log_rhos"]) + 0.5
    truncated = vtrace(*without(data), 0.9, 0.8, above, 1.0, 1.0)[1]
    for rho_bar, c_bar in ((1e9, 1.0), (1.0, 1e9)):
        loose = vtrace(*without(data), 0.9, 0.8, above, rho_bar, c_bar)[1]
        assert np.abs(loose - truncated).max() > 0.1


def test_the_estimators_by_name():
    """--targets' names: GAE's (advantages, advantages + V), V-trace's with the log-ratios (None: on-policy)."""
    data = ended_both_ways()
    args = (*without(data), 0.95, 0.9)
    advantages, returns = ESTIMATORS["gae"](*args)
    np.testing.assert_allclose(advantages, gae_loop(*args), rtol=1e-12)
    np.testing.assert_allclose(returns, advantages + data["values"], rtol=1e-12)
    on_policy = ESTIMATORS["vtrace"](*args)
    for got, expected in zip(on_policy, vtrace_loop(*args, np.zeros_like(data["values"])), strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-12)
    off_policy = ESTIMATORS["vtrace"](*args, data["log_rhos"], 1.0, 1.0)
    for got, expected in zip(off_policy, vtrace_loop(*args, data["log_rhos"]), strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-12)


def test_gae_s_trace_stops_at_an_episode_end_and_bootstraps_only_where_not_terminated():
    """A hand case, one env: rewards 1, V = 0 everywhere but V(final observation) = 10 after the truncation at
    step 1 and V(boundary) = 5; terminated at step 3."""
    rewards = np.ones((5, 1))
    values = np.zeros((5, 1))
    following = np.array([[0.0], [10.0], [0.0], [0.0], [5.0]])  # V(s_{t+1}): the truncation's final obs, the boundary
    terminated = np.array([[0.0], [0.0], [0.0], [1.0], [0.0]])
    dones = np.array([[0.0], [1.0], [0.0], [1.0], [0.0]])
    gamma, lam = 0.5, 1.0
    advantages = gae(rewards, values, following, terminated, dones, gamma, lam)
    # step 4: 1 + 0.5 * 5; step 3: terminated, 1; step 2: 1 + 0.5 * 1; step 1: truncated, 1 + 0.5 * 10; step 0
    expected = [1.0 + 0.5 * 6.0, 6.0, 1.5, 1.0, 3.5]
    np.testing.assert_allclose(advantages[:, 0], expected)


def poisoned(data: dict[str, np.ndarray], seed: int, rate: float) -> dict[str, np.ndarray]:
    """``data`` with non-finite rewards and values here and there (NaN, +inf, -inf: what a broken env or a NaN
    observation's value brings)."""
    rng = np.random.default_rng(seed)
    out = {name: array.copy() for name, array in data.items()}
    for name in ("rewards", "values", "next_values"):
        hit = rng.random(out[name].shape) < rate
        out[name][hit] = rng.choice([np.nan, np.inf, -np.inf], size=int(hit.sum()))
    return out


def assert_same_where_finite(got: np.ndarray, expected: np.ndarray) -> None:
    """Non-finite exactly where the loop's result is, and equal to it elsewhere. (Which non-finite value is not held:
    the loop sums weight x delta where the recursion carries trace x A, and a weight that underflowed to 0 makes
    0 x inf = NaN in the one where the other has inf.)"""
    np.testing.assert_array_equal(np.isfinite(got), np.isfinite(expected))
    finite = np.isfinite(expected)
    np.testing.assert_allclose(got[finite], expected[finite], rtol=1e-10, atol=1e-10)


poisoned_rollouts = st.builds(
    poisoned, rollouts, seed=st.integers(0, 2**32 - 1), rate=st.sampled_from([0.05, 0.2, 0.5])
)


@settings(max_examples=200, deadline=None)
@given(data=poisoned_rollouts, gamma=discounts, lam=discounts)
def test_gae_is_its_loop_with_non_finite_samples(data, gamma, lam):
    """Found by probing: the vectorised recursion multiplied by (1 - done) = 0 where an episode ended, and 0 x NaN is
    NaN: one NaN reward made every earlier step of its env's rollout NaN, across the episode's end, where the loop
    leaves the earlier episode clean (PPO then dropped 71% of a run's samples)."""
    with np.errstate(invalid="ignore", over="ignore"):
        expected = gae_loop(*without(data), gamma, lam)
        got = gae(*without(data), gamma, lam)
    assert_same_where_finite(got, expected)


@settings(max_examples=200, deadline=None)
@given(data=poisoned_rollouts, gamma=discounts, lam=discounts)
def test_vtrace_is_its_loop_with_non_finite_samples(data, gamma, lam):
    args = (*without(data), gamma, lam, data["log_rhos"])
    with np.errstate(invalid="ignore", over="ignore"):
        expected = vtrace_loop(*args)
        got = vtrace(*args)
    for a, b in zip(got, expected, strict=True):
        assert_same_where_finite(a, b)
