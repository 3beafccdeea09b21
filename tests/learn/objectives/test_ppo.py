"""--algo ppo's objective: the clipped surrogate (a3c.learn.losses.clipped_surrogate_loss) against a slow hand
computation, sample by sample in float64 (ratio clipping on both sides, value clipping, the entropy), and the
worker's update (a3c.learn.objectives.ppo.ClippedSurrogate): the behaviour log-probabilities from the params acting
returned,
GAE lambda with the bootstrap at truncation, the minibatches, a minibatch's gradient with advantages normalised over
that minibatch alone, and an LSTM's minibatches of whole envs."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from worker_rig import make_worker, worker_spec

from a3c.learn.distributions import Categorical
from a3c.learn.losses import clipped_surrogate_loss
from a3c.learn.model import build_model

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


def ppo_worker(**settings):
    base = dict(algo="ppo", n_steps=8, envs_per_worker=2, minibatch_size=4, n_epochs=2, gae_lambda=0.9, gamma=0.95)
    worker, store = make_worker(**{**base, **settings})
    worker.rollout()
    return worker, store


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
    worker, _ = ppo_worker()
    assert worker.truncated.any() and worker.terminated.any()  # the scripted envs end episodes both ways
    ppo, T = worker.ppo, worker.config.n_steps
    targets = ppo.targets(worker.batch, worker.behaviour)
    model = model_copy(worker)
    with torch.no_grad():
        K = worker.config.envs_per_worker
        values = model(worker.obs.reshape((T + 1) * K, -1).double())[1].reshape(T + 1, K).numpy()
        final = model(worker.final_obs.reshape(T * K, -1).double())[1].reshape(T, K).numpy()
        params = model(worker.obs[:T].reshape(T * K, -1).double())[0].reshape(T, K, -1)
    expected = hand_gae(worker, values, final, 0.95, 0.9)
    np.testing.assert_allclose(targets.advantages.numpy(), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(targets.returns.numpy(), expected + values[:T], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(targets.values.numpy(), values[:T], rtol=1e-5, atol=1e-5)
    log_softmax = torch.log_softmax(params, -1)
    acted = log_softmax.gather(-1, worker.actions.long().unsqueeze(-1)).squeeze(-1).numpy()
    np.testing.assert_allclose(targets.log_probs.numpy(), acted, rtol=1e-5, atol=1e-5)
    # the log-probabilities are the acting policy's as acting recorded it, not a pass of the model now
    worker.behaviour[:] = [p + 1.0 * (torch.arange(p.shape[-1]) == 0) for p in worker.behaviour]
    shifted = ppo.targets(worker.batch, worker.behaviour).log_probs
    assert not torch.allclose(shifted, targets.log_probs)


@pytest.mark.parametrize("lstm", [0, 4], ids=["samples", "lstm-envs"])
def test_each_epoch_takes_every_sample_once(lstm):
    worker, _ = ppo_worker(lstm=lstm, envs_per_worker=4, minibatch_size=16 if lstm else 5)
    batches = worker.ppo.minibatches(worker.batch, np.random.default_rng(0))
    if lstm:  # whole envs, 16 // 8 steps = 2 a minibatch
        assert [len(b) for b in batches] == [2, 2] and sorted(np.concatenate(batches)) == [0, 1, 2, 3]
    else:  # 32 samples in minibatches of 5, the last one short
        assert [len(b) for b in batches] == [5, 5, 5, 5, 5, 5, 2]
        assert sorted(np.concatenate(batches)) == list(range(32))
    again = worker.ppo.minibatches(worker.batch, np.random.default_rng(1))
    assert any(not np.array_equal(a, b) for a, b in zip(batches, again, strict=True))  # shuffled each epoch


def hand_minibatch_gradient(worker, targets, index, model, normalize):
    """The minibatch's gradient by autograd through a float64 copy of the model, the loss written sample by sample,
    its advantages normalised over the minibatch alone (Bessel's correction, as SB3)."""
    T, K = worker.rewards.shape
    obs = worker.obs[:T].reshape(T * K, -1).double()[index]
    params, values, _ = model(obs)
    adv = targets.advantages.reshape(-1).double()[index]
    if normalize:
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    actions = worker.actions.reshape(-1)[index]
    old = targets.log_probs.reshape(-1).double()[index]
    returns = targets.returns.reshape(-1).double()[index]
    B, loss = len(index), 0.0
    for i in range(B):
        log_p = torch.log_softmax(params[i], -1)
        ratio = torch.exp(log_p[actions[i]] - old[i])
        loss = loss - torch.minimum(ratio * adv[i], ratio.clamp(1 - 0.2, 1 + 0.2) * adv[i]) / B
        loss = loss + 0.5 * 0.5 * (values[i] - returns[i]) ** 2 / B
        loss = loss - 0.01 * -(log_p.exp() * log_p).sum() / B
    loss.backward()
    return torch.cat([p.grad.reshape(-1) for p in model.parameters()]).numpy()


@pytest.mark.parametrize("normalize", [False, True], ids=["raw-advantages", "normalised-per-minibatch"])
def test_a_minibatch_gradient_is_the_clipped_objectives_at_the_current_weights(normalize):
    worker, store = ppo_worker(normalize_advantage=normalize)
    ppo = worker.ppo
    targets = ppo.targets(worker.batch, worker.behaviour)
    index = np.array([3, 0, 9, 14])
    # the shared model moved since acting (other workers' pushes): the ratio is away from 1 on some samples
    worker.params.add_(0.3 * torch.randn(worker.params.shape, generator=torch.Generator().manual_seed(0)))
    ppo.gradient(worker.batch, targets, index)
    expected = hand_minibatch_gradient(worker, targets, index, model_copy(worker), normalize)
    np.testing.assert_allclose(worker.grads.numpy(), expected, rtol=1e-4, atol=1e-6)
    if normalize:  # over the minibatch alone: the whole rollout's statistics would give another gradient
        whole = targets.advantages.reshape(-1)
        assert not math.isclose(float(whole[index].mean()), float(whole.mean()), abs_tol=1e-3)


def test_an_lstm_minibatch_of_whole_envs_unrolls_from_their_start_state():
    """The gradient of env 1's rollout alone, unrolled from its own start state with the resets where its episodes
    ended, is the gradient of the whole rollout's unroll with the loss over env 1's samples alone."""
    worker, _ = ppo_worker(lstm=4, minibatch_size=8)
    worker.step()  # a second rollout: its start state is not zeros
    worker.rollout()
    assert any(s.abs().sum() > 0 for s in worker.start_state)
    ppo, T = worker.ppo, worker.config.n_steps
    targets = ppo.targets(worker.batch, worker.behaviour)
    ppo.gradient(worker.batch, targets, np.array([1]))
    model = build_model(worker_spec(worker), worker.config)[0]
    torch.nn.utils.vector_to_parameters(worker.params.clone(), model.parameters())
    dones = torch.maximum(worker.terminated, worker.truncated)
    params, values, _ = model.unroll(worker.obs, worker.start_state, dones)
    pick = torch.arange(T) * 2 + 1  # env 1's samples of [T * K], t-major
    terms = clipped_surrogate_loss(
        worker.dist,
        params[pick],
        values[:T, 1],
        worker.actions[:, 1],
        targets.log_probs[:, 1],
        targets.values[:, 1],
        targets.advantages[:, 1],
        targets.returns[:, 1],
        0.2,
        None,
        0.01,
        0.5,
    )
    terms.total.backward()
    expected = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
    torch.testing.assert_close(worker.grads, expected, rtol=1e-4, atol=1e-6)


def test_at_the_acting_weights_the_ratio_is_one_and_the_policy_term_is_minus_the_mean_advantage():
    worker, _ = ppo_worker()
    targets = worker.ppo.targets(worker.batch, worker.behaviour)
    index = np.arange(16)
    terms = worker.ppo.gradient(worker.batch, targets, index)
    assert math.isclose(terms[1], -float(targets.advantages.reshape(-1)[index].mean()), rel_tol=1e-5, abs_tol=1e-6)
