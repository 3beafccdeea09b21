"""a3c against Stable-Baselines3's A2C (or PPO: --sb3-algo ppo) on CartPole-v1, on the same machine, runs
alternating (a3c, SB3, a3c, ...): throughput (env steps/s) and wall time to a 100-episode mean return >= 475, over
several seeds each. SB3 uses rl-zoo3's settings for CartPole-v1 (scripts/sb3_runner.py; A2C: 8 envs, ent_coef 0.0,
SB3's other defaults); a3c its defaults.

    pip install -e ".[bench]"
    python -m scripts.bench_vs_sb3 --seeds 1 2 3 --workers 2 --out bench-out

Prints markdown tables; writes OUT/vs_sb3.json, .md and .png. Every run records its best and final 100-episode mean
return (best: over full 100-episode windows; final: the last 100 episodes, or all if fewer); a seed that does not
reach 475 within --max-steps shows as "-" in the table and is counted in the figure.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from scripts._common import (
    alternate,
    best_mean,
    final_mean,
    first_reach,
    markdown_table,
    read_episodes,
    run_train,
    save_results,
)
from scripts.sb3_runner import ALGOS, sb3_run

THRESHOLD = 475.0


def sb3(algo: str, seed: int, max_steps: int, stop_when_solved: bool) -> dict:
    """SB3's ``algo`` with rl-zoo3's CartPole-v1 settings (scripts/sb3_runner.py): steps/s, and the step and time at
    which the 100-episode mean first reached 475, with the run's best and final means."""
    run = sb3_run(
        algo,
        "CartPole-v1",
        seed,
        max_steps,
        stop=(lambda eps: first_reach(eps, THRESHOLD)[0] is not None) if stop_when_solved else None,
    )
    step, wall = first_reach(run["episodes"], THRESHOLD)
    return {
        "steps_per_s": run["steps_per_s"],
        "solved_at_step": step,
        "solved_at_s": wall,
        "steps": run["steps"],
        "best_mean100": best_mean(run["episodes"]),
        "final_mean100": final_mean(run["episodes"]),
    }


def describe(r: dict) -> str:
    """One seed's outcome in words: when it solved, or that it did not, with its best and final means."""
    best = "-" if r.get("best_mean100") is None else f"{r['best_mean100']:.1f}"
    final = "-" if r.get("final_mean100") is None else f"{r['final_mean100']:.1f}"
    if r["solved_at_s"] is None:
        return f"not solved in {r['steps']:,} steps (best mean100 {best}, final {final})"
    return f"solved in {r['solved_at_s']:.1f} s at step {r['solved_at_step']:,} (best mean100 {best}, final {final})"


def a3c_run(seed: int, workers: int, max_steps: int, stop_when_solved: bool, tmp: Path) -> dict:
    args = [
        "--env",
        "CartPole-v1",
        "--workers",
        str(workers),
        "--total-steps",
        str(max_steps),
        "--seed",
        str(seed),
        "--checkpoint-every",
        "0",
    ]
    if stop_when_solved:
        args.append("--stop-when-solved")
    run_dir = tmp / f"a3c-{seed}-{stop_when_solved}-{time.time_ns()}"
    s = run_train(args, run_dir)
    return {
        "steps_per_s": s["steps_per_s"],
        "solved_at_step": s["solved_at_step"],
        "solved_at_s": s["solved_at_s"],
        "steps": s["total_steps"],
        "best_mean100": best_mean(read_episodes(run_dir)),
        "final_mean100": s["mean_return_100"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3], help="seeds, each run by both trainers")
    parser.add_argument("--workers", type=int, default=2, help="a3c's --workers (SB3 steps its 8 envs in one process)")
    parser.add_argument(
        "--throughput-steps", type=int, default=100_000, help="env steps of each throughput run (no stop when solved)"
    )
    parser.add_argument(
        "--max-steps", type=int, default=500_000, help="step budget of each time-to-solve run (stops when solved)"
    )
    parser.add_argument("--sb3-algo", choices=ALGOS, default="a2c", help="SB3's algorithm (rl-zoo3's settings)")
    parser.add_argument("--out", type=Path, default=Path("bench-out"), help="folder for the JSON, table and PNG")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="a3c-vs-sb3-"))
    seeds = args.seeds
    try:  # alternate (a3c, SB3, a3c, ...), so that drifts in machine load hit both alike
        throughput = alternate(
            len(seeds),
            {
                "a3c": lambda r: a3c_run(seeds[r], args.workers, args.throughput_steps, False, tmp)["steps_per_s"],
                "sb3": lambda r: sb3(args.sb3_algo, seeds[r], args.throughput_steps, False)["steps_per_s"],
            },
        )
        solve = alternate(
            len(seeds),
            {
                "a3c": lambda r: {"seed": seeds[r], **a3c_run(seeds[r], args.workers, args.max_steps, True, tmp)},
                "sb3": lambda r: {"seed": seeds[r], **sb3(args.sb3_algo, seeds[r], args.max_steps, True)},
            },
        )
        for a, b in zip(solve["a3c"], solve["sb3"], strict=True):
            print(f"seed {a['seed']}: a3c {describe(a)}; SB3 {describe(b)}", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    tp = {k: statistics.median(v) for k, v in throughput.items()}
    rows = [[name, tp[name], ", ".join(f"{x:,.0f}" for x in throughput[name])] for name in ("a3c", "sb3")]
    table = "Throughput (env steps/s, median of runs)\n\n" + markdown_table(["trainer", "median", "runs"], rows)
    table += f"\n\na3c / SB3 throughput: {tp['a3c'] / tp['sb3']:.2f}x\n\n"

    def med_time(name: str) -> float | None:
        times = [r["solved_at_s"] for r in solve[name]]
        return None if any(t is None for t in times) else statistics.median(times)

    rows = [
        [
            r["seed"],
            a["solved_at_s"],
            a["solved_at_step"],
            a["best_mean100"],
            a["final_mean100"],
            r["solved_at_s"],
            r["solved_at_step"],
            r["best_mean100"],
            r["final_mean100"],
        ]
        for a, r in zip(solve["a3c"], solve["sb3"], strict=True)
    ]
    table += (
        f"Wall time to a 100-episode mean >= 475 ('-': not within {args.max_steps:,} steps), and the best and final "
        "100-episode means of those runs\n\n"
    )
    headers = ["seed", "a3c s", "a3c steps", "a3c best", "a3c final", "SB3 s", "SB3 steps", "SB3 best", "SB3 final"]
    table += markdown_table(headers, rows)
    ma, ms = med_time("a3c"), med_time("sb3")
    if ma is not None and ms is not None:
        table += f"\n\nmedian time to solve: a3c {ma:.1f} s, SB3 {ms:.1f} s, ratio {ma / ms:.2f}"
    else:
        solved = {k: sum(r["solved_at_s"] is not None for r in v) for k, v in solve.items()}
        table += (
            f"\n\nnot every seed solved: a3c {solved['a3c']}/{len(args.seeds)}, SB3 {solved['sb3']}/{len(args.seeds)}"
        )

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.5), dpi=80)
    a.bar(["a3c", f"SB3 {args.sb3_algo.upper()}"], [tp["a3c"], tp["sb3"]], color=["tab:blue", "tab:orange"])
    a.set_ylabel("env steps/s (median)")
    a.set_title("throughput")
    labels = []
    for i, name in enumerate(("a3c", "sb3")):
        times = [r["solved_at_s"] for r in solve[name] if r["solved_at_s"] is not None]
        b.scatter([i] * len(times), times, color=["tab:blue", "tab:orange"][i])
        trainer = "a3c" if name == "a3c" else f"SB3 {args.sb3_algo.upper()}"
        labels.append(f"{trainer}\n{len(times)}/{len(solve[name])} seeds solved")
    b.set_title("time to solve, per seed")
    if any(r["solved_at_s"] is not None for v in solve.values() for r in v):
        b.set_xticks([0, 1], labels)
        b.set_xlim(-0.5, 1.5)
        b.set_ylim(bottom=0)
        b.set_ylabel("seconds to mean100 >= 475")
    else:  # nothing to plot: say so instead of drawing an empty axis
        b.axis("off")
        b.text(
            0.5,
            0.5,
            f"no seed of either trainer\nreached 475 within {args.max_steps:,} steps",
            ha="center",
            va="center",
            transform=b.transAxes,
        )
    fig.tight_layout()
    save_results(
        args.out,
        "vs_sb3",
        {"throughput": throughput, "solve": solve, "median_throughput": tp, "median_solve_s": {"a3c": ma, "sb3": ms}},
        table,
        fig,
    )


if __name__ == "__main__":
    main()
