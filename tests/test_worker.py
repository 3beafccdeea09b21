"""The worker loop, run in this process (no other processes): what a rollout records, where episodes end by
termination and by truncation, what reaches the board, and that an update moves the shared parameters."""

from __future__ import annotations

import time

import gymnasium as gym
import numpy as np
import torch

from a3c.backends.shared_memory import SharedMemoryStore
from a3c.board import FIELD, BoardReader, EpisodeBoard
from a3c.config import Config
from a3c.environment import describe_env
from a3c.model import ActorCritic, flatten_parameters
from a3c.optim import make_optimizer
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


def make_worker(envs_per_worker=2, n_steps=8):
    cfg = Config(env=ENV_ID, workers=1, envs_per_worker=envs_per_worker, n_steps=n_steps, total_steps=10**6)
    spec = describe_env(cfg.env, cfg.env_kwargs)
    params, _ = flatten_parameters(ActorCritic(spec.obs_dim, spec.n_actions, cfg.hidden_sizes), shared=True)
    optimizer = make_optimizer(cfg.optimizer, params, cfg.lr, slots=1)
    store = SharedMemoryStore(params, optimizer, EpisodeBoard(1), cfg.total_steps)
    return Worker(0, store, cfg, spec, time.time()), store


def test_rollout_records_termination_truncation_and_final_observation():
    worker, store = make_worker()
    worker.rollout()
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
    pulled_at = store.pull(worker.params)
    worker.rollout()
    worker.update(pulled_at)
    assert store.optimizer.step_count() == 1
    assert not torch.equal(store.params, before)
    assert np.isfinite(worker.last_loss).all()
    worker.rollout()  # the episode that ends now was partly trained on: its row carries the update's losses
    rows = BoardReader(store.board).drain()
    assert np.isfinite(rows[-1].values[FIELD["loss"]])


def test_rollouts_continue_across_the_boundary():
    worker, _ = make_worker(envs_per_worker=1, n_steps=2)
    worker.rollout()
    assert worker.obs[2, 0].tolist() == [2.0, 0.0]
    worker.rollout()  # starts from where the last one stopped: t=2 terminates episode 0
    assert worker.obs[0, 0].tolist() == [2.0, 0.0]
    assert worker.terminated[:, 0].tolist() == [1, 0]
    assert worker.obs[2, 0].tolist() == [1.0, 1.0]
