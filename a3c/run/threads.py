"""One thread in every native thread pool a worker (or the evaluator, or the serial backend's main process) touches.

A worker is one of N processes that together fill the machine's cores; each runs small matrix products (the acting
pass, the update's numpy passes: a3c.learn.update.mlp). torch's own intra-op pool is one pool; the BLAS that numpy was
built with (OpenBLAS, MKL, BLIS) and any OpenMP runtime a library loads are others, and each starts as many threads
as the machine has cores the first time a product is large enough. N workers x C threads spinning on C cores made
workers 5-21x slower at widths of 256 and more (docs/benchmarks/throughput.md, "One thread in every native pool").
``torch.set_num_threads`` governs torch's pool only; threadpoolctl (the ecosystem's tool: scikit-learn uses it)
finds every BLAS and OpenMP library loaded in the process and sets each to one thread, whatever numpy was built
with. The environment variables cover what is loaded later (an env's own native code, a subprocess of the env),
which reads them when it starts.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import torch
from threadpoolctl import threadpool_info, threadpool_limits

# read by OpenBLAS, MKL, BLIS, OpenMP runtimes and numexpr when they load: libraries loaded after the limit below
THREAD_ENV_VARS = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)

_limits: Any = None  # the process-wide limits (kept referenced: threadpoolctl restores nothing until asked)


def limit_native_threads() -> None:
    """For the rest of this process: torch, every BLAS and every OpenMP runtime loaded at one thread, and the
    environment set so that those loaded later (and child processes) start with one. Call first thing in a process
    that is one of many (a worker, the evaluator), or in the main process where it runs the workers' loop itself."""
    global _limits
    for name in THREAD_ENV_VARS:
        os.environ[name] = "1"
    torch.set_num_threads(1)
    _limits = threadpool_limits(limits=1)  # applied now, for every library already loaded


@contextmanager
def one_native_thread() -> Iterator[None]:
    """The same limits for a block, and the process as it was after it: torch's threads, every pool's and the
    environment (the main process's timing of a worker; the serial backend's run in a caller's process, which a
    notebook goes on from at its own thread counts)."""
    threads = torch.get_num_threads()
    environment = {name: os.environ.get(name) for name in THREAD_ENV_VARS}
    os.environ.update(dict.fromkeys(THREAD_ENV_VARS, "1"))
    torch.set_num_threads(1)
    try:
        with threadpool_limits(limits=1):
            yield
    finally:
        torch.set_num_threads(threads)
        restore_environment(environment)


def restore_environment(saved: Mapping[str, str | None]) -> None:
    """Put environment variables back as ``saved`` holds them (None: the variable was not set)."""
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def native_thread_counts() -> dict[str, int]:
    """The thread count of every native pool loaded in this process: torch's, and each BLAS / OpenMP library's
    (by threadpoolctl's name for its API and the library's file name)."""
    counts = {"torch": torch.get_num_threads()}
    for pool in threadpool_info():
        counts[f"{pool['internal_api']}:{os.path.basename(pool['filepath'])}"] = int(pool["num_threads"])
    return counts
