"""`--workers auto` against the best fixed worker count: for each env setting, one run with `--workers auto` and a
sweep of fixed counts (powers of two, up to at least twice auto's choice), all in this one invocation; the score is
auto's steps/s over the best fixed count's.

    python -m scripts.bench_workers_auto --out bench-out

Rows (--rows picks some): CartPole-v1; envs/SlowCartPole-v1 CPU-bound (mode=cpu, 1 ms a step); and
envs/SlowCartPole-v1 I/O-bound (mode=sleep) at 0.2, 1 and 10 ms a step. Every run uses the defaults (8 envs per
worker, --n-steps 5) and gives each worker the same work (a row's --steps-per-worker env steps, at least
--min-steps in all), so an ideal run lasts about as long whatever the count. steps/s is summary.json's: from the
workers' common first step to the last update (start-up excluded; it is the startup s column). Auto runs first in
each row, so the sweep can reach past its choice; with --repeats R every count runs R times (interleaved) and the
median counts. "load" is the range of the 1-minute load average after the row's runs. Prints a markdown table;
writes OUT/workers_auto.json (every run's summary and resolved config, the machine, the command) and
OUT/workers_auto.png.
"""

from __future__ import annotations

if not __package__:  # run as a file (python scripts/NAME.py): the repository's root on sys.path
    import _root  # noqa: F401

import argparse
import os
import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scripts._common import alternate, markdown_table, run_train, save_results

# name -> (env args, steps per worker)
ROWS: dict[str, tuple[list[str], int]] = {
    "cartpole": (["--env", "CartPole-v1"], 40_000),
    "cpu-1ms": (["--env", "envs/SlowCartPole-v1", "--env-kwargs", "latency=0.001", "mode=cpu"], 2_000),
    "sleep-0.2ms": (["--env", "envs/SlowCartPole-v1", "--env-kwargs", "latency=0.0002", "mode=sleep"], 8_000),
    "sleep-1ms": (["--env", "envs/SlowCartPole-v1", "--env-kwargs", "latency=0.001", "mode=sleep"], 3_200),
    "sleep-10ms": (["--env", "envs/SlowCartPole-v1", "--env-kwargs", "latency=0.01", "mode=sleep"], 400),
}


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", nargs="+", default=list(ROWS), choices=list(ROWS), help="env settings (default: all)")
    p.add_argument("--min-steps", type=int, default=1_000, help="least total env steps of a run (default: 1000)")
    p.add_argument("--scale", type=float, default=1.0, help="multiply every row's steps per worker (default: 1.0)")
    p.add_argument("--repeats", type=int, default=1, help="runs per count, interleaved; the median counts (default: 1)")
    p.add_argument("--max-workers", type=int, default=128, help="largest fixed count in a sweep (default: 128)")
    p.add_argument("--out", type=Path, default=Path("bench-out"), help="output folder (default: bench-out)")
    return p.parse_args()


def sweep_counts(auto: int, max_workers: int) -> list[int]:
    """Powers of two from 1 to at least twice auto's choice (and at least 4), at most max_workers."""
    top = min(max_workers, max(4, 2 * auto))
    counts, n = [], 1
    while n <= top:
        counts.append(n)
        n *= 2
    return counts


def expected_choice(env_args: list[str]) -> int:
    """What auto will choose, measured here, to give the auto run the same work per worker as the fixed ones."""
    from a3c.run.resolve import preflight
    from a3c.run.workers_auto import auto_choice
    from a3c.train import parse_config

    config = parse_config(env_args)
    return auto_choice(config, preflight(config)).workers


def run_row(name: str, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    env_args, per_worker = ROWS[name]
    per_worker = int(per_worker * args.scale)

    def run(workers: str, n: int, rep: int) -> dict[str, Any]:
        total = max(args.min_steps, n * per_worker)
        cmd = [*env_args, "--workers", workers, "--total-steps", str(total), "--checkpoint-every", "0"]
        summary = run_train(cmd, tmp / f"{name}-{workers}-{rep}")
        summary["load"] = os.getloadavg()[0]  # other jobs on the machine show here first
        print(f"  {name} workers={workers} ({summary['workers']}): {summary['steps_per_s']:,.0f} steps/s", flush=True)
        return summary

    first = run("auto", expected_choice(env_args), 0)  # its choice sets the sweep
    choice = first["config"]["workers"]
    counts = sweep_counts(choice, args.max_workers)
    trials: dict[str, Callable[[int], dict[str, Any]]] = {
        "auto": lambda rep: first if rep == 0 else run("auto", choice, rep),
        **{str(n): (lambda rep, n=n: run(str(n), n, rep)) for n in counts},
    }
    runs = alternate(args.repeats, trials)  # each repeat: auto, then every count (interleaved)
    median = {k: statistics.median(r["steps_per_s"] for r in v) for k, v in runs.items()}
    fixed = {int(k): v for k, v in median.items() if k != "auto"}
    best = max(fixed, key=fixed.__getitem__)
    return {
        "row": name,
        "env_args": env_args,
        "auto_workers": choice,
        "auto_reason": first["config"]["workers_auto"]["reason"],
        "auto_steps_per_s": median["auto"],
        "fixed_steps_per_s": fixed,
        "best_fixed": best,
        "best_fixed_steps_per_s": fixed[best],
        "auto_over_best": median["auto"] / fixed[best],
        "load": [min(x["load"] for v in runs.values() for x in v), max(x["load"] for v in runs.values() for x in v)],
        "runs": runs,
    }


def main() -> None:
    args = parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-workers-auto-") as tmp:
        results = []
        for name in args.rows:
            print(f"{name}:", flush=True)
            results.append(run_row(name, args, Path(tmp)))
    rows = [
        [
            r["row"],
            r["auto_workers"],
            r["auto_steps_per_s"],
            r["best_fixed"],
            r["best_fixed_steps_per_s"],
            f"{r['auto_over_best']:.0%}",
            ", ".join(f"{n}: {v:,.0f}" for n, v in sorted(r["fixed_steps_per_s"].items())),
            f"{r['load'][0]:.1f}-{r['load'][1]:.1f}",
        ]
        for r in results
    ]
    table = markdown_table(
        [
            "env",
            "auto workers",
            "auto steps/s",
            "best fixed",
            "best steps/s",
            "auto/best",
            "sweep (workers: steps/s)",
            "load",
        ],
        rows,
    )
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    for r in results:
        xs = sorted(r["fixed_steps_per_s"])
        best = r["best_fixed_steps_per_s"]
        line = ax.plot(xs, [r["fixed_steps_per_s"][x] / best for x in xs], marker="o", label=r["row"])[0]
        ax.plot([r["auto_workers"]], [r["auto_steps_per_s"] / best], marker="*", markersize=14, color=line.get_color())
    ax.set_xscale("log", base=2)
    ax.set_xlabel("workers (stars: --workers auto's choice)")
    ax.set_ylabel("steps/s / best fixed count's")
    ax.axhline(0.9, color="gray", linestyle=":", linewidth=1)
    ax.set_title(f"--workers auto against a sweep of fixed counts ({os.cpu_count()} cores)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    data = {"results": results, "args": vars(args) | {"out": str(args.out)}}
    save_results(args.out, "workers_auto", data, table, fig)


if __name__ == "__main__":
    main()
