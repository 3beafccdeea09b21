"""One worker process: owns K environments and a private copy of the model, and loops
    pull global weights -> roll out n_steps in K envs -> loss (a3c.losses) -> backward -> clip -> push the gradient
    (shared optimizer step) -> publish finished episodes on the board
until the store says stop. Nothing in the per-step path locks or talks to another process.
"""

from __future__ import annotations

import dataclasses
import gc
import math
import multiprocessing
import os
import signal
import sys
import threading
import time
import traceback
from multiprocessing.connection import Connection

import numpy as np
import torch

from a3c.backends import ParameterStore
from a3c.board import FIELD, FIELDS, Stat
from a3c.config import Config
from a3c.environment import EnvSpec, make_env
from a3c.losses import actor_critic_loss_grads, gae_advantages, next_state_values
from a3c.model import ActorCritic, flatten_parameters, sample_actions

RANK_ENV = "A3C_WORKER_RANK"  # set first thing in every worker: envs may read their rank from it (envs/faulty.py)
START_POLL_S = 0.002  # how often a worker at the start line looks whether all the others are there
MAX_TRACEBACK_CHARS = 16_000  # < a pipe's buffer: the send never blocks, even if the main process reads late


def worker_main(
    rank: int,
    store: ParameterStore,
    config: Config,
    spec: EnvSpec,
    run_start: float,
    incarnation: int = 0,
    errors: Connection | None = None,
) -> None:
    """Process entry point. ``incarnation`` counts earlier processes of this rank (restarts, resumed runs): each
    incarnation gets its own seeds, so a restarted worker does not replay its predecessor's episodes. An exception
    is sent, as traceback text, on ``errors`` (this rank's pipe to the supervisor), and the process exits with 1."""
    # Everything inherited from the parent (fork) or the fork server goes into a generation the garbage collector
    # never scans: a full collection writes to the header of every object it visits, which would copy nearly the
    # whole inherited heap into this process (copy-on-write pages touched by a read-only workload). O(1): it links
    # the generation lists, touching no object.
    gc.freeze()
    os.environ[RANK_ENV] = str(rank)
    torch.set_num_threads(1)  # N workers x M intra-op threads on few cores would thrash; one thread each
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: the main process decides
    _exit_with_parent()
    try:
        if incarnation:
            # env seeds are seed + rank + k * workers, k < envs_per_worker: shift past every earlier incarnation's
            config = dataclasses.replace(
                config, seed=config.seed + incarnation * config.workers * config.envs_per_worker
            )
        seed = config.seed + rank
        torch.manual_seed(seed)
        np.random.seed(seed)
        Worker(rank, store, config, spec, run_start).run()
    except Exception:
        if errors is not None:
            errors.send(traceback.format_exc()[-MAX_TRACEBACK_CHARS:])
            errors.close()
        else:
            traceback.print_exc()
        sys.exit(1)  # multiprocessing turns this into exitcode 1 without printing anything more


def _exit_with_parent(poll_s: float = 0.5) -> None:
    """Exit if the main process goes away (e.g. it was SIGKILLed): a daemon thread polls getppid, which changes when
    we are re-parented (fork, spawn), and multiprocessing's parent sentinel, a pipe from the process that started us
    that reads EOF once it is gone. The sentinel is what covers forkserver: there our parent is the fork server,
    which does not exit while we live (every child it forks holds its "alive" pipe open), so getppid never changes."""
    parent = os.getppid()
    starter = multiprocessing.parent_process()  # the main process, under every start method

    def watch() -> None:
        while True:
            time.sleep(poll_s)
            if os.getppid() != parent or (starter is not None and not starter.is_alive()):
                os._exit(1)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


class Worker:
    def __init__(self, rank: int, store: ParameterStore, config: Config, spec: EnvSpec, run_start: float) -> None:
        self.rank, self.store, self.config, self.run_start = rank, store, config, run_start
        self.board = store.board
        self.rng = np.random.default_rng(config.seed + rank)
        T, K, D = config.n_steps, config.envs_per_worker, spec.obs_dim
        self.envs = [make_env(config.env, config.env_kwargs) for _ in range(K)]
        self.model = ActorCritic(D, spec.n_actions, config.hidden_sizes)
        self.params, self.grads = flatten_parameters(self.model)
        # Preallocated rollout buffers, indexed [step, env]. obs[T] is the observation after the last step: the
        # rollout-boundary bootstrap, and obs[0] of the next rollout.
        self.obs = torch.zeros(T + 1, K, D)
        self.final_obs = torch.zeros(T, K, D)  # the observation returned with truncated=True, where that happened
        self.actions = torch.zeros(T, K, dtype=torch.int64)
        self.rewards = torch.zeros(T, K)
        self.terminated = torch.zeros(T, K)
        self.truncated = torch.zeros(T, K)
        # per-env running episode statistics
        self.ep_return = np.zeros(K)
        self.ep_length = np.zeros(K, dtype=np.int64)
        self.ep_loss_sum = np.zeros((K, 4))  # loss, policy, value, entropy summed over updates during the episode
        self.ep_updates = np.zeros(K, dtype=np.int64)
        self.last_loss = np.full(4, np.nan)
        self.stats = self.board.stats.numpy()[rank]
        self.lag_interval = -1
        obs_np = self.obs.numpy()
        for k, env in enumerate(self.envs):
            env_seed = config.seed + rank + k * config.workers  # env 0 of rank r: seed + r; unique across the run
            env.action_space.seed(env_seed)
            obs_np[0, k] = np.asarray(env.reset(seed=env_seed)[0], dtype=np.float32).reshape(-1)

    def run(self) -> None:
        try:
            self.wait_at_start_line()
            while not self.store.should_stop():
                self.stats[Stat.HEARTBEAT] = time.time()
                pulled_at = self.store.pull(self.params)
                self.rollout()
                self.update(pulled_at)
        finally:
            for env in self.envs:
                env.close()

    def wait_at_start_line(self) -> None:
        """Mark this worker ready (envs made and reset, model built), then wait until every worker is, so that all
        take their first step together. Without this the first workers step alone while the last are still starting
        (about a second for 16 workers under forkserver), and that ramp falls inside summary.json's steps_per_s
        window. A restarted worker finds the flags already up and passes at once; the heartbeat keeps the
        supervisor's hang check quiet while waiting; a stop (a failed worker, Ctrl-C) ends the wait."""
        ready = self.board.stats.numpy()[:, Stat.READY]
        self.stats[Stat.READY] = 1.0
        while not ready.all() and not self.store.should_stop():
            self.stats[Stat.HEARTBEAT] = time.time()
            time.sleep(START_POLL_S)

    def rollout(self) -> None:
        T, K = self.config.n_steps, self.config.envs_per_worker
        obs_np, final_np = self.obs.numpy(), self.final_obs.numpy()
        rewards, terminated, truncated = self.rewards.numpy(), self.terminated.numpy(), self.truncated.numpy()
        actions_np = self.actions.numpy()
        self.obs[0] = self.obs[T]  # carried over from the previous rollout (no-op on the first)
        if self.stats[Stat.FIRST_STEP_TIME] == 0:
            self.stats[Stat.FIRST_STEP_TIME] = time.time()
        base_step = self.board.global_step()
        step_rewards, step_terms, step_truncs = [0.0] * K, [False] * K, [False] * K
        next_obs: list[np.ndarray] = [None] * K  # type: ignore[list-item]
        for t in range(T):
            with torch.inference_mode():
                logits, _ = self.model(self.obs[t])
            actions = sample_actions(logits, self.rng)
            actions_np[t] = actions
            ended = []
            # the per-env loop only steps and collects; the bookkeeping below is one numpy operation per step for all
            # K envs (a numpy scalar write costs as much as a small vector one)
            for k, (env, action) in enumerate(zip(self.envs, actions.tolist(), strict=True)):
                obs, step_rewards[k], step_terms[k], step_truncs[k], _ = env.step(action)
                if step_terms[k] or step_truncs[k]:
                    ended.append((k, obs))
                    obs, _ = env.reset()
                next_obs[k] = obs
            rewards[t] = step_rewards
            terminated[t] = step_terms
            # a terminal state is terminal even at the time limit: truncated only where not terminated
            np.greater(step_truncs, step_terms, out=truncated[t])
            obs_np[t + 1] = np.asarray(next_obs, dtype=np.float32).reshape(K, -1)
            self.ep_return += rewards[t]
            self.ep_length += 1
            for k, final_obs in ended:
                if truncated[t, k]:
                    final_np[t, k] = np.asarray(final_obs, dtype=np.float32).reshape(-1)
                self.finish_episode(k, base_step + (t + 1) * K)
        self.board.add_steps(self.rank, T * K)

    def finish_episode(self, k: int, global_step: int) -> None:
        losses = self.ep_loss_sum[k] / self.ep_updates[k] if self.ep_updates[k] else self.last_loss
        row = np.empty(len(FIELDS))
        row[FIELD["return"]] = self.ep_return[k]
        row[FIELD["length"]] = self.ep_length[k]
        row[FIELD["loss"] : FIELD["entropy"] + 1] = losses
        row[FIELD["global_step"]] = global_step
        row[FIELD["wall_time"]] = time.time() - self.run_start
        self.board.write(self.rank, row)
        self.ep_return[k], self.ep_length[k], self.ep_updates[k] = 0.0, 0, 0
        self.ep_loss_sum[k] = 0.0

    def update(self, pulled_at: int) -> None:
        cfg = self.config
        T, K, D = cfg.n_steps, cfg.envs_per_worker, self.obs.shape[-1]
        # one batched forward over the whole rollout (+ the boundary observation) with autograd on
        logits, values_all = self.model(self.obs.view((T + 1) * K, D))
        values_all = values_all.view(T + 1, K)
        values = values_all[:T]
        final_values = torch.zeros(T, K)
        if self.truncated.any():
            with torch.no_grad():
                final_values = self.model(self.final_obs.view(T * K, D))[1].view(T, K)
        dones = torch.maximum(self.terminated, self.truncated)
        next_values = next_state_values(values.detach(), values_all[T].detach(), final_values, self.truncated)
        advantages, returns = gae_advantages(
            self.rewards, values.detach(), next_values, self.terminated, dones, cfg.gamma, cfg.gae_lambda
        )
        # the loss's gradient w.r.t. the network outputs in closed form; autograd then only runs through the network
        terms, dlogits, dvalues = actor_critic_loss_grads(
            logits[: T * K],
            values.reshape(-1),
            self.actions.view(-1),
            advantages.view(-1),
            returns.view(-1),
            cfg.ent_coef,
            cfg.vf_coef,
        )
        self.grads.zero_()
        # fills self.grads (the .grad views of our private flat buffer)
        torch.autograd.backward((logits[: T * K], values.reshape(-1)), (dlogits, dvalues))
        grad_norm = float(self.grads.norm())
        loss_values = torch.stack([x.detach() for x in terms]).numpy()  # total, policy, value, entropy
        if not (math.isfinite(grad_norm) and np.isfinite(loss_values).all()):
            # a non-finite update would poison the shared model for every worker: skip it, count it
            self.stats[Stat.SKIPPED : Stat.SKIPPED_IN_ROW + 1] += 1  # both counters in one operation
            return
        if grad_norm > cfg.max_grad_norm:
            self.grads.mul_(cfg.max_grad_norm / (grad_norm + 1e-6))
        lag = self.store.push(self.grads, self.rank, pulled_at)
        self.record_update(loss_values, grad_norm, lag)

    def record_update(self, loss_values: np.ndarray, grad_norm: float, lag: int) -> None:
        # Built in a private copy, then published with one slice assignment: a worker killed (SIGKILL) mid-update
        # leaves its shared stats row either before or after this update, never with the counters half-advanced.
        s = self.stats.copy()
        s[Stat.UPDATES] += 1
        s[Stat.SKIPPED_IN_ROW] = 0
        s[Stat.GRAD_NORM_SUM] += grad_norm
        s[Stat.LAG_SUM] += lag
        interval = self.store.interval()
        if interval != self.lag_interval:  # a new logging interval: its max starts afresh
            self.lag_interval = interval
            s[Stat.LAG_MAX] = lag
            s[Stat.LAG_MAX_INTERVAL] = interval
        else:
            s[Stat.LAG_MAX] = max(s[Stat.LAG_MAX], lag)
        s[Stat.LOSS : Stat.ENTROPY + 1] = loss_values
        s[Stat.HEARTBEAT] = time.time()
        self.stats[:] = s
        self.last_loss = loss_values
        self.ep_loss_sum += loss_values
        self.ep_updates += 1
