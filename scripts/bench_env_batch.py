"""A worker's K Atari envs alone, on each env backend: microseconds per agent step (4 emulator frames and a3c's
preprocessing) of ``--env-backend gymnasium`` (AtariFrames + LifeLossTerminal, the envs stepped in turn) and
``--env-backend ale-vector`` (ale-py's AtariVectorEnv on one thread), random actions, rounds alternating between the
backends, in one process on one torch-free thread. What a3c.train's frames/s cannot separate from the network: the
env's own cost. Prints a markdown table; writes OUT/env_batch.json, .md and .png.

    python -m scripts.bench_env_batch --env ALE/Pong-v5 --envs 4 --steps 500 --rounds 7 --out bench-out
"""

from __future__ import annotations

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
    parser.add_argument("--envs", type=int, default=4, help="envs in the batch (the atari preset's --envs-per-worker)")
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
        def run(r: int) -> float:
            batch, actions = batches[backend], rng.integers(n_actions, size=(args.steps, K)).tolist()
            start = time.perf_counter()
            for a in actions:
                batch.step(a)
            us = (time.perf_counter() - start) / (args.steps * K) * 1e6
            print(f"round {r + 1}, {backend}: {us:.0f} us an env's agent step", flush=True)
            return us

        return run

    results = alternate(args.rounds, {backend: trial(backend) for backend in ENV_BACKENDS})
    for batch in batches.values():
        batch.close()
    medians = {backend: statistics.median(v) for backend, v in results.items()}
    base = medians["gymnasium"]
    rows = [
        [backend, min(v), medians[backend], ", ".join(f"{x:.0f}" for x in v), f"{base / medians[backend]:.2f}x"]
        for backend, v in results.items()
    ]
    table = markdown_table(
        ["--env-backend", "min us / env step", "median us / env step", "rounds", "speed vs gymnasium"], rows
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
    data = {"env": args.env, "envs": K, "steps": args.steps, "us_per_env_step": results, "medians": medians}
    save_results(args.out, "env_batch", data, table, fig)


if __name__ == "__main__":
    main()
