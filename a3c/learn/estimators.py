"""The rollout's targets, as named estimators: what each sample's advantage and value target are, written once and used
by both objectives (a3c.learn.objectives). ``ESTIMATORS`` maps ``--targets``'s names to them:

    gae     generalised advantage estimation (Schulman et al. 2016) with the bootstrap at truncation
    vtrace  V-trace (Espeholt et al. 2018, IMPALA): GAE's recursion with truncated importance weights between the
            policy being trained and the policy that acted, for samples the shared model has moved past

Each has a plain loop beside it, written like the maths one sample at a time (``gae_loop``, ``vtrace_loop``), which
tests/learn/test_estimators.py holds the vectorised one to. The vectorised ones run in numpy on the rollout's [T, K]
arrays: on a worker's rollout (a few dozen to a few thousand numbers) each numpy operation costs about a microsecond
where torch's dispatch costs several, and this runs on every update (the torch-facing functions of
a3c.learn.losses convert and call these). The C kernel (a3c.learn.update.kernel) computes ``gae`` inside its one call
for the A3C objective and is held to it by its own test.

Shapes: T = rollout length, K = envs; every [T, K] array is indexed [step, env].

The bootstrap (``next_values``): V(s_{t+1}) for every step. Inside the rollout it is values[t + 1]; after the last
step V(boundary observation); where the episode was *truncated* at step t (a time limit: the MDP did not end) it is
V(final observation), the observation returned with truncated=True, not the reset one after it. Where it
*terminated* the target bootstraps from 0 (``terminated`` zeroes it). The trace stops at any episode end (``dones``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def next_values(values: np.ndarray, final_values: np.ndarray | None, truncated: np.ndarray) -> np.ndarray:
    """V(s_{t+1}) [T, K] from values [T + 1, K] (the rollout's and the boundary observation's) and final_values
    [T, K] (V of the final observations; None where no episode was truncated)."""
    following = values[1:]
    if final_values is None:
        return following
    return np.where(truncated.astype(bool), final_values, following)


def gae(
    rewards: np.ndarray,
    values: np.ndarray,
    next_values: np.ndarray,
    terminated: np.ndarray,
    dones: np.ndarray,
    gamma: float,
    gae_lambda: float,
) -> np.ndarray:
    """The GAE advantages [T, K], in the dtype of ``values`` [T, K] (V(s_t)):

        delta_t = r_t + gamma (1 - terminated_t) next_values_t - values_t
        A_t     = delta_t + gamma lambda (1 - done_t) A_{t+1},   A_T = 0

    The value targets are A_t + values_t. In few array operations, the recursion in place. The factors (1 -
    terminated) and (1 - dones) are applied as masks, not products: 0 x NaN is NaN, so a non-finite sample (a NaN
    observation's value, an infinite reward) would otherwise reach the advantages of the episode before it, which
    the loop keeps clean; on finite input the masks change no bit of the product's result."""
    deltas = next_values.astype(values.dtype)  # (a copy)
    deltas[terminated != 0] = 0.0  # no bootstrap past a terminal
    deltas *= gamma
    deltas += rewards
    deltas -= values
    trace = np.subtract(1.0, dones, dtype=values.dtype)
    trace *= gamma * gae_lambda
    _accumulate_backwards(deltas, trace, dones != 0)  # A_t = delta_t + trace_t A_{t+1}, from the last step back
    return deltas


def _accumulate_backwards(out: np.ndarray, trace: np.ndarray, stops: np.ndarray) -> None:
    """out[t] += trace[t] * out[t + 1] from the last step back, in place, where ``trace`` is 0 at the ``stops``
    (episode ends): nothing crosses them, a non-finite term after an episode's end included (masked, as 0 x NaN is
    NaN; only when ``out`` holds one, so the finite case keeps its two array operations a step)."""
    if np.isfinite(out).all():
        for t in range(out.shape[0] - 2, -1, -1):
            out[t] += trace[t] * out[t + 1]
        return
    for t in range(out.shape[0] - 2, -1, -1):
        carried = trace[t] * out[t + 1]
        carried[stops[t]] = 0.0
        out[t] += carried


def gae_loop(
    rewards: np.ndarray,
    values: np.ndarray,
    next_values: np.ndarray,
    terminated: np.ndarray,
    dones: np.ndarray,
    gamma: float,
    gae_lambda: float,
) -> np.ndarray:
    """``gae`` one sample at a time, as the paper writes it (the reference its test holds ``gae`` to)."""
    T, K = rewards.shape
    adv = np.zeros((T, K), dtype=np.float64)
    for k in range(K):
        following = 0.0
        for t in reversed(range(T)):
            bootstrap = 0.0 if terminated[t, k] else float(next_values[t, k])
            delta = float(rewards[t, k]) + gamma * bootstrap - float(values[t, k])
            carried = 0.0 if dones[t, k] else gamma * gae_lambda * following
            adv[t, k] = following = delta + carried
    return adv


def vtrace(
    rewards: np.ndarray,
    values: np.ndarray,
    next_values: np.ndarray,
    terminated: np.ndarray,
    dones: np.ndarray,
    gamma: float,
    gae_lambda: float,
    log_rhos: np.ndarray,
    rho_bar: float = 1.0,
    c_bar: float = 1.0,
) -> tuple[np.ndarray, np.ndarray]:
    """V-trace targets with lambda (Espeholt et al. 2018, eq. 1 and its remark on lambda), episode ends handled as
    ``gae``'s. ``values``/``next_values`` are the *current* policy's V(s_t) and V(s_{t+1}) [T, K]; ``log_rhos``
    [T, K] = log pi(a_t|s_t) - log mu(a_t|s_t), the current policy against the one that acted. With
    rho_t = min(rho_bar, e^log_rho) and c_t = lambda min(c_bar, e^log_rho):

        delta_t    = rho_t (r_t + gamma (1 - terminated_t) next_values_t - values_t)
        v_t - V_t  = delta_t + gamma (1 - done_t) c_t (v_{t+1} - V_{t+1}),   zero after the rollout
        A_t        = r_t + gamma (1 - terminated_t) v'_{t+1} - values_t

    where v'_{t+1} is v_{t+1} inside an episode and next_values_t where the episode or the rollout ended there (the
    bootstrap). Returns (A [T, K], the value targets v [T, K]). The policy-gradient weight rho_t of IMPALA's actor
    loss is not in A: an objective that needs it applies it (PPO's surrogate carries its own ratio). With every
    log_rho = 0, v - V is ``gae``'s advantage; with lambda = 1 as well, A is too."""
    dtype = values.dtype
    rhos = np.exp(log_rhos.astype(dtype, copy=False))
    ended = terminated != 0  # (masks rather than (1 - terminated) products: gae's docstring says why)
    stops = dones != 0
    not_done = np.subtract(1.0, dones, dtype=dtype)
    bootstrap = next_values.astype(dtype)
    bootstrap[ended] = 0.0
    deltas = rewards + gamma * bootstrap - values
    deltas *= np.minimum(rho_bar, rhos)
    trace = gamma * gae_lambda * not_done * np.minimum(c_bar, rhos)
    corrections = deltas  # v_t - V_t, from the last step back
    _accumulate_backwards(corrections, trace, stops)
    targets = corrections + values
    following = next_values.copy()  # v'_{t+1}: the bootstrap where the episode or the rollout ended ...
    following[:-1] = np.where(stops[:-1], next_values[:-1], targets[1:])  # ... else the next step's target
    following[ended] = 0.0
    advantages = rewards + gamma * following - values
    return advantages, targets


def vtrace_loop(
    rewards: np.ndarray,
    values: np.ndarray,
    next_values: np.ndarray,
    terminated: np.ndarray,
    dones: np.ndarray,
    gamma: float,
    gae_lambda: float,
    log_rhos: np.ndarray,
    rho_bar: float = 1.0,
    c_bar: float = 1.0,
) -> tuple[np.ndarray, np.ndarray]:
    """``vtrace`` one sample at a time, as the paper's sum: v_s = V(s) + sum_t gamma^(t-s) (prod_{s<=i<t} c_i)
    delta_t over the rest of the episode inside the rollout (the reference its test holds ``vtrace`` to)."""
    T, K = rewards.shape
    targets = np.zeros((T, K))
    advantages = np.zeros((T, K))
    for k in range(K):
        for s in range(T):
            total, weight = 0.0, 1.0
            for t in range(s, T):
                rho = float(np.exp(log_rhos[t, k]))
                bootstrap = 0.0 if terminated[t, k] else float(next_values[t, k])
                delta = min(rho_bar, rho) * (float(rewards[t, k]) + gamma * bootstrap - float(values[t, k]))
                total += weight * delta
                if dones[t, k]:
                    break
                weight *= gamma * gae_lambda * min(c_bar, rho)
            targets[s, k] = float(values[s, k]) + total
        for s in range(T):
            ended = bool(dones[s, k]) or s == T - 1
            following = float(next_values[s, k]) if ended else targets[s + 1, k]
            bootstrap = 0.0 if terminated[s, k] else following
            advantages[s, k] = float(rewards[s, k]) + gamma * bootstrap - float(values[s, k])
    return advantages, targets


# --targets: name -> (advantages, value targets) from the rollout's arrays and, for V-trace, the log-ratios
Estimator = Callable[..., tuple[np.ndarray, np.ndarray]]


def gae_targets(
    rewards: np.ndarray,
    values: np.ndarray,
    next_values: np.ndarray,
    terminated: np.ndarray,
    dones: np.ndarray,
    gamma: float,
    gae_lambda: float,
    log_rhos: np.ndarray | None = None,
    rho_bar: float = 1.0,
    c_bar: float = 1.0,
) -> tuple[np.ndarray, np.ndarray]:
    """``gae`` as an estimator: (advantages, advantages + values); the log-ratios are not used (GAE's targets are
    the acting policy's, whatever has moved since)."""
    adv = gae(rewards, values, next_values, terminated, dones, gamma, gae_lambda)
    return adv, adv + values


def vtrace_targets(
    rewards: np.ndarray,
    values: np.ndarray,
    next_values: np.ndarray,
    terminated: np.ndarray,
    dones: np.ndarray,
    gamma: float,
    gae_lambda: float,
    log_rhos: np.ndarray | None = None,
    rho_bar: float = 1.0,
    c_bar: float = 1.0,
) -> tuple[np.ndarray, np.ndarray]:
    """``vtrace`` as an estimator (log_rhos None: the policy that acted is the one trained, every ratio 1)."""
    rhos = np.zeros_like(values) if log_rhos is None else log_rhos
    return vtrace(rewards, values, next_values, terminated, dones, gamma, gae_lambda, rhos, rho_bar, c_bar)


ESTIMATORS: dict[str, Estimator] = {"gae": gae_targets, "vtrace": vtrace_targets}
