"""Every native thread pool of a worker, the evaluator and the serial backend's main process runs one thread
(a3c.run.threads): torch's, the BLAS under numpy and OpenMP's, whatever the parent process was started with."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np

from a3c.run.threads import THREAD_ENV_VARS, native_thread_counts, one_native_thread

# a process started the way a worker process is (a3c.run.worker.run_as_process), from a parent whose environment asks
# every library for 4 threads; the body reports the pools it finds, after a product large enough to start BLAS threads
PROBE = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    from a3c.run.worker import run_as_process
    from a3c.run.threads import native_thread_counts

    def body(terminate):
        a = np.ones((512, 512), dtype=np.float32)
        a @ a
        print(json.dumps(native_thread_counts()))

    run_as_process(body, None)
    """
)


def test_a_worker_process_runs_every_native_pool_at_one_thread() -> None:
    env = {**os.environ, **{name: "4" for name in THREAD_ENV_VARS}}
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    counts = json.loads(out.stdout.strip().splitlines()[-1])
    assert any(name != "torch" for name in counts), f"no BLAS found: {counts}"  # numpy always links one
    assert counts == {name: 1 for name in counts}, counts


def test_one_native_thread_limits_a_block_and_restores() -> None:
    import torch

    before = native_thread_counts()
    with one_native_thread():
        inside = native_thread_counts()
        a = np.ones((256, 256), dtype=np.float32)
        a @ a
    assert inside == {name: 1 for name in inside}
    assert native_thread_counts() == before
    assert torch.get_num_threads() == before["torch"]


def test_a_serial_run_in_a_callers_process_leaves_its_threads_and_environment_as_they_were(tmp_path) -> None:
    """Found in review: a3c.train(backend="serial") left the caller (a notebook) at one torch thread, its BLAS pools
    at one, OMP_NUM_THREADS and kin set to 1 and A3C_WORKER_RANK set: every later torch or numpy product ran on one
    core. The limits hold while the workers' loop runs in the process, and go with it."""
    import torch

    import a3c

    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    env_before = {name: os.environ.get(name) for name in (*THREAD_ENV_VARS, "A3C_WORKER_RANK")}
    try:
        pools_before = native_thread_counts()
        a3c.train(env="CartPole-v1", backend="serial", workers=1, total_steps=1000, run_dir=tmp_path / "run")
        assert native_thread_counts() == pools_before
        assert {name: os.environ.get(name) for name in env_before} == env_before
    finally:
        torch.set_num_threads(threads)
