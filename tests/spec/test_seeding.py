"""Seeds: every stream of a run comes from one SeedSequence, and no two streams ever coincide (ranks, envs,
restarts, resumes, runs), unlike seed + rank schemes."""

import itertools

import numpy as np
import torch

from a3c.spec.seeding import EVALUATOR_RANK, MAIN_RANK, WorkerSeeds, model_init_seed


def env_seeds(seed, session, workers, envs_per_worker, incarnations=1):
    return [
        WorkerSeeds(seed, session, rank, inc).env(k)
        for rank in range(workers)
        for inc in range(incarnations)
        for k in range(envs_per_worker)
    ]


def test_no_env_seed_repeats_across_ranks_envs_restarts_sessions_and_runs():
    seeds = [
        s
        for seed, session in itertools.product((1, 2, 3), (0, 1, 2))
        for s in env_seeds(seed, session, workers=8, envs_per_worker=4, incarnations=3)
    ]
    assert len(seeds) == len(set(seeds)) == 3 * 3 * 8 * 4 * 3


def test_a_resume_with_other_worker_counts_reuses_no_seed():
    """The review's case (f374bab): 4 workers x 2 envs, then a resume with 2 workers: every env of the resumed
    session reused a seed of the first."""
    first = set(env_seeds(1, session=0, workers=4, envs_per_worker=2))
    resumed = set(env_seeds(1, session=1, workers=2, envs_per_worker=2))
    assert not first & resumed
    resumed_more_envs = set(env_seeds(1, session=1, workers=4, envs_per_worker=4))
    assert not first & resumed_more_envs


def test_neighbouring_seeds_share_no_stream():
    """seed + rank made --seed 1's rank 1 equal to --seed 2's rank 0."""
    assert WorkerSeeds(1, 0, 1, 0).env(0) != WorkerSeeds(2, 0, 0, 0).env(0)
    assert WorkerSeeds(1, 0, 1, 0).rng.random() != WorkerSeeds(2, 0, 0, 0).rng.random()


def test_streams_are_reproducible_and_distinct_by_role():
    a, b = WorkerSeeds(7, 1, 3, 2), WorkerSeeds(7, 1, 3, 2)
    assert a.env(0) == b.env(0) and a.torch == b.torch and a.action_space(1) == b.action_space(1)
    np.testing.assert_array_equal(a.rng.random(5), b.rng.random(5))
    values = {a.env(0), a.env(1), a.action_space(0), a.torch}
    assert len(values) == 4
    assert all(0 <= v < 2**63 for v in values)  # what gymnasium's reset(seed=) and torch.manual_seed accept


def test_the_main_process_and_evaluator_streams_are_not_a_workers():
    assert MAIN_RANK != EVALUATOR_RANK and MAIN_RANK >= 2**31
    worker_torch = {WorkerSeeds(1, 0, r, 0).torch for r in range(16)}
    assert model_init_seed(1) not in worker_torch and model_init_seed(1) != model_init_seed(2)
    torch.manual_seed(model_init_seed(1))  # an int torch takes
