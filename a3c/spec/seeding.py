"""Every random stream of a run, derived from one ``numpy.random.SeedSequence(--seed)``.

A stream is named by its spawn key ``(session, rank, incarnation, role[, index])``:
  session      0 for a new run, +1 for each --resume (saved in checkpoints)
  rank         the worker (EVALUATOR_RANK and MAIN_RANK name the processes that are not workers)
  incarnation  0 for a worker's first process in a session, +1 for each restart
  role         what the stream is for: the policy's action sampler, torch, env k's reset seed, env k's action space

``SeedSequence(seed, spawn_key=key)`` is the child that ``SeedSequence(seed).spawn`` would hand out at that key,
computed without spawning in order, so a stream is the same however many others exist. Two different keys (or two
different seeds) hash to independent streams: no two envs, samplers or workers of any rank, restart, resume or run
ever share one. Compare ``seed + rank`` (pytorch-a3c, SB3's VecEnv): run 1's worker 1 is run 2's worker 0, and
gymnasium's ``reset(seed=s)`` and ``default_rng(s)`` build the same PCG64 from ``SeedSequence(s)``, so an action
sampler seeded like env 0 draws the very numbers env 0 drew for its start state.

What a seed reproduces: with one worker (or --backend serial), the same seed, flags and versions give the same run.
With several processes, each worker's env seeds and sampler streams are still fixed by the seed, but the order in
which their gradients reach the shared model depends on OS scheduling, so two runs diverge after the first updates.
"""

from __future__ import annotations

from enum import IntEnum

import numpy as np

MAIN_RANK = -1 % 2**32  # the main process (the global model's initial weights): spawn keys are unsigned
EVALUATOR_RANK = -2 % 2**32


class Role(IntEnum):
    SAMPLER = 0  # the worker's action sampler (numpy Generator)
    TORCH = 1  # torch.manual_seed of the worker process
    ENV = 2  # env k's reset seed (index = k)
    ACTION_SPACE = 3  # env k's action_space.seed (index = k)
    MODEL_INIT = 4  # the global model's initial weights (main process)


def stream(seed: int, session: int, rank: int, incarnation: int, role: Role, index: int = 0) -> np.random.SeedSequence:
    """The SeedSequence of one stream (see the module docstring for the key)."""
    return np.random.SeedSequence(seed, spawn_key=(session, rank % 2**32, incarnation, int(role), index))


def int_seed(seq: np.random.SeedSequence) -> int:
    """A non-negative int for APIs that take one (gymnasium's reset, torch.manual_seed): 63 bits of the stream."""
    return int(seq.generate_state(2, dtype=np.uint64)[0] >> np.uint64(1))


class WorkerSeeds:
    """The streams of one worker process: ``rng`` for its sampler, and the int seeds of torch and of each env."""

    def __init__(self, seed: int, session: int, rank: int, incarnation: int) -> None:
        self.key = (seed, session, rank, incarnation)
        self.rng = np.random.default_rng(stream(seed, session, rank, incarnation, Role.SAMPLER))
        self.torch = int_seed(stream(seed, session, rank, incarnation, Role.TORCH))

    def env(self, k: int) -> int:
        seed, session, rank, incarnation = self.key
        return int_seed(stream(seed, session, rank, incarnation, Role.ENV, k))

    def action_space(self, k: int) -> int:
        seed, session, rank, incarnation = self.key
        return int_seed(stream(seed, session, rank, incarnation, Role.ACTION_SPACE, k))


def model_init_seed(seed: int) -> int:
    """torch's seed for the global model's initial weights (the same in every session: a resume loads weights)."""
    return int_seed(stream(seed, 0, MAIN_RANK, 0, Role.MODEL_INIT))
