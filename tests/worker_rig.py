"""What the worker tests and the update paths' conformance test share: scripted envs whose episodes end by
termination and by truncation at known steps (with Discrete, Box, MultiDiscrete actions and vector or image
observations), a worker run in this process, a channel that records what is pushed, and the slow reference: the A3C
gradient of a worker's last rollout written like the maths, in float64."""

from __future__ import annotations

import dataclasses
import time

import gymnasium as gym
import numpy as np
import torch

from a3c.learn.distributions import DiagGaussian, GSDEGaussian, MultiCategorical
from a3c.learn.model import build_model, flatten_parameters
from a3c.learn.optim import make_optimizer
from a3c.learn.running_stats import SharedMoments
from a3c.run.backends.shared_memory import SharedMemoryCoordinator, SharedRun
from a3c.run.board import EpisodeBoard
from a3c.run.worker import Worker
from a3c.spec.config import Config
from a3c.spec.environment import describe_env
from a3c.spec.seeding import WorkerSeeds

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


class ScriptedBoxEnv(ScriptedEnv):
    """The same script with Box actions (ignored)."""

    action_space = gym.spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32)


BOX_ENV_ID = "ScriptedBoxForWorkerTest-v0"
gym.register(BOX_ENV_ID, entry_point=ScriptedBoxEnv, max_episode_steps=4)


class ScriptedMultiEnv(ScriptedEnv):
    """The same script with MultiDiscrete actions (ignored)."""

    action_space = gym.spaces.MultiDiscrete([2, 3])


MULTI_ENV_ID = "ScriptedMultiForWorkerTest-v0"
gym.register(MULTI_ENV_ID, entry_point=ScriptedMultiEnv, max_episode_steps=4)


class ScriptedImageEnv(ScriptedEnv):
    """The same script seen as a small uint8 image, [10, 10, 2] (channels last): a fixed pattern, shifted by the step
    and the episode number."""

    observation_space = gym.spaces.Box(0, 255, shape=(10, 10, 2), dtype=np.uint8)
    PATTERN = np.random.default_rng(0).integers(0, 200, size=(10, 10, 2))

    def _obs(self):
        return ((self.PATTERN + 11 * self.t + 5 * self.episode) % 256).astype(np.uint8)


IMAGE_ENV_ID = "ScriptedImageForWorkerTest-v0"
gym.register(IMAGE_ENV_ID, entry_point=ScriptedImageEnv, max_episode_steps=4)


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


class RecordingChannel:
    """A WorkerChannel that keeps what is pushed instead of applying it."""

    rank = 0

    def __init__(self, inner):
        self.inner, self.pushed = inner, []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def push(self, grad, pulled_at, lr):
        self.pushed.append(grad.clone())
        return 0


def slow_reference_gradient(worker, gamma, lam, ent_coef, vf_coef, normalize_advantage=False):
    """The A3C gradient of the worker's last rollout, computed the slow way: the model stepped one observation at a
    time from the state stored at the rollout's start (reset where an episode ended), per env and step GAE written
    like the maths (terminated: no bootstrap; truncated: V(final observation, from the episode's state); rollout
    end: V(boundary observation)), the loss with torch.distributions, and autograd through a fresh copy of the
    model."""
    # float64, and without --bf16 (autocast computes in bfloat16 only from float32): the exact answer
    model = build_model(worker_spec(worker), dataclasses.replace(worker.config, bf16=False))[0].double()
    torch.nn.utils.vector_to_parameters(worker.params.double(), model.parameters())
    T, K = worker.terminated.shape
    state = tuple(s.double() for s in worker.start_state)
    outputs, values, final_v = [], [], torch.zeros(T, K, dtype=torch.float64)
    for t in range(T + 1):
        p, v, state = model(worker.obs[t].double(), state)
        outputs.append(p)
        values.append(v)
        if t == T:
            break
        with torch.no_grad():
            final_v[t] = model(worker.final_obs[t].double(), tuple(s.detach() for s in state))[1]
        ended = torch.maximum(worker.terminated[t], worker.truncated[t]).double()
        state = tuple(s * (1 - ended).unsqueeze(-1) for s in state)
    values = torch.stack(values)
    v = values.detach()
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
    if normalize_advantage:  # the policy term's advantages only, as SB3's normalize_advantage
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    log_prob, entropy = torch_log_prob_entropy(worker.dist, torch.stack(outputs[:T]), worker.actions)
    policy = -(log_prob * advantages).mean()
    value = 0.5 * ((returns - values[:T]) ** 2).mean()
    loss = policy + vf_coef * value - ent_coef * entropy.mean()
    loss.backward()
    return torch.cat([p.grad.reshape(-1) for p in model.parameters()])


def torch_log_prob_entropy(dist, params, actions):
    """log pi(a) and H from torch.distributions, for the worker's distribution family (params [T, K, P]); gSDE's
    (a std that depends on the features, through this rollout's noise matrix) from the distribution itself."""
    if isinstance(dist, GSDEGaussian):
        log_prob, entropy = dist.log_prob_entropy(params.flatten(0, 1), actions.flatten(0, 1).double())
        return log_prob.view(actions.shape[:2]), entropy.view(actions.shape[:2])
    if isinstance(dist, DiagGaussian):
        mean, log_std = params.split(dist.dim, -1)
        normal = torch.distributions.Independent(torch.distributions.Normal(mean, log_std.exp()), 1)
        return normal.log_prob(actions.double().flatten(2)), normal.entropy()
    if isinstance(dist, MultiCategorical):
        parts = [torch.distributions.Categorical(logits=p) for p in params.split(dist.sizes, -1)]
        flat = actions.flatten(2)
        return sum(c.log_prob(flat[..., j]) for j, c in enumerate(parts)), sum(c.entropy() for c in parts)
    categorical = torch.distributions.Categorical(logits=params)
    return categorical.log_prob(actions), categorical.entropy()


def worker_spec(worker):
    return describe_env(worker.config.env, worker.config.env_kwargs)
