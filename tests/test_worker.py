"""The worker loop, run in this process (no other processes): what a rollout records, where episodes end by
termination and by truncation, what reaches the board, that an update moves the shared parameters, and that the
gradient it pushes is the A3C gradient (against a slow reference written like the maths)."""

from __future__ import annotations

import time

import gymnasium as gym
import numpy as np
import pytest
import torch

from a3c.backends.shared_memory import SharedMemoryCoordinator, SharedRun
from a3c.board import FIELD, BoardReader, EpisodeBoard
from a3c.config import Config
from a3c.environment import describe_env
from a3c.model import build_model, flatten_parameters
from a3c.optim import make_optimizer
from a3c.running_stats import SharedMoments
from a3c.seeding import WorkerSeeds
from a3c.worker import Worker

ENV_ID = "ScriptedForWorkerTest-v0"


class ScriptedEnv(gym.Env):
    """obs = [step within the episode, episode number]; reward 1 per step. Even episodes terminate after 3 steps,
    odd ones run into the time limit (4 steps, registered below) and are truncated."""

    observation_space = gym.spaces.Box(0.0, 100.0, shape=(2,), dtype=np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self) -> None:
        self.episode, self.t = -1, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.episode, self.t = self.episode + 1, 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        terminated = self.episode % 2 == 0 and self.t == 3
        return self._obs(), 1.0, terminated, False, {}

    def _obs(self):
        return np.array([self.t, self.episode], dtype=np.float32)


gym.register(ENV_ID, entry_point=ScriptedEnv, max_episode_steps=4)


def make_worker(envs_per_worker=2, n_steps=8, env=ENV_ID, seed=1, **settings):
    cfg = Config(env=env, workers=1, envs_per_worker=envs_per_worker, n_steps=n_steps, total_steps=10**6, seed=seed)
    for key, value in settings.items():
        setattr(cfg, key, value)
    spec = describe_env(cfg.env, cfg.env_kwargs)
    params, _ = flatten_parameters(build_model(spec, cfg)[0], shared=True)
    optimizer = make_optimizer(cfg.optimizer, params, cfg.lr, slots=1)
    stats = {
        "obs_stats": SharedMoments(spec.obs_shape, 1) if cfg.normalize_obs else None,
        "reward_stats": SharedMoments((), 1) if cfg.normalize_reward else None,
    }
    coordinator = SharedMemoryCoordinator(SharedRun(params, optimizer, EpisodeBoard(1), cfg.total_steps, **stats))
    worker = Worker(0, coordinator.channel(0), cfg, spec, time.time(), WorkerSeeds(cfg.seed, 0, 0, 0))
    return worker, coordinator


def test_rollout_records_termination_truncation_and_final_observation():
    worker, store = make_worker()
    worker.rollout()
    worker.publish()
    for k in range(2):  # both envs follow the same script
        # episode 0: steps t=0,1,2, terminated at t=2; episode 1: t=3..6, truncated at t=6 (time limit 4)
        assert worker.terminated[:, k].tolist() == [0, 0, 1, 0, 0, 0, 0, 0]
        assert worker.truncated[:, k].tolist() == [0, 0, 0, 0, 0, 0, 1, 0]
        # the final observation of the truncated episode is kept (for the bootstrap), not the reset one
        assert worker.final_obs[6, k].tolist() == [4.0, 1.0]
        # the observation after a step that ended an episode is the next episode's first
        assert worker.obs[3, k].tolist() == [0.0, 1.0]
        assert worker.obs[7, k].tolist() == [0.0, 2.0]
        assert worker.obs[8, k].tolist() == [1.0, 2.0]  # the boundary observation, after the last step
    assert worker.rewards.eq(1.0).all()
    assert store.board.global_step() == 16
    episodes = BoardReader(store.board).drain()
    assert [(e.index, e["return"], e["length"]) for e in episodes] == [
        (0, 3.0, 3),
        (1, 3.0, 3),
        (2, 4.0, 4),
        (3, 4.0, 4),
    ]
    assert all(np.isnan(e["loss"]) for e in episodes)  # no update yet: no loss to report
    assert [e["global_step"] for e in episodes] == [6, 6, 14, 14]


def test_update_moves_the_shared_parameters_and_records_losses():
    worker, store = make_worker()
    before = store.params.clone()
    worker.step()  # pull, rollout, update, publish
    assert store.optimizer.step_count() == 1
    assert not torch.equal(store.params, before)
    assert np.isfinite(worker.last_loss).all()
    worker.rollout()  # the episode that ends now was partly trained on: its row carries the update's losses
    worker.publish()
    rows = BoardReader(store.board).drain()
    assert np.isfinite(rows[-1].values[FIELD["loss"]])


def test_rollouts_continue_across_the_boundary():
    worker, _ = make_worker(envs_per_worker=1, n_steps=2)
    worker.rollout()
    assert worker.obs[0, 0].tolist() == [0.0, 0.0]  # the reset observation
    assert worker.obs[2, 0].tolist() == [2.0, 0.0]
    worker.rollout()  # starts from where the last one stopped: t=2 terminates episode 0
    assert worker.obs[0, 0].tolist() == [2.0, 0.0]
    assert worker.terminated[:, 0].tolist() == [1, 0]
    assert worker.obs[2, 0].tolist() == [1.0, 1.0]


def test_first_rollout_starts_from_the_reset_observations():
    """Bug (f374bab): the reset observations went to obs[0], then the first rollout copied obs[T] (zeros) over them,
    so every worker incarnation's first rollout acted and trained on all-zero observations."""
    worker, _ = make_worker(env="CartPole-v1", envs_per_worker=3, n_steps=4)
    envs = [gym.make("CartPole-v1") for _ in range(3)]
    expected = [env.reset(seed=worker_seeds().env(k))[0] for k, env in enumerate(envs)]
    worker.rollout()
    np.testing.assert_array_equal(worker.obs[0].numpy(), np.stack(expected))
    assert worker.obs[0].abs().sum() > 0


def worker_seeds(seed=1):
    return WorkerSeeds(seed, 0, 0, 0)


def test_action_sampler_is_independent_of_the_env_streams():
    """Bug (f374bab): the sampler and env 0 were both seeded with seed + rank, so they drew the same numbers: the
    first action was "right" exactly when the cart started right of centre. Independent streams agree ~50%."""
    agree = 0
    n = 400
    for seed in range(n):
        seeds = WorkerSeeds(seed, 0, 0, 0)
        env = gym.make("CartPole-v1")
        x = env.reset(seed=seeds.env(0))[0][0]
        u = seeds.rng.random()  # what the sampler draws first (a near-uniform policy: right when u >= 0.5)
        agree += (u >= 0.5) == (x > 0)
    assert 0.4 < agree / n < 0.6


# -- the pushed gradient against a slow reference ---------------------------------------------------------------
class RecordingChannel:
    """A WorkerChannel that keeps what is pushed instead of applying it."""

    rank = 0

    def __init__(self, inner):
        self.inner, self.pushed = inner, []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def push(self, grad, pulled_at):
        self.pushed.append(grad.clone())
        return 0


def slow_reference_gradient(worker, gamma, lam, ent_coef, vf_coef):
    """The A3C gradient of the worker's last rollout, computed the slow way: per env and step GAE written like the
    maths (terminated: no bootstrap; truncated: V(final observation); rollout end: V(boundary observation)), the
    loss with torch.distributions.Categorical, and autograd through a fresh copy of the model."""
    model = build_model(worker_spec(worker), worker.config)[0].double()
    torch.nn.utils.vector_to_parameters(worker.params.double(), model.parameters())
    T, K = worker.terminated.shape
    logits, values, _ = model(worker.obs.double().view((T + 1) * K, -1))
    values = values.view(T + 1, K)
    with torch.no_grad():
        v = values.detach()
        final_v = model(worker.final_obs.double().view(T * K, -1))[1].view(T, K)
    advantages = torch.zeros(T, K, dtype=torch.float64)
    for k in range(K):
        running = 0.0
        for t in reversed(range(T)):
            term, trunc = bool(worker.terminated[t, k]), bool(worker.truncated[t, k])
            if term:
                v_next = 0.0
            elif trunc:
                v_next = float(final_v[t, k])
            else:
                v_next = float(v[t + 1, k])  # inside the rollout, or the boundary observation at t = T - 1
            delta = float(worker.rewards[t, k]) + gamma * v_next - float(v[t, k])
            goes_on = not (term or trunc) and t < T - 1
            running = delta + (gamma * lam * running if goes_on else 0.0)
            advantages[t, k] = running
    returns = advantages + v[:T]
    dist = torch.distributions.Categorical(logits=logits.view(T + 1, K, -1)[:T])
    policy = -(dist.log_prob(worker.actions) * advantages).mean()
    value = 0.5 * ((returns - values[:T]) ** 2).mean()
    loss = policy + vf_coef * value - ent_coef * dist.entropy().mean()
    loss.backward()
    return torch.cat([p.grad.reshape(-1) for p in model.parameters()])


def worker_spec(worker):
    return describe_env(worker.config.env, worker.config.env_kwargs)


@pytest.mark.parametrize("shared_torso", [False, True])
@pytest.mark.parametrize("gae_lambda", [1.0, 0.9])
def test_pushed_gradient_matches_a_slow_reference(shared_torso, gae_lambda):
    worker, coordinator = make_worker(
        envs_per_worker=3, n_steps=9, gae_lambda=gae_lambda, max_grad_norm=1e9, shared_torso=shared_torso
    )
    worker.channel = RecordingChannel(worker.channel)
    worker.step()
    worker.step()  # the second rollout starts mid-episode, from the first's boundary observation
    assert worker.terminated.sum() > 0 and worker.truncated.sum() > 0  # both kinds of episode end are in it
    cfg = worker.config
    expected = slow_reference_gradient(worker, cfg.gamma, gae_lambda, cfg.ent_coef, cfg.vf_coef)
    torch.testing.assert_close(worker.channel.pushed[-1].double(), expected, rtol=2e-4, atol=1e-6)


def test_normalised_observations_and_scaled_rewards_reach_the_loss_while_returns_stay_raw():
    worker, coordinator = make_worker(
        env="CartPole-v1", envs_per_worker=4, n_steps=16, normalize_obs=True, normalize_reward=True
    )
    worker.step()
    worker.step()
    obs = worker.obs[1:].reshape(-1, 4).numpy()
    assert np.abs(obs.mean(0)).max() < 1.0 and 0.2 < obs.std(0).min() < 3.0  # ~ zero mean, unit variance
    assert not np.allclose(worker.rewards.numpy(), 1.0)  # CartPole's reward 1, divided by the return's std
    assert coordinator.run.obs_stats.merged().count == 4 * (1 + 2 * 16)  # resets + every step, counted once
    rows = BoardReader(coordinator.board).drain()
    assert all(r["return"] == r["length"] for r in rows)  # episode returns in CartPole's own units
    snapshot = coordinator.snapshot()
    assert set(snapshot["obs_stats"]) >= {"count", "mean"} and "reward_stats" in snapshot
