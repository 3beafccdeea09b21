"""A worker's K Atari envs alone, on each env backend: microseconds per agent step (4 emulator frames and a3c's
preprocessing) of ``--env-backend gymnasium`` (AtariFrames + LifeLossTerminal, the envs stepped in turn) and
``--env-backend ale-vector`` (ale-py's AtariVectorEnv on one thread), random actions, rounds alternating between the
backends, in one process. What a3c.train's frames/s cannot separate from the network: the env's own cost. Both the
wall time (what a worker waits) and the process's CPU time (all its threads: ale-vector steps its emulators on a
thread of its own) a step: on a shared machine the wall time also holds the waits for a core, a thread handoff's
included. Prints a markdown table; writes OUT/env_batch.json, .md and .png.

    python -m scripts.bench_env_batch --env ALE/Pong-v5 --envs 4 --steps 500 --rounds 7 --out bench-out
"""

from __future__ import annotations

if not __package__:  # run as a file (python scripts/NAME.py): the repository's root on sys.path
    import _root  # noqa: F401

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from a3c.spec.config import ENV_BACKENDS
from a3c.spec.env_batch import make_env_batch
from scripts._common import alternate, markdown_table, save_results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--env", default="ALE/Pong-v5", help="an ALE id")
    parser.add_argument("--envs", type=int, default=4, help="envs in the batch (A3C's atari table's --envs-per-worker)")
    parser.add_argument("--steps", type=int, default=500, help="agent steps of the batch a round")
    parser.add_argument("--rounds", type=int, default=7, help="rounds, each backend once a round")
    parser.add_argument("--out", type=Path, default=Path("bench-out"), help="folder for the JSON, table and PNG")
    args = parser.parse_args()
    K = args.envs
    batches = {backend: make_env_batch(args.env, {}, K, backend) for backend in ENV_BACKENDS}
    for batch in batches.values():
        batch.reset(list(range(K)), list(range(K)))
    n_actions = int(batches["gymnasium"].envs[0].action_space.n)  # type: ignore[attr-defined]
    rng = np.random.default_rng(0)

    def trial(backend: str) -> Any:
        def run(r: int) -> tuple[float, float]:
            batch, actions = batches[backend], rng.integers(n_actions, size=(args.steps, K)).tolist()
            start, cpu = time.perf_counter(), time.process_time()
            for a in actions:
                batch.step(a)
            wall_us = (time.perf_counter() - start) / (args.steps * K) * 1e6
            cpu_us = (time.process_time() - cpu) / (args.steps * K) * 1e6
            print(f"round {r + 1}, {backend}: {wall_us:.0f} us (CPU {cpu_us:.0f}) an env's agent step", flush=True)
            return wall_us, cpu_us

        return run

    results = alternate(args.rounds, {backend: trial(backend) for backend in ENV_BACKENDS})
    for batch in batches.values():
        batch.close()
    wall = {backend: [w for w, _ in v] for backend, v in results.items()}
    cpu = {backend: [c for _, c in v] for backend, v in results.items()}
    medians = {backend: statistics.median(v) for backend, v in wall.items()}
    cpu_medians = {backend: statistics.median(v) for backend, v in cpu.items()}
    rows = [
        [
            backend,
            medians[backend],
            ", ".join(f"{x:.0f}" for x in wall[backend]),
            f"{medians['gymnasium'] / medians[backend]:.2f}x",
            cpu_medians[backend],
            ", ".join(f"{x:.0f}" for x in cpu[backend]),
            f"{cpu_medians['gymnasium'] / cpu_medians[backend]:.2f}x",
        ]
        for backend in results
    ]
    table = markdown_table(
        ["--env-backend", "wall us / env step (median)", "rounds", "vs gymnasium", "CPU us (median)", "rounds", "vs"],
        rows,
    )
    table += f"\n\n{args.env}, {K} envs, {args.steps} agent steps of the batch a round, {args.rounds} rounds"

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4.5, 3.2), dpi=100)
    ax.bar(list(medians), list(medians.values()))
    ax.set_ylabel("us per env's agent step (median)")
    ax.set_title(f"{args.env}: {K} envs, one thread")
    fig.tight_layout()
    data = {"env": args.env, "envs": K, "steps": args.steps, "wall_us_per_env_step": wall, "cpu_us_per_env_step": cpu}
    save_results(args.out, "env_batch", data, table, fig)


if __name__ == "__main__":
    main()
