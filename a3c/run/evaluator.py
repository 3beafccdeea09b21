"""Evaluation during training (``--eval-every STEPS``, ``--eval-episodes N``): the deterministic policy (its most
likely actions; ``--eval-stochastic``: actions sampled from it, by a sampler seeded alike for every evaluation) scored
on envs of its own, apart from the workers, as the A3C paper's and pytorch-a3c's test process does.

Every ``eval_every`` global steps the main process takes a snapshot of the run (``Coordinator.snapshot()``: the
weights, at one instant, with the global step they belong to), copies its weights into the evaluation channel and
asks for an evaluation. The evaluator, a process of its own under the shared-memory backend (supervised like the
workers: restarted if it dies or stops beating, under --max-restarts) or a call in the main process under the
serial backend, loads them, plays N episodes with the deterministic policy (``a3c.record.agent.run_episodes``, the same
code as ``python -m a3c.evaluate`` and ``a3c.load``) and publishes the result. It never pushes a gradient and its
env steps are not counted in the global step. The main process, which owns every writer, then logs ``eval/*`` at the
snapshot's step, appends eval.csv, and writes checkpoints/best.pt (the snapshot, with the result under "eval") when
the mean return beats every earlier one. A request made while the previous evaluation still runs waits for the next
multiple of ``eval_every``: evaluations never queue up behind a slow evaluator.

This module is the evaluator's side (the channel, the process, the evaluation itself); the main process's side, when
to ask and what to do with a result, is a3c/run/evaluation.py, and eval.csv's format a3c/record/eval_log.py.

The episodes of every evaluation start from the same env seeds (``a3c.record.agent.eval_seeds``): evaluations differ by
the weights alone, so a better mean is a better policy, not easier start states.

Channel protocol (shared tensors; one writer each, as the episode board's): the main process writes the weights,
then bumps ``control[REQUESTED]``, and writes nothing more until ``done`` reaches that number; the evaluator writes
``result``, then sets ``done``. A restarted evaluator finds an unfinished request (REQUESTED > done) and runs it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from multiprocessing.connection import Connection

import torch

from a3c.learn.model import build_model, flatten_parameters
from a3c.record.agent import Agent, eval_samplers, eval_seeds, make_eval_envs, normalisation, run_episodes
from a3c.record.eval_log import RESULT_FIELDS
from a3c.record.rows import STATS_WIDTH, Stat
from a3c.spec.config import Config
from a3c.spec.environment import EnvSpec

REQUESTED, STOP = 0, 1  # slots of the control tensor (written by the main process only)
POLL_S = 0.05  # how often an idle evaluator looks for a request (and beats)
EVALUATOR_PROCESS = "a3c-evaluator"  # the evaluator process's name (envs/faulty.py's hang_ranks="evaluator" reads it)


class EvalChannel:
    """The shared tensors between the main process and the evaluator (picklable: torch passes them as shared
    memory)."""

    def __init__(
        self, n_params: int, dtype: torch.dtype = torch.float32, stats_shapes: dict[str, tuple[int, ...]] | None = None
    ) -> None:
        self.params = torch.zeros(n_params, dtype=dtype).share_memory_()  # the weights to evaluate
        # the normalisation statistics that go with the weights (key: "obs_stats"/"reward_stats" -> their shape);
        # written with the weights, applied frozen by the evaluator
        self.norm_stats = {
            key: {
                "count": torch.zeros((), dtype=torch.float64).share_memory_(),
                "mean": torch.zeros(shape, dtype=torch.float64).share_memory_(),
                "var": torch.zeros(shape, dtype=torch.float64).share_memory_(),
            }
            for key, shape in (stats_shapes or {}).items()
        }
        self.control = torch.zeros(2, dtype=torch.int64).share_memory_()  # [REQUESTED, STOP]: main writes
        self.done = torch.zeros(1, dtype=torch.int64).share_memory_()  # the last request finished: evaluator writes
        self.result = torch.zeros(len(RESULT_FIELDS), dtype=torch.float64).share_memory_()  # evaluator writes
        self.stats = torch.zeros(1, STATS_WIDTH, dtype=torch.float64).share_memory_()  # its heartbeat (Supervisor)


class _Abandon(Exception):
    """The run is stopping: the evaluation in hand is dropped (its result would come after the run's end)."""


class Evaluator:
    """The evaluator's side: its own model, envs and episode seeds; evaluates each request of the channel."""

    def __init__(self, channel: EvalChannel, config: Config, spec: EnvSpec) -> None:
        self.channel, self.config = channel, config
        model, dist = build_model(spec, config)
        self.params, _ = flatten_parameters(model)
        self.agent = Agent(model, dist, spec, config)
        self.envs = make_eval_envs(config, config.eval_episodes)
        self.seeds = eval_seeds(config.seed, config.eval_episodes)
        self.heartbeat = channel.stats.numpy()[0, Stat.HEARTBEAT :]  # a view: one float write per beat
        self.control = channel.control.numpy()
        self.terminate: Callable[[], bool] = lambda: False
        self.beat()

    def beat(self) -> None:
        self.heartbeat[0] = time.time()

    def stopping(self) -> bool:
        return bool(self.control[STOP]) or self.terminate()

    def _step_done(self) -> None:
        """After every env step of an evaluation: the heartbeat, and a stop ends the evaluation at once (the run is
        over; a long evaluation must not hold up its shutdown)."""
        self.beat()
        if self.stopping():
            raise _Abandon

    def pending(self) -> int:
        """The request to run (0: none)."""
        requested = int(self.channel.control[REQUESTED])
        return requested if requested > int(self.channel.done[0]) else 0

    def evaluate(self, request: int) -> None:
        self.params.copy_(self.channel.params)
        norm = self.channel.norm_stats
        transform, self.agent.value_scale = normalisation(norm.get("obs_stats"), norm.get("reward_stats"), self.config)
        self.agent.obs_transform = transform or (lambda obs: obs)
        stats = run_episodes(
            self.agent,
            self.envs,
            self.seeds,
            deterministic=not self.config.eval_stochastic,
            samplers=eval_samplers(self.config.seed, len(self.seeds)),  # (the same draws each evaluation)
            on_step=self._step_done,
        )
        summary = stats.summary()
        self.channel.result.copy_(torch.tensor([summary[f] for f in RESULT_FIELDS], dtype=torch.float64))
        self.channel.done[0] = request  # publishes the result written above
        self.beat()

    def run(self, terminate: Callable[[], bool] = lambda: False) -> None:
        self.terminate = terminate
        try:
            while not self.stopping():
                request = self.pending()
                if request:
                    try:
                        self.evaluate(request)
                    except _Abandon:
                        return
                else:
                    self.beat()
                    time.sleep(POLL_S)
        finally:
            self.close()

    def close(self) -> None:
        for env in self.envs:
            env.close()
        self.envs = []


def evaluator_main(
    channel: EvalChannel, config: Config, spec: EnvSpec, incarnation: int = 0, errors: Connection | None = None
) -> None:
    """Process entry point (started by a ProcessLauncher, as the workers are, and set up the same way:
    a3c.run.worker.run_as_process)."""
    from a3c.run.worker import run_as_process

    run_as_process(lambda terminate: Evaluator(channel, config, spec).run(terminate), errors)
