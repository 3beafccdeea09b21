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

import functools
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
    """A non-negative int for APIs that take a large one (torch.manual_seed): 63 bits of the stream."""
    return int(seq.generate_state(2, dtype=np.uint64)[0] >> np.uint64(1))


# The seeds handed to envs (``reset(seed=)``, ``action_space.seed``) fit in 32 bits: gymnasium's own envs take any
# non-negative int, but an env that seeds numpy's legacy ``np.random.RandomState(seed)`` refuses 2**32 and above
# ("Seed must be between 0 and 2**32 - 1"). Hashing the key into 32 bits would let two of a large run's envs draw the
# same seed (over 37k env seeds the chance is 1 in 6), so the key is packed into 32 bits, which is distinct for
# distinct keys, and put through a permutation of the 32-bit numbers keyed by the run's seed (a bijection: still
# distinct; keyed: another seed's run gets unrelated seeds). The layout, low bits first:
#   role 1 (ENV 0, ACTION_SPACE 1) | index 11 | rank 10 (the evaluator: 1023) | incarnation 5 | session 5
# A key beyond it (2,048 envs or evaluation episodes, 1,023 workers, 32 restarts of a rank in a session, 32 sessions)
# is hashed instead: distinct from the others only with high probability.
_FIELDS = (("index", 11), ("rank", 10), ("incarnation", 5), ("session", 5))
_ENV_ROLES = {Role.ENV: 0, Role.ACTION_SPACE: 1}
_EVALUATOR_SLOT = 2**10 - 1
_FEISTEL_ROUNDS = 4


def env_seed(seed: int, session: int, rank: int, incarnation: int, role: Role, index: int = 0) -> int:
    """The 32-bit seed of env ``index``'s reset (``Role.ENV``) or action space (``Role.ACTION_SPACE``) for the stream
    named by the key (see the module docstring): distinct for distinct keys within a run (see the layout above)."""
    evaluator = rank % 2**32 == EVALUATOR_RANK
    values = {"index": index, "rank": _EVALUATOR_SLOT if evaluator else rank, "incarnation": incarnation}
    values["session"] = session
    fits = all(0 <= values[name] < 2**bits for name, bits in _FIELDS) and (evaluator or rank < _EVALUATOR_SLOT)
    if not fits:  # beyond the layout: a hash of the key
        return int(stream(seed, session, rank, incarnation, role, index).generate_state(1, dtype=np.uint32)[0])
    packed, shift = _ENV_ROLES[role], 1
    for name, bits in _FIELDS:
        packed |= values[name] << shift
        shift += bits
    return _permute32(packed, _round_keys(seed))


@functools.lru_cache(maxsize=8)
def _round_keys(seed: int) -> tuple[int, ...]:
    """The permutation's round keys: 16 bits each, from the run's seed."""
    words = np.random.SeedSequence(seed, spawn_key=(2**32 - 3,)).generate_state(_FEISTEL_ROUNDS, dtype=np.uint32)
    return tuple(int(w) & 0xFFFF for w in words)


def _permute32(value: int, keys: tuple[int, ...]) -> int:
    """A keyed permutation of the 32-bit numbers: a Feistel network on two 16-bit halves, which is a bijection
    whatever its round function (each round only xors one half with a function of the other)."""
    left, right = value >> 16, value & 0xFFFF
    for key in keys:
        mixed = ((right * 0x9E37 + key) & 0xFFFF) ^ (right >> 7) ^ ((key * 0x85EB) & 0xFFFF)
        left, right = right, left ^ mixed
    return (left << 16) | right


class WorkerSeeds:
    """The streams of one worker process: ``rng`` for its sampler, and the int seeds of torch and of each env."""

    def __init__(self, seed: int, session: int, rank: int, incarnation: int) -> None:
        self.key = (seed, session, rank, incarnation)
        self.rng = np.random.default_rng(stream(seed, session, rank, incarnation, Role.SAMPLER))
        self.torch = int_seed(stream(seed, session, rank, incarnation, Role.TORCH))

    def env(self, k: int) -> int:
        """Env ``k``'s reset seed: 32 bits (``env_seed``)."""
        return env_seed(*self.key, Role.ENV, k)

    def action_space(self, k: int) -> int:
        """Env ``k``'s action-space seed: 32 bits (``env_seed``)."""
        return env_seed(*self.key, Role.ACTION_SPACE, k)


def model_init_seed(seed: int) -> int:
    """torch's seed for the global model's initial weights (the same in every session: a resume loads weights)."""
    return int_seed(stream(seed, 0, MAIN_RANK, 0, Role.MODEL_INIT))
