"""a3c's objectives side by side on one env (issue 50): arms of a3c.train flags (e.g. the env's preset with --algo a3c
and with --algo ppo) over seeds, in alternation, with SB3's PPO (rl-zoo3's settings, scripts/sb3_runner.py) on some
of the seeds. Prints a table (final and best 100-episode training mean, the step it first reached --threshold, wall
time, steps/s), writes JSON + PNG (the 100-episode mean against steps, one line per run). The JSON is written again
after every run, so a run cut short leaves what it finished.

    python -m scripts.bench_ppo --env LunarLander-v3 --steps 1000000 --seeds 201 202 203 --sb3-seeds 201 \\
        --arm a3c= --arm "ppo=--algo ppo"
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import time
from pathlib import Path
from typing import Any

from scripts._common import (
    REPO,
    Episodes,
    best_mean,
    final_mean,
    first_reach,
    markdown_table,
    read_episodes,
    run_train,
    save_results,
)


def parse_arm(text: str) -> tuple[str, list[str]]:
    name, sep, flags = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"an arm is NAME=FLAGS (got {text!r}); e.g. ppo='--algo ppo'")
    return name, shlex.split(flags)


def curve(episodes: Episodes, points: int = 200) -> list[tuple[int, float]]:
    """(step, mean of the last 100 returns) at up to ``points`` episodes spread over the run."""
    out, returns = [], [r for _, _, r in episodes]
    stride = max(1, len(episodes) // points)
    for i in range(99, len(episodes), stride):
        out.append((episodes[i][1], statistics.fmean(returns[i - 99 : i + 1])))
    return out


def row_of(name: str, seed: int, episodes: Episodes, wall_s: float, steps_per_s: float, threshold: float) -> dict:
    step, _ = first_reach(episodes, threshold)
    return {
        "arm": name,
        "seed": seed,
        "final_mean_100": final_mean(episodes),
        "best_mean_100": best_mean(episodes),
        "reached_at_step": step,
        "wall_s": wall_s,
        "steps_per_s": steps_per_s,
        "episodes": len(episodes),
        "curve": curve(episodes),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", required=True)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--seeds", type=int, nargs="+", default=[])
    parser.add_argument("--sb3-seeds", type=int, nargs="*", default=[])
    parser.add_argument("--arm", type=parse_arm, action="append", default=[], help="NAME=a3c.train flags")
    parser.add_argument("--threshold", type=float, default=200.0, help="the 100-episode mean counted as reached")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "results")
    parser.add_argument("--name", default=None, help="output file name (default: ppo_<env>)")
    parser.add_argument("--runs", type=Path, default=Path("/tmp/bench_ppo"))
    parser.add_argument(
        "--from-json",
        type=Path,
        nargs="+",
        default=[],
        help="train nothing: the table and figure of these JSON files' runs together (e.g. two invocations' "
        ".partial.json, one of them cut short)",
    )
    args = parser.parse_args()
    name = args.name or f"ppo_{args.env.replace('/', '_')}"
    rows: list[dict[str, Any]] = []
    if args.from_json:
        for path in args.from_json:
            rows += json.loads(path.read_text())["runs"]
        rows.sort(key=lambda r: (r["seed"], r["arm"]))
        args.seeds, args.sb3_seeds = [], []

    def save(final: bool) -> None:
        table = markdown_table(
            ["arm", "seed", "final mean100", "best mean100", f"step to {args.threshold:g}", "wall s", "steps/s"],
            [
                [
                    r["arm"],
                    r["seed"],
                    r["final_mean_100"],
                    r["best_mean_100"],
                    r["reached_at_step"],
                    r["wall_s"],
                    r["steps_per_s"],
                ]
                for r in rows
            ],
        )
        data = {"env": args.env, "steps": args.steps, "threshold": args.threshold, "runs": rows}
        if not final:
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / f"{name}.partial.json").write_text(json.dumps(data, indent=2) + "\n")
            return
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(8, 4.5))
        colours: dict[str, Any] = {}
        for r in rows:
            colour = colours.setdefault(r["arm"], f"C{len(colours)}")
            xs, ys = zip(*r["curve"], strict=True) if r["curve"] else ((), ())
            ax.plot(xs, ys, color=colour, alpha=0.8)
        handles = [plt.Line2D([], [], color=c, label=a) for a, c in colours.items()]
        ax.legend(handles=handles)
        ax.axhline(args.threshold, color="grey", linestyle=":")
        ax.set_xlabel("env steps")
        ax.set_ylabel("100-episode training mean")
        ax.set_title(f"{args.env}: a3c's objectives and SB3's PPO, {args.steps:,} steps")
        fig.tight_layout()
        save_results(args.out, name, data, table, fig)

    for seed in args.seeds:
        for arm, flags in args.arm:
            run_dir = args.runs / f"{name}_{arm}_{seed}_{int(time.time())}"
            summary = run_train(
                ["--env", args.env, "--total-steps", str(args.steps), "--seed", str(seed), *flags],
                run_dir,
                timeout=4 * 3600,
            )
            rows.append(
                {
                    **row_of(
                        arm,
                        seed,
                        read_episodes(run_dir),
                        summary["wall_time_s"],
                        summary["steps_per_s"],
                        args.threshold,
                    ),
                    "command": summary["command"],
                    "algo": summary.get("algo"),
                    "workers": summary["workers"],
                }
            )
            print(
                f"{arm} seed {seed}: final {rows[-1]['final_mean_100']}, wall {summary['wall_time_s']:.0f} s",
                flush=True,
            )
            save(final=False)
        if seed in args.sb3_seeds:
            from scripts.sb3_runner import sb3_run

            result = sb3_run("ppo", args.env, seed, args.steps)
            rows.append(
                {
                    **row_of(
                        "sb3-ppo", seed, result["episodes"], result["wall_s"], result["steps_per_s"], args.threshold
                    ),
                    "command": f"sb3_run('ppo', {args.env!r}, {seed}, {args.steps})",
                }
            )
            print(f"sb3-ppo seed {seed}: final {rows[-1]['final_mean_100']}, wall {result['wall_s']:.0f} s", flush=True)
            save(final=False)
    save(final=True)


if __name__ == "__main__":
    main()
