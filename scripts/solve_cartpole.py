"""Learning check: train CartPole-v1 with the default settings for several seeds and report, per seed, whether and
when the 100-episode mean return reached the env's threshold (475).

    python -m scripts.solve_cartpole --seeds 1 2 3 4 5 --workers 2 --total-steps 500000 --out bench-out

Prints a markdown table; writes OUT/solve_cartpole.json, .md and .png (100-episode mean return against steps).
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
from pathlib import Path

from scripts._common import markdown_table, run_train, save_results


def rolling_mean_curve(run_dir: Path, window: int = 100) -> tuple[list[int], list[float]]:
    with open(run_dir / "episodes.csv") as f:
        # the run's order (docs/design.md): by global step, then worker and index
        rows = sorted(csv.DictReader(f), key=lambda r: (int(r["global_step"]), int(r["worker"]), int(r["index"])))
    steps, means, recent = [], [], []
    for r in rows:
        recent.append(float(r["return"]))
        recent = recent[-window:]
        if len(recent) == window:
            steps.append(int(r["global_step"]))
            means.append(sum(recent) / window)
    return steps, means


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--total-steps", type=int, default=500_000)
    parser.add_argument("--out", type=Path, default=Path("bench-out"))
    parser.add_argument("--stop-when-solved", action="store_true", help="stop each run once solved (faster)")
    parser.add_argument("train_args", nargs="*", help="extra a3c.train flags, after --")
    args = parser.parse_args()

    results, curves = [], {}
    for seed in args.seeds:
        run_dir = args.out / "solve_cartpole_runs" / f"seed{seed}"
        if run_dir.exists():
            import shutil

            shutil.rmtree(run_dir)
        train_args = [
            "--env",
            "CartPole-v1",
            "--workers",
            str(args.workers),
            "--total-steps",
            str(args.total_steps),
            "--seed",
            str(seed),
            *args.train_args,
        ]
        if args.stop_when_solved:
            train_args.append("--stop-when-solved")
        s = run_train(train_args, run_dir)
        curves[seed] = rolling_mean_curve(run_dir)
        best = max(curves[seed][1], default=float("nan"))
        results.append(
            {
                "seed": seed,
                "solved": s["solved_at_step"] is not None,
                "solved_at_step": s["solved_at_step"],
                "solved_at_s": s["solved_at_s"],
                "best_mean_return_100": best,
                "final_mean_return_100": s["mean_return_100"],
                "steps_per_s": s["steps_per_s"],
                "total_steps": s["total_steps"],
            }
        )
        print(f"seed {seed}: solved_at_step={s['solved_at_step']} best={best:.1f}", file=sys.stderr, flush=True)

    solved = [r for r in results if r["solved"]]
    rows = [
        [
            r["seed"],
            "yes" if r["solved"] else "no",
            r["solved_at_step"],
            r["solved_at_s"],
            r["best_mean_return_100"],
            r["final_mean_return_100"],
            r["steps_per_s"],
        ]
        for r in results
    ]
    table = markdown_table(["seed", "reached 475", "at step", "at s", "best mean100", "final mean100", "steps/s"], rows)
    times = [r["solved_at_s"] for r in solved]
    table += f"\n\n{len(solved)}/{len(results)} seeds reached a 100-episode mean of 475"
    if times:
        table += f"; median time to solve {statistics.median(times):.1f} s"

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4), dpi=80)
    for seed, (steps, means) in curves.items():
        ax.plot(steps, means, lw=1, label=f"seed {seed}")
    ax.axhline(475, color="grey", ls="--", lw=0.8)
    ax.set_xlabel("global env step")
    ax.set_ylabel("mean return, last 100 episodes")
    ax.set_title(f"CartPole-v1, {args.workers} workers")
    ax.legend(fontsize=7)
    fig.tight_layout()
    save_results(args.out, "solve_cartpole", {"results": results, "solved": len(solved)}, table, fig)


if __name__ == "__main__":
    main()
