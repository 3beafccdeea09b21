"""One worker: owns K environments and a private copy of the model, and loops
    pull global weights -> roll out n_steps in K envs -> the learn loop (a3c.learn.update.loop: the objective's
    minibatches, each a gradient by the update path chosen once at start, a3c.learn.update.paths, then norm, clip,
    push; A3C one a rollout, PPO epochs of them with a pull, the heartbeat and the stop between) -> publish steps,
    finished episodes and its stats in one batch
until its channel (a3c.run.backends.WorkerChannel) says stop. The loop does not know which backend it runs on: a process
of its own (``worker_main``, the shared-memory backend) or a turn in the main process (the serial backend). Nothing in
the per-step path locks or talks to another process.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection

import numpy as np
import torch

from a3c.learn.model import State, build_model, flatten_parameters
from a3c.learn.running_stats import ObsNormalizer, RewardScaler
from a3c.learn.update.loop import learn_rollout
from a3c.learn.update.paths import choose
from a3c.learn.update.protocol import Rollout
from a3c.learn.update.step import GradientStep
from a3c.record.rows import FIELD, FIELDS, TERM_COLUMN, Stat
from a3c.run.backends import WorkerChannel
from a3c.run.child_signals import ignore_sigint, take_sigterm
from a3c.run.threads import limit_native_threads
from a3c.spec.config import Config
from a3c.spec.env_batch import make_env_batch
from a3c.spec.environment import EnvSpec
from a3c.spec.seeding import WorkerSeeds

RANK_ENV = "A3C_WORKER_RANK"  # set first thing in every worker: envs may read their rank from it (envs/faulty.py)
START_POLL_S = 0.002  # how often a worker at the start line looks whether all the others are there
# Between two env steps of a rollout and two minibatches of an update (PPO's epochs) the worker publishes a heartbeat
# at most this often: the supervisor's hang check then never takes a slow env's long rollout or a long update for a
# hang (a publish is a remote call under Ray)
BEAT_EVERY_S = 1.0
# The traceback sent to the supervisor is cut to this many BYTES of UTF-8: the pipe's buffer (64 KiB on Linux) holds
# bytes, and a send that fits in it never blocks even if the main process reads late (16,000 characters of
# non-ASCII text could be 64,000 bytes and, pickled, fill the buffer: the send would block and a crash would look
# like a hang).
MAX_TRACEBACK_BYTES = 16_000


def worker_main(
    rank: int,
    channel: WorkerChannel,
    config: Config,
    spec: EnvSpec,
    run_start: float,
    session: int,
    incarnation: int = 0,
    errors: Connection | None = None,
) -> None:
    """Process entry point (the shared-memory backend). ``session`` counts earlier sessions of a resumed run and
    ``incarnation`` earlier processes of this rank in this session (restarts): together with the rank they name this
    process's random streams (a3c.spec.seeding), so no restart or resume replays another's episodes. An exception is
    sent, as traceback text, on ``errors`` (this rank's pipe to the launcher), and the process exits with 1."""
    run_as_process(
        lambda terminate: Worker(
            rank, channel, config, spec, run_start, WorkerSeeds(config.seed, session, rank, incarnation)
        ).run(terminate),
        errors,
    )


def run_as_process(body: Callable[[Callable[[], bool]], None], errors: Connection | None) -> None:
    """What every process a launcher starts (workers, the evaluator) does around its ``body(terminate)``: the set-up
    below, and an exception sent, as traceback text, on ``errors`` (its pipe to the launcher), then exit code 1."""
    # Everything inherited from the parent (fork) or the fork server goes into a generation the garbage collector
    # never scans: a full collection writes to the header of every object it visits, which would copy nearly the
    # whole inherited heap into this process (copy-on-write pages touched by a read-only workload). O(1): it links
    # the generation lists, touching no object.
    gc.freeze()
    # N workers x M threads in each native pool (torch's, the BLAS under numpy, OpenMP) on few cores would thrash
    limit_native_threads()
    ignore_sigint()  # Ctrl-C reaches the whole group: the main process decides (a3c.run.child_signals)
    terminate = threading.Event()
    # SIGTERM (the launcher's way to end a straggler) only sets a flag: the loop reads it at the top, so the update
    # in hand is finished and the shared model never keeps half of one
    take_sigterm(lambda signum, frame: terminate.set())  # (and the block it began with lifted: child_signals)
    _exit_with_parent()
    try:
        body(terminate.is_set)
    except (Exception, SystemExit) as err:
        if isinstance(err, SystemExit) and err.code not in (0, None):
            raise  # (an exit code of its own: the supervisor reports it)
        # an exception, or sys.exit() / sys.exit(0) called by the env or a library: the loop did not end, so not 0
        if errors is not None:
            errors.send(_cut_to_bytes(traceback.format_exc(), MAX_TRACEBACK_BYTES))
            errors.close()
        else:
            traceback.print_exc()
        sys.exit(1)  # multiprocessing turns this into exitcode 1 without printing anything more
    if terminate.is_set():
        # Ended by a SIGTERM, not by the run's end. Exit code 0 would tell the supervisor "the run is over for this
        # process", and a SIGTERM to the workers alone then ended the run early as if it had reached --total-steps
        # (or went on with fewer workers); 128 + SIGTERM, like a process the signal killed, makes it a failure to
        # restart while the run goes on. (The stragglers the launcher terminates at the run's end exit so too.)
        sys.exit(128 + signal.SIGTERM)


def _cut_to_bytes(text: str, limit: int) -> str:
    """The end of ``text`` (where the exception is), at most ``limit`` bytes of UTF-8, cut at a character boundary."""
    data = text.encode("utf-8", errors="replace")
    return data[-limit:].decode("utf-8", errors="ignore") if len(data) > limit else text


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
    """K envs, a private model copy, and the loop. Talks to the rest of the run only through ``channel``."""

    def __init__(
        self,
        rank: int,
        channel: WorkerChannel,
        config: Config,
        spec: EnvSpec,
        run_start: float,
        seeds: WorkerSeeds,
    ) -> None:
        self.rank, self.channel, self.config, self.run_start = rank, channel, config, run_start
        # the CPU generator only: torch.manual_seed also queues a seeding of every accelerator backend, recording a
        # stack trace for each (13 ms of a worker's 35 ms start-up on CartPole); a worker computes on the CPU
        torch.default_generator.manual_seed(seeds.torch)
        self.rng = seeds.rng  # the action sampler's own stream: independent of every env's
        T, K = config.n_steps, config.envs_per_worker
        os.environ[RANK_ENV] = str(rank)  # read by envs as they are made (under the serial backend too)
        # the K envs as one (a3c.spec.env_batch: gymnasium's envs in turn, or --env-backend's vector env)
        self.envs = make_env_batch(config.env, config.env_kwargs, K, config.env_backend)
        self.model, self.dist = build_model(spec, config)
        self.params, self.grads = flatten_parameters(self.model)
        self.grads_np = self.grads.numpy()  # the same memory: the norm and the clip cost a third in numpy
        # Preallocated rollout buffers, indexed [step, env], shaped from the spaces. obs[T] is the observation after
        # the last step: the rollout-boundary bootstrap, and obs[0] of the next rollout.
        # uint8 frames stay uint8 (scaled in the model), unless --normalize-obs turns them into floats here
        obs_shape, self.obs_dtype = spec.obs_shape, (np.float32 if config.normalize_obs else spec.obs_dtype)
        self.clip_rewards = spec.clip_rewards
        self.batch = Rollout.allocate(T, K, obs_shape, self.obs_dtype, self.dist)
        b = self.batch  # the same buffers as the worker's own names (final_obs: the one returned with truncated=True)
        self.obs, self.final_obs, self.actions = b.obs, b.final_obs, b.actions
        self.rewards, self.terminated, self.truncated = b.rewards, b.terminated, b.truncated
        # and as numpy arrays (views, made once: .numpy() costs half a microsecond a call)
        self.obs_np, self.final_obs_np, self.actions_np = b.obs_np, b.final_obs_np, b.actions_np
        self.rewards_np, self.terminated_np, self.truncated_np = b.rewards_np, b.terminated_np, b.truncated_np
        # The update: the objective's learner on one path, chosen here once (a3c.learn.update.paths: the passes by hand
        # and the closed-form or compiled loss gradients where they cover the model, else the reference, autograd),
        # run by the learn loop (a3c.learn.update.loop) with the learning side's norm, clip and lr
        self.learner = choose(config, self.model, self.dist).path.build(self.model, self.dist, config, self.grads)
        self.path = self.learner  # (its act, for the rollout)
        self.gradient_step = GradientStep(config)
        self.term_columns = np.array([TERM_COLUMN[name] for name in self.learner.terms])
        self.terminate: Callable[[], bool] = lambda: False
        self.beat_at = 0.0
        self.acted_at = 0
        # the recurrent state (empty without a core): carried across rollouts, reset per env at its episode's end;
        # start_state is the state before obs[0] of the rollout in hand, which the update unrolls from
        self.state = self.model.initial_state(K)
        self.batch.start_state = self.state
        # --normalize-obs / --normalize-reward: statistics shared by all workers (a3c.learn.running_stats); the buffers
        # hold normalised observations and scaled rewards (what the model and the loss see), while the episode
        # returns reported stay in the env's own units
        self.obs_norm = (
            ObsNormalizer(channel.obs_stats, rank, config.clip_obs) if channel.obs_stats is not None else None
        )
        self.reward_scale = (
            RewardScaler(channel.reward_stats, rank, K, config.gamma, config.clip_reward)
            if channel.reward_stats is not None
            else None
        )
        # per-env running episode statistics
        self.ep_return = np.zeros(K)
        self.ep_length = np.zeros(K, dtype=np.int64)
        # the loss terms (loss, policy, value, entropy) averaged over the updates during each env's episode: running
        # totals over all updates, and each env's totals at its episode's start (one addition an update, not K)
        self.loss_total, self.updates_total = np.zeros(4), 0
        self.ep_loss_start = np.zeros((K, 4))
        self.ep_updates_start = np.zeros(K, dtype=np.int64)
        self.last_loss = np.full(4, np.nan)  # (episodes.csv's four: every learner's first terms, the loss's)
        # what the next publish carries: finished episodes, env steps, and this worker's stats row (it goes on from
        # the coordinator's row: counters restored by a resume or left by this rank's previous incarnation)
        self.finished: list[np.ndarray] = []
        self.unpublished_steps = 0
        self.stats = channel.load_stats()
        self.stats[Stat.READY] = 0.0
        # the learner counts the samples it left out over its own life: the row's count goes on from the one this
        # rank's previous incarnation (or a resumed checkpoint) left
        self.dropped_samples_before = float(self.stats[Stat.DROPPED_SAMPLES])
        self.lag_interval = -1
        # The reset observations go where the first rollout() reads them from: obs[T], copied to obs[0] at its start.
        first = self.envs.reset([seeds.env(k) for k in range(K)], [seeds.action_space(k) for k in range(K)])
        self.obs[T] = torch.from_numpy(self.observe(first))

    @property
    def start_state(self) -> State:
        """The recurrent state before obs[0] of the rollout in hand, which the update unrolls from."""
        return self.batch.start_state

    def observe(self, observations: list[np.ndarray] | np.ndarray) -> np.ndarray:
        """The K envs' observations as the model sees them: [K, *obs_shape] in the buffer's dtype, normalised with
        --normalize-obs (and counted into the shared statistics)."""
        batch = np.asarray(observations, dtype=self.obs_dtype).reshape(len(observations), *self.obs.shape[2:])
        return batch if self.obs_norm is None else self.obs_norm(batch)

    def run(self, terminate: Callable[[], bool] = lambda: False) -> None:
        """The process's loop: the start line, then iterations until the channel says stop (or ``terminate``)."""
        self.terminate = terminate
        try:
            self.wait_at_start_line()
            while not self.channel.should_stop() and not terminate():
                self.step()
        finally:
            self.close()

    def step(self) -> None:
        """One iteration: pull the global weights, roll out, update (push), publish."""
        self.acted_at = self.channel.pull(self.params)
        self.rollout()
        self.learn()
        for stats in (self.obs_norm, self.reward_scale):
            if stats is not None:
                stats.sync()  # this worker's new samples into the shared statistics; the merged view refreshed
                self.stats[Stat.NONFINITE_SAMPLES] += stats.pop_nonfinite()  # non-finite samples it left out
        self.publish()

    def learn(self) -> None:
        """The rollout in hand's update: the learn loop (a3c.learn.update.loop), with this worker as its exchange."""
        max_lag = self.config.max_policy_lag if self.config.algo == "ppo" else 0
        learn_rollout(
            self.learner, self.batch, self.rng, self.gradient_step, self.grads_np, self, self.acted_at, max_lag
        )
        self.stats[Stat.DROPPED_SAMPLES] = self.dropped_samples_before + getattr(self.learner, "dropped_samples", 0)

    def should_stop(self) -> bool:
        return self.channel.should_stop()

    def close(self) -> None:
        self.envs.close()

    def publish(self) -> None:
        self.stats[Stat.HEARTBEAT] = self.beat_at = time.time()
        self.channel.publish(self.unpublished_steps, self.finished, self.stats)
        self.finished, self.unpublished_steps = [], 0

    def wait_at_start_line(self) -> None:
        """Mark this worker ready (envs made and reset, model built), then wait until every worker is, so that all
        take their first step together. Without this the first workers step alone while the last are still starting
        (about a second for 16 workers under forkserver), and that ramp falls inside summary.json's steps_per_s
        window. A restarted worker finds the flags already up and passes at once; the heartbeat keeps the
        supervisor's hang check quiet while waiting; a stop (a failed worker, Ctrl-C) ends the wait."""
        self.stats[Stat.READY] = 1.0
        self.publish()
        while not self.channel.all_ready() and not self.channel.should_stop():
            self.publish()  # the heartbeat
            time.sleep(START_POLL_S)

    def rollout(self) -> None:
        T, K = self.config.n_steps, self.config.envs_per_worker
        obs_np, final_np, actions_np = self.obs_np, self.final_obs_np, self.actions_np
        rewards, terminated, truncated = self.rewards_np, self.terminated_np, self.truncated_np
        obs_shape = obs_np.shape[2:]
        obs_np[0] = obs_np[T]  # carried over from the previous rollout (or the reset observations)
        # no episode ended yet: the flags are written below only at a step where one did
        terminated.fill(0.0)
        truncated.fill(0.0)
        self.batch.start_state = tuple(s.clone() for s in self.state)  # a clone outside inference mode: for autograd
        self.dist.new_rollout(K, self.rng)  # gSDE: this rollout's exploration noise (a no-op for the other families)
        if self.stats[Stat.FIRST_STEP_TIME] == 0:
            self.stats[Stat.FIRST_STEP_TIME] = time.time()
        base_step = self.channel.global_step() + self.unpublished_steps
        act, batch, envs = self.path.act, self.batch, self.envs
        for t in range(T):
            if time.time() - self.beat_at >= BEAT_EVERY_S:
                self.beat()  # a slow env's rollout can outlast --worker-timeout: it is not a hang
            params, self.state = act(batch, t, self.state)  # (a fast path records what it computes for the update)
            actions = self.dist.sample(params, self.rng)
            actions_np[t] = actions
            # the K envs in one call (each reset as its episode ends); the bookkeeping below is one numpy operation per
            # step for all K envs (a numpy scalar write costs as much as a small vector one)
            next_obs, step_rewards_np, step_terms, step_truncs, ended = envs.step(self.dist.env_actions(actions))
            if ended:
                terminated[t] = step_terms
                # a terminal state is terminal even at the time limit: truncated only where not terminated
                np.greater(step_truncs, step_terms, out=truncated[t])
            if self.obs_norm is None:
                try:
                    obs_np[t + 1] = next_obs  # the list straight into the buffer: one conversion, no temporary
                except ValueError:  # observations of another shape of the same size (reshaped there)
                    obs_np[t + 1] = self.observe(next_obs)
            else:
                obs_np[t + 1] = self.observe(next_obs)
            self.ep_return += step_rewards_np  # the env's own rewards: returns are reported unscaled and unclipped ...
            rewards[t] = step_rewards_np
            if self.clip_rewards:
                np.sign(rewards[t], out=rewards[t])  # ... Atari trains on the reward's sign ...
            if self.reward_scale is not None:  # ... and --normalize-reward on rewards over the return's std
                rewards[t] = self.reward_scale(rewards[t].astype(np.float64), np.logical_or(step_terms, step_truncs))
            for k, final_obs, life_lost in ended:
                if truncated[t, k]:
                    final = np.asarray(final_obs, dtype=self.obs_dtype).reshape(obs_shape)
                    final_np[t, k] = final if self.obs_norm is None else self.obs_norm.apply(final)
                if not life_lost:  # a lost life ends the learner's episode, not the game's
                    self.finish_episode(k, t, base_step + (t + 1) * K)
            if ended and self.state:  # the next observation starts a new episode: so does its state
                self.state = self.model.reset_state(self.state, torch.from_numpy(1.0 - terminated[t] - truncated[t]))
        # the lengths once a rollout (an episode that ended at step t was counted to there by finish_episode, and
        # starts this addition at -(t + 1): it holds the T - t - 1 steps of the new one)
        self.ep_length += T
        self.unpublished_steps += T * K

    def finish_episode(self, k: int, t: int, global_step: int) -> None:
        """Env ``k``'s episode ended at step ``t`` of the rollout in hand: its row to publish, its counters reset."""
        updates = self.updates_total - self.ep_updates_start[k]
        losses = (self.loss_total - self.ep_loss_start[k]) / updates if updates else self.last_loss
        row = np.empty(len(FIELDS))
        row[FIELD["return"]] = self.ep_return[k]
        row[FIELD["length"]] = self.ep_length[k] + t + 1  # ep_length counts up to the rollout's start
        row[FIELD["loss"] : FIELD["entropy"] + 1] = losses
        row[FIELD["global_step"]] = global_step
        row[FIELD["wall_time"]] = time.time() - self.run_start
        self.finished.append(row)
        self.ep_return[k], self.ep_length[k], self.ep_updates_start[k] = 0.0, -(t + 1), self.updates_total
        self.ep_loss_start[k] = self.loss_total

    # -- the learn loop's exchange (a3c.learn.update.loop.Exchange): the channel and this worker's stats row --------
    def alive(self) -> bool:
        """Between two minibatches: a heartbeat now and then (the finished episodes and steps stay for the publish
        after the update: the global step counts a rollout once its update is done), and whether to go on."""
        if time.time() - self.beat_at >= BEAT_EVERY_S:
            self.beat()
        return not self.channel.should_stop() and not self.terminate()

    def beat(self) -> None:
        """A heartbeat alone, in the middle of a rollout or an update (the finished episodes and steps stay for the
        publish after the update: the global step counts a rollout once its update is done)."""
        self.stats[Stat.HEARTBEAT] = self.beat_at = time.time()
        self.channel.publish(0, [], self.stats)

    def pull(self) -> int:
        return self.channel.pull(self.params)

    def push(self, pulled_at: int, lr: float) -> int:
        return self.channel.push(self.grads, pulled_at, lr)

    def global_step(self) -> int:
        return self.channel.global_step()

    def skipped(self) -> None:
        self.stats[Stat.SKIPPED : Stat.SKIPPED_IN_ROW + 1] += 1  # both counters in one operation

    def dropped(self, minibatches: int) -> None:
        self.stats[Stat.DROPPED_MINIBATCHES] += minibatches

    def record(self, terms: np.ndarray, grad_norm: float, lag: int) -> None:
        s = self.stats
        s[Stat.UPDATES] += 1
        s[Stat.SKIPPED_IN_ROW] = 0
        s[Stat.GRAD_NORM_SUM] += grad_norm
        s[Stat.LAG_SUM] += lag
        interval = self.channel.interval()
        if interval != self.lag_interval:  # a new logging interval: its max starts afresh
            self.lag_interval = interval
            s[Stat.LAG_MAX] = lag
            s[Stat.LAG_MAX_INTERVAL] = interval
        else:
            s[Stat.LAG_MAX] = max(s[Stat.LAG_MAX], lag)
        s[self.term_columns] = terms
        loss_values = terms[:4]
        self.last_loss = loss_values
        self.loss_total += loss_values
        self.updates_total += 1
