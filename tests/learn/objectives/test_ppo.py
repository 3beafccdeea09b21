"""--algo ppo's objective (a3c.learn.objectives.ppo): the clipped surrogate (a3c.learn.losses.clipped_surrogate_loss)
against a slow hand computation, sample by sample in float64 (ratio clipping on both sides, value clipping, the
entropy), and its learner (``PPOUpdate``) on a worker's rollout: the behaviour log-probabilities of the params acting
returned, GAE lambda with the bootstrap at truncation, the plan (every sample once an epoch, shuffled, never a short
minibatch: ``split``; an LSTM's minibatches of whole envs; samples with non-finite targets left out and counted), a
minibatch's gradient at moved weights against autograd of the objective written sample by sample (advantages
normalised over that minibatch alone, the value clip), the LSTM's minibatch unrolled from its start state, the
diagnostics (approx_kl, clip fraction, explained variance) against their definitions, and V-trace's targets
recomputed with each epoch's weights."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from worker_rig import make_worker, worker_spec

from a3c.learn.distributions import Categorical
from a3c.learn.estimators import ESTIMATORS, next_values, vtrace_loop
from a3c.learn.losses import clipped_surrogate_loss
from a3c.learn.model import build_model
from a3c.learn.objectives.ppo import TERMS, PPOUpdate, explained_variance, ratio_diagnostics, split
from a3c.learn.update.paths import PATH_ENV
from a3c.learn.update.protocol import Minibatch
from a3c.run.worker import RANK_ENV

CLIP, CLIP_VF, ENT, VF = 0.2, 0.3, 0.05, 0.5


def hand_surrogate(logits, actions, behaviour_log_probs, behaviour_values, values, advantages, returns, clip_vf):
    """The loss's terms and d loss / d (logits, values), one sample at a time, written like the maths."""
    B, n = logits.shape
    policy = value = entropy = 0.0
    dlogits, dvalues = np.zeros((B, n)), np.zeros(B)
    for i in range(B):
        z = logits[i] - logits[i].max()
        p = np.exp(z) / np.exp(z).sum()
        log_p = np.log(p)
        a, A = int(actions[i]), advantages[i]
        ratio = math.exp(log_p[a] - behaviour_log_probs[i])
        unclipped, clipped = ratio * A, min(max(ratio, 1 - CLIP), 1 + CLIP) * A
        policy -= min(unclipped, clipped) / B
        onehot = np.eye(n)[a]
        if unclipped <= clipped:  # the unclipped term is the min: d(-r A)/dz = -A r (onehot - p)
            dlogits[i] -= A * ratio * (onehot - p) / B
        h = -(p * log_p).sum()
        entropy += h / B
        dlogits[i] -= ENT * (-p * (log_p + h)) / B  # d(-c H)/dz_j = c p_j (log p_j + H)
        error = values[i] - returns[i]
        if clip_vf is None:
            value += 0.5 * error**2 / B
            dvalues[i] += VF * error / B
        else:
            moved = min(max(values[i] - behaviour_values[i], -clip_vf), clip_vf)
            clipped_error = behaviour_values[i] + moved - returns[i]
            if error**2 >= clipped_error**2:
                value += 0.5 * error**2 / B
                dvalues[i] += VF * error / B
            else:  # the clipped error is the max: its gradient is V's only inside the clip
                value += 0.5 * clipped_error**2 / B
                inside = abs(values[i] - behaviour_values[i]) < clip_vf
                dvalues[i] += VF * clipped_error / B if inside else 0.0
    total = policy + VF * value - ENT * entropy
    return np.array([total, policy, value, entropy]), dlogits, dvalues


@pytest.mark.parametrize("clip_vf", [None, CLIP_VF], ids=["value-unclipped", "value-clipped"])
def test_the_clipped_surrogate_matches_the_maths_sample_by_sample(clip_vf):
    rng = np.random.default_rng(0)
    dist = Categorical(3)
    logits = rng.normal(size=(6, 3))
    actions = np.array([0, 1, 2, 0, 1, 2])
    z = logits - logits.max(1, keepdims=True)
    log_p = (z - np.log(np.exp(z).sum(1, keepdims=True)))[np.arange(6), actions]
    # ratios below, inside and above [0.8, 1.2], with advantages of both signs: each side of the clip binds once
    ratios = np.array([0.5, 0.5, 1.0, 1.1, 1.5, 1.5])
    advantages = np.array([1.0, -1.0, 2.0, -0.5, 1.0, -1.0])
    behaviour_log_probs = log_p - np.log(ratios)
    # values moved from the behaviour's by less and by more than the value clip, towards and away from the return
    behaviour_values = np.array([0.0, 1.0, 0.0, 2.0, -1.0, 0.5])
    values = np.array([0.1, 1.6, -0.5, 2.05, -1.2, 1.5])
    returns = np.array([1.0, 0.0, -1.0, 2.5, 0.0, 0.9])
    expected, dlogits, dvalues = hand_surrogate(
        logits, actions, behaviour_log_probs, behaviour_values, values, advantages, returns, clip_vf
    )
    z_t = torch.tensor(logits, requires_grad=True)
    v_t = torch.tensor(values, requires_grad=True)
    terms = clipped_surrogate_loss(
        dist,
        z_t,
        v_t,
        torch.tensor(actions),
        torch.tensor(behaviour_log_probs),
        torch.tensor(behaviour_values),
        torch.tensor(advantages),
        torch.tensor(returns),
        CLIP,
        clip_vf,
        ENT,
        VF,
    )
    terms.total.backward()
    np.testing.assert_allclose([float(t.detach()) for t in terms], expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(z_t.grad.numpy(), dlogits, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(v_t.grad.numpy(), dvalues, rtol=1e-10, atol=1e-12)
    # the clip binds where the hand computation says: samples 1 (r 0.5, A < 0) and 4 (r 1.5, A > 0) move only by
    # the entropy, the others by the policy term too
    entropy_only = np.array(
        [ENT * p * (np.log(p) + -(p * np.log(p)).sum()) / 6 for p in np.exp(z) / np.exp(z).sum(1)[:, None]]
    )
    np.testing.assert_allclose(z_t.grad.numpy()[[1, 4]], entropy_only[[1, 4]], rtol=1e-10, atol=1e-12)
    assert not np.allclose(z_t.grad.numpy()[[0, 2, 3, 5]], entropy_only[[0, 2, 3, 5]])


# -- the learner on a worker's rollout ----------------------------------------------------------------------------
BASE = dict(algo="ppo", n_steps=8, envs_per_worker=2, minibatch_size=4, n_epochs=2, gae_lambda=0.9, gamma=0.95)


def ppo_worker(**settings):
    """A PPO worker in this process after one rollout (on the weights it was built with: they acted)."""
    worker, store = make_worker(**{**BASE, **settings})
    worker.rollout()
    return worker, store


def learner_of(worker) -> PPOUpdate:
    assert isinstance(worker.learner, PPOUpdate)
    return worker.learner


def model_copy(worker):
    """A float64 copy of the worker's model at its present weights."""
    model = build_model(worker_spec(worker), worker.config)[0].double()
    torch.nn.utils.vector_to_parameters(worker.params.double(), model.parameters())
    return model


def hand_gae(worker, values, final_values, gamma, lam):
    """GAE written like the maths, per env from the last step back: terminated, no bootstrap; truncated, V(final
    observation); the rollout's end, V(boundary observation)."""
    T, K = worker.rewards.shape
    advantages = np.zeros((T, K))
    for k in range(K):
        running = 0.0
        for t in reversed(range(T)):
            term, trunc = bool(worker.terminated[t, k]), bool(worker.truncated[t, k])
            v_next = 0.0 if term else (final_values[t, k] if trunc else values[t + 1, k])
            delta = float(worker.rewards[t, k]) + gamma * v_next - values[t, k]
            running = delta + (gamma * lam * running if not (term or trunc) and t < T - 1 else 0.0)
            advantages[t, k] = running
    return advantages


def test_targets_take_the_acting_log_probs_and_gae_lambda_with_the_bootstrap_at_truncation():
    worker, _ = make_worker(**BASE)
    learner = learner_of(worker)
    acted = []
    act = learner.act

    def recording(rollout, step, state):  # what acting returned: the behaviour policy's params
        params, state = act(rollout, step, state)
        acted.append(torch.as_tensor(params).clone())
        return params, state

    worker.path.act = recording
    worker.rollout()
    assert worker.truncated.any() and worker.terminated.any()  # the scripted envs end episodes both ways
    learner.plan(worker.batch, np.random.default_rng(0))
    T, K = worker.rewards.shape
    model = model_copy(worker)
    with torch.no_grad():
        values = model(worker.obs.reshape((T + 1) * K, -1).double())[1].reshape(T + 1, K).numpy()
        final = model(worker.final_obs.reshape(T * K, -1).double())[1].reshape(T, K).numpy()
    expected = hand_gae(worker, values, final, 0.95, 0.9)
    np.testing.assert_allclose(learner.advantages.reshape(T, K), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(learner.returns.reshape(T, K), expected + values[:T], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(learner.values.reshape(T, K), values[:T], rtol=1e-5, atol=1e-5)
    # the log-probabilities are the acting policy's, of the actions taken, as acting computed its params
    log_softmax = torch.log_softmax(torch.stack(acted).double(), -1)
    behaviour = log_softmax.gather(-1, worker.actions.long().unsqueeze(-1)).squeeze(-1).numpy()
    np.testing.assert_allclose(learner.log_probs.reshape(T, K), behaviour, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("lstm", [0, 4], ids=["samples", "lstm-envs"])
def test_each_epoch_takes_every_sample_once_shuffled(lstm):
    worker, _ = ppo_worker(lstm=lstm, envs_per_worker=4, minibatch_size=16 if lstm else 5)
    T, K = worker.rewards.shape
    plan = learner_of(worker).plan(worker.batch, np.random.default_rng(0))
    assert all(m.pull for m in plan)  # PPO pulls before every minibatch
    epochs = [[m for m in plan if m.epoch == e] for e in range(2)]
    assert len(plan) == sum(len(e) for e in epochs)
    for epoch in epochs:
        if lstm:  # whole envs, 16 // 8 steps = 2 a minibatch, their steps t-major
            assert [len(m.envs) for m in epoch] == [2, 2]
            assert sorted(np.concatenate([m.envs for m in epoch])) == [0, 1, 2, 3]
            for m in epoch:
                assert m.samples.tolist() == (np.arange(T)[:, None] * K + m.envs[None, :]).reshape(-1).tolist()
        else:  # 32 samples in minibatches of at least 5: the remainder spread, none short
            assert sorted(len(m.samples) for m in epoch) == [5, 5, 5, 5, 6, 6]
            assert sorted(np.concatenate([m.samples for m in epoch])) == list(range(T * K))
    key = "envs" if lstm else "samples"
    first, second = (np.concatenate([getattr(m, key) for m in epoch]) for epoch in epochs)
    assert not np.array_equal(first, second)  # shuffled each epoch
    if not lstm:
        assert not np.array_equal(first, np.arange(T * K))  # (and not in the rollout's order)
    again = learner_of(worker).plan(worker.batch, np.random.default_rng(1))
    assert any(not np.array_equal(getattr(a, key), getattr(b, key)) for a, b in zip(plan, again, strict=True))


def test_split_never_makes_a_minibatch_shorter_than_the_size():
    """65 samples in minibatches of 64: one of 65, not [64, 1] (a 1-sample minibatch's normalised advantage is 0 or
    undefined, yet it would push a full step)."""
    assert [len(part) for part in split(np.arange(65), 64)] == [65]
    assert [len(part) for part in split(np.arange(127), 64)] == [127]
    assert [len(part) for part in split(np.arange(128), 64)] == [64, 64]
    assert [len(part) for part in split(np.arange(10), 64)] == [10]  # fewer than one minibatch: one of all


@settings(max_examples=300, deadline=None)
@given(samples=st.integers(1, 400), size=st.integers(1, 130))
def test_split_keeps_every_sample_once_in_minibatches_of_at_least_the_size(samples, size):
    order = np.random.default_rng(samples).permutation(samples)
    parts = split(order, size)
    np.testing.assert_array_equal(np.concatenate(parts), order)  # every sample once, in the order given
    if samples >= size:
        assert len(parts) == samples // size
        assert all(size <= len(part) < 2 * size for part in parts)
        assert max(map(len, parts)) - min(map(len, parts)) <= 1  # the remainder spread evenly
    else:
        assert len(parts) == 1


@pytest.mark.filterwarnings("ignore:.*not within the observation space")
def test_samples_with_non_finite_targets_are_left_out_and_counted(monkeypatch):
    """envs/Faulty-v0's NaN observation at each env's 3rd step: V there is NaN, and GAE carries it back through the
    episode's earlier steps. Those samples (and only those) are left out of every minibatch, and counted; the
    rest are planned and their gradients finite."""
    monkeypatch.setenv(RANK_ENV, "0")  # the worker sets it for its envs; undone after the test
    worker, _ = ppo_worker(env="envs/Faulty-v0", env_kwargs={"nan_at": 3, "nan_for": 1}, minibatch_size=2)
    learner = learner_of(worker)
    assert torch.isnan(worker.obs[3]).all()
    plan = learner.plan(worker.batch, np.random.default_rng(0))
    finite = np.isfinite(learner.advantages) & np.isfinite(learner.returns) & np.isfinite(learner.log_probs)
    T, K = worker.rewards.shape
    assert 0 < finite.sum() < T * K  # some samples are non-finite, not all
    assert learner.dropped_samples == T * K - finite.sum()
    for epoch in range(2):
        taken = np.concatenate([m.samples for m in plan if m.epoch == epoch])
        assert sorted(taken) == np.flatnonzero(finite).tolist()
    terms = learner.gradient(worker.batch, plan[0])
    assert np.isfinite(terms[:6]).all() and np.isfinite(worker.grads.numpy()).all()
    learner.plan(worker.batch, np.random.default_rng(1))  # counted over the worker's life
    assert learner.dropped_samples == 2 * (T * K - finite.sum())


@pytest.mark.filterwarnings("ignore:.*not within the observation space")
def test_a_rollout_with_no_finite_sample_plans_nothing(monkeypatch):
    monkeypatch.setenv(RANK_ENV, "0")
    worker, _ = ppo_worker(env="envs/Faulty-v0", env_kwargs={"nan_at": 1, "nan_for": 0})  # NaN from the first step on
    learner = learner_of(worker)
    assert learner.plan(worker.batch, np.random.default_rng(0)) == []
    assert learner.dropped_samples == 16


def hand_minibatch(worker, learner, index, normalize, clip_vf):
    """The minibatch's gradient by autograd through a float64 copy of the model at the worker's present weights, the
    loss written sample by sample (advantages normalised over the minibatch alone, with Bessel's correction, as SB3;
    with ``clip_vf``, the larger of the unclipped and clipped value errors), and its terms [total, policy, value,
    entropy, approx_kl, clip_fraction] and ratios."""
    cfg = worker.config
    clip, ent, vf = cfg.clip_range, cfg.ent_coef, cfg.vf_coef
    T, K = worker.rewards.shape
    model = model_copy(worker)
    params, values, _ = model(worker.obs[:T].reshape(T * K, -1).double()[index])
    adv = torch.tensor(learner.advantages[index])
    if normalize:
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    actions = worker.actions.reshape(-1)[index]
    old = torch.tensor(learner.log_probs[index])
    old_values = torch.tensor(learner.values[index])
    returns = torch.tensor(learner.returns[index])
    B = len(index)
    policy = value = entropy = torch.zeros((), dtype=torch.float64)
    ratios = []
    for i in range(B):
        log_p = torch.log_softmax(params[i], -1)
        ratio = torch.exp(log_p[actions[i]] - old[i])
        ratios.append(float(ratio.detach()))
        policy = policy - torch.minimum(ratio * adv[i], ratio.clamp(1 - clip, 1 + clip) * adv[i]) / B
        error = (values[i] - returns[i]) ** 2
        if clip_vf is not None:
            moved = old_values[i] + (values[i] - old_values[i]).clamp(-clip_vf, clip_vf)
            error = torch.maximum(error, (moved - returns[i]) ** 2)
        value = value + 0.5 * error / B
        entropy = entropy - (log_p.exp() * log_p).sum() / B
    loss = policy + vf * value - ent * entropy
    loss.backward()
    r = np.array(ratios)
    kl = float(np.mean([(x - 1) - math.log(x) for x in r]))
    clipped = float(np.mean([abs(x - 1) > clip for x in r]))
    terms = np.array([float(x.detach()) for x in (loss, policy, value, entropy)] + [kl, clipped])
    return torch.cat([p.grad.reshape(-1) for p in model.parameters()]).numpy(), terms, r


@pytest.mark.parametrize("clip_vf", [None, 3.5], ids=["value-unclipped", "value-clipped"])
@pytest.mark.parametrize("normalize", [False, True], ids=["raw-advantages", "normalised-per-minibatch"])
@pytest.mark.parametrize("path", ["mlp+closed-form", "reference"])
def test_a_minibatch_gradient_is_the_clipped_objectives_at_moved_weights(path, normalize, clip_vf, monkeypatch):
    monkeypatch.setenv(PATH_ENV, path)
    worker, _ = ppo_worker(normalize_advantage=normalize, clip_range_vf=clip_vf)
    learner = learner_of(worker)
    assert learner.name == path
    learner.plan(worker.batch, np.random.default_rng(0))
    index = np.array([3, 0, 9, 14, 7, 12])
    # the shared model moved since acting (other workers' pushes): the ratio is away from 1, and clipped on some
    worker.params.add_(0.5 * torch.randn(worker.params.shape, generator=torch.Generator().manual_seed(0)))
    terms = learner.gradient(worker.batch, Minibatch(index, None, True, 0))
    expected, expected_terms, ratios = hand_minibatch(worker, learner, index, normalize, clip_vf)
    assert (np.abs(ratios - 1) > 0.2).any() and (np.abs(ratios - 1) < 0.2).any()  # both sides of the clip in it
    np.testing.assert_allclose(worker.grads.numpy(), expected, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(terms[:6], expected_terms, rtol=1e-4, atol=1e-6)
    assert len(terms) == len(TERMS) and TERMS[4:6] == ("approx_kl", "clip_fraction")
    if normalize:  # over the minibatch alone: the whole rollout's statistics would give another gradient
        whole = learner.advantages
        assert not math.isclose(float(whole[index].mean()), float(whole.mean()), abs_tol=1e-3)
    if clip_vf is not None:  # the value clip binds on some samples of this minibatch, not on all
        T, K = worker.rewards.shape
        with torch.no_grad():
            now = model_copy(worker)(worker.obs[:T].reshape(T * K, -1).double()[index])[1].numpy()
        moved = np.abs(now - learner.values[index])
        assert (moved > clip_vf).any() and (moved < clip_vf).any()


def test_an_lstm_minibatch_of_whole_envs_unrolls_from_their_start_state():
    """The gradient of env 1's rollout alone, unrolled from its own start state with the resets where its episodes
    ended, is the gradient of the whole rollout's unroll with the loss over env 1's samples alone."""
    worker, _ = ppo_worker(lstm=4, minibatch_size=8)
    worker.step()  # a second rollout: its start state is not zeros
    worker.rollout()
    assert any(s.abs().sum() > 0 for s in worker.start_state)
    learner, T, K = learner_of(worker), worker.config.n_steps, worker.config.envs_per_worker
    plan = learner.plan(worker.batch, np.random.default_rng(0))
    env_1 = next(m for m in plan if m.envs.tolist() == [1])  # a minibatch of 8 // 8 = 1 env
    assert env_1.samples.tolist() == (np.arange(T) * K + 1).tolist()
    learner.gradient(worker.batch, env_1)
    model = build_model(worker_spec(worker), worker.config)[0]
    torch.nn.utils.vector_to_parameters(worker.params.clone(), model.parameters())
    dones = torch.maximum(worker.terminated, worker.truncated)
    params, values, _ = model.unroll(worker.obs, worker.start_state, dones)
    pick = torch.from_numpy(env_1.samples)

    def target(array):
        return torch.from_numpy(array[env_1.samples]).float()

    terms = clipped_surrogate_loss(
        worker.dist,
        params[pick],
        values[:T, 1],
        worker.actions[:, 1],
        target(learner.log_probs),
        target(learner.values),
        target(learner.advantages),
        target(learner.returns),
        0.2,
        None,
        0.01,
        0.5,
    )
    terms.total.backward()
    expected = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
    torch.testing.assert_close(worker.grads, expected, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("path", ["mlp+closed-form", "reference"])
def test_at_the_acting_weights_the_ratio_is_one_and_the_policy_term_is_minus_the_mean_advantage(path, monkeypatch):
    monkeypatch.setenv(PATH_ENV, path)
    worker, _ = ppo_worker()
    learner = learner_of(worker)
    learner.plan(worker.batch, np.random.default_rng(0))
    index = np.arange(16)
    terms = learner.gradient(worker.batch, Minibatch(index, None, True, 0))
    assert math.isclose(terms[1], -float(learner.advantages[index].mean()), rel_tol=1e-5, abs_tol=1e-6)
    assert abs(terms[4]) < 1e-9 and terms[5] == 0.0  # approx_kl 0, nothing clipped


# -- the diagnostics against their definitions --------------------------------------------------------------------
def test_approx_kl_and_clip_fraction_are_their_definitions():
    """approx_kl = mean((r - 1) - log r) (Schulman's estimator of KL(acting || now), never negative),
    clip_fraction = the share of samples with |r - 1| > c, one sample at a time."""
    rng = np.random.default_rng(0)
    behaviour = rng.normal(size=200) - 1.0
    now = behaviour + rng.normal(size=200) * 0.3
    kl, clipped = ratio_diagnostics(now, behaviour, 0.2)
    ratios = [math.exp(a - b) for a, b in zip(now, behaviour, strict=True)]
    assert math.isclose(kl, sum((r - 1) - math.log(r) for r in ratios) / 200, rel_tol=1e-12)
    assert clipped == sum(abs(r - 1) > 0.2 for r in ratios) / 200
    assert 0.0 < clipped < 1.0 and kl > 0.0
    assert ratio_diagnostics(behaviour, behaviour, 0.2) == (0.0, 0.0)  # the acting policy: ratio 1


def test_explained_variance_is_its_definition():
    rng = np.random.default_rng(0)
    targets = rng.normal(size=50)
    predicted = targets + rng.normal(size=50) * 0.5
    expected = 1.0 - np.var(targets - predicted) / np.var(targets)
    assert math.isclose(explained_variance(predicted, targets), expected, rel_tol=1e-12)
    assert explained_variance(targets, targets) == 1.0  # perfect
    assert math.isclose(explained_variance(np.full(50, targets.mean()), targets), 0.0, abs_tol=1e-12)  # the mean
    assert explained_variance(predicted, -targets) < 0.0  # worse than the mean
    assert math.isnan(explained_variance(predicted, np.ones(50)))  # targets that do not vary


def test_the_minibatch_terms_carry_the_rollout_s_explained_variance():
    worker, _ = ppo_worker()
    learner = learner_of(worker)
    plan = learner.plan(worker.batch, np.random.default_rng(0))
    terms = learner.gradient(worker.batch, plan[0])
    expected = 1.0 - np.var(learner.returns - learner.values) / np.var(learner.returns)
    assert TERMS[6] == "explained_variance" and math.isclose(terms[6], expected, rel_tol=1e-9)


# -- --targets vtrace ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", ["mlp+closed-form", "reference"])
def test_vtrace_targets_are_on_policy_at_first_and_follow_the_pulled_weights_each_epoch(path, monkeypatch):
    """With V-trace the plan's targets (the acting weights: every log-ratio 0) are GAE's returns; each later epoch's
    first minibatch recomputes them with the weights it pulled: V-trace with those weights' values and their
    log-ratios to the acting policy (held to the loop version on a float64 copy of the model)."""
    monkeypatch.setenv(PATH_ENV, path)
    worker, _ = ppo_worker(n_epochs=2)
    learner = learner_of(worker)
    monkeypatch.setattr(learner, "estimator_name", "vtrace")
    monkeypatch.setattr(learner, "estimator", ESTIMATORS["vtrace"])
    plan = learner.plan(worker.batch, np.random.default_rng(0))
    T, K = worker.rewards.shape
    cfg = worker.config

    def values_of(model):
        with torch.no_grad():
            values = model(worker.obs.reshape((T + 1) * K, -1).double())[1].reshape(T + 1, K).numpy()
            final = model(worker.final_obs.reshape(T * K, -1).double())[1].reshape(T, K).numpy()
        return values, final

    values, final = values_of(model_copy(worker))
    expected = hand_gae(worker, values, final, cfg.gamma, cfg.gae_lambda)
    np.testing.assert_allclose(learner.returns.reshape(T, K), expected + values[:T], rtol=1e-5, atol=1e-5)
    worker.params.add_(0.3 * torch.randn(worker.params.shape, generator=torch.Generator().manual_seed(0)))
    learner.gradient(worker.batch, next(m for m in plan if m.epoch == 0))  # the same epoch: the targets stay
    np.testing.assert_allclose(learner.returns.reshape(T, K), expected + values[:T], rtol=1e-5, atol=1e-5)
    learner.gradient(worker.batch, next(m for m in plan if m.epoch == 1))
    model = model_copy(worker)
    values, final = values_of(model)
    with torch.no_grad():
        params = model(worker.obs[:T].reshape(T * K, -1).double())[0]
    now = torch.log_softmax(params, -1).gather(-1, worker.actions.reshape(-1, 1).long()).squeeze(-1).numpy()
    log_rhos = (now - learner.log_probs).reshape(T, K)
    assert np.abs(log_rhos).max() > 0.05  # the weights moved: off-policy
    terminated = worker.terminated.double().numpy()
    truncated = worker.truncated.double().numpy()
    advantages, targets = vtrace_loop(
        worker.rewards.double().numpy(),
        values[:T],
        next_values(values, final, truncated),
        terminated,
        np.maximum(terminated, truncated),
        cfg.gamma,
        cfg.gae_lambda,
        log_rhos,
    )
    np.testing.assert_allclose(learner.returns.reshape(T, K), targets, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(learner.advantages.reshape(T, K), advantages, rtol=1e-4, atol=1e-5)
