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


def test_env_and_action_space_seeds_fit_in_32_bits():
    """numpy's legacy RandomState(seed), which third-party envs seed with, refuses 2**32 and above."""
    from a3c.record.agent import eval_seeds

    seeds = [WorkerSeeds(s, session, rank, 0) for s in (0, 1, 2**40) for session in (0, 3) for rank in (0, 7, 500)]
    values = [w.env(k) for w in seeds for k in range(64)] + [w.action_space(k) for w in seeds for k in range(64)]
    values += eval_seeds(9, 100)
    assert all(0 <= v < 2**32 for v in values)
    np.random.RandomState(max(values))  # (accepted)


def test_env_seeds_are_distinct_within_a_large_run():
    """32 bits of a hash would repeat within a run this size about one time in two; the packed key through a keyed
    permutation never does (a3c.spec.seeding.env_seed): 2 sessions x 128 ranks x 3 incarnations x 64 envs, reset and
    action-space seeds, and 1,000 evaluation episodes."""
    from a3c.record.agent import eval_seeds

    seeds = []
    for session, rank, inc in itertools.product(range(2), range(128), range(3)):
        worker = WorkerSeeds(5, session, rank, inc)
        seeds += [worker.env(k) for k in range(64)] + [worker.action_space(k) for k in range(64)]
    seeds += eval_seeds(5, 1000)
    assert len(seeds) == len(set(seeds)) == 2 * 128 * 3 * 64 * 2 + 1000


def test_a_run_of_an_env_seeded_with_numpys_legacy_randomstate(tmp_path):
    """Before: every worker crashed at its first reset (a seed of 63 bits), three restarts each, run stopped."""
    import os
    import subprocess
    from pathlib import Path

    from procs import train_cmd

    tests = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([tests, *filter(None, [os.environ.get("PYTHONPATH")])])}
    cmd = train_cmd(tmp_path / "run", "--env", "legacy_seeded:LegacySeeded-v0", "--total-steps", "2000")
    out = subprocess.run(
        [*cmd, "--eval-every", "1000", "--eval-episodes", "3"], capture_output=True, text=True, env=env
    )
    assert out.returncode == 0, out.stderr
    assert out.stderr.strip().splitlines()[-1].startswith("a3c: reached --total-steps ")
