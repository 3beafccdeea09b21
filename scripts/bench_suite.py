"""The suite (classic control, LunarLander, the continuous tasks, MuJoCo's HalfCheetah, Hopper and Walker2d), a3c
against Stable-Baselines3's A2C with rl-zoo3's hyperparameters, on the same step budget, several seeds, runs
alternating (a3c, SB3, a3c, ...) in one process so that drifts in machine load hit both alike (SB3's PPO instead:
--sb3-algo ppo; both from scripts/sb3_runner.py).

a3c runs as ``python -m a3c.train --env ENV --workers 2 --seed S --total-steps BUDGET --run-dir ...`` (its preset
from a3c/spec/presets.toml applies through --env) and is read back from the run's episodes.csv; SB3's A2C runs in this
process with rl-zoo3's settings for the env (hyperparams/a2c.yml: n_envs, ent_coef, gamma, linear learning-rate
schedules, and VecNormalize where rl-zoo3 says normalize), one torch thread. Returns are training-episode returns
(stochastic policy; SB3's Monitor records the raw rewards, before VecNormalize), in the order the episodes ended.
Wall time: a3c from its trainer's start (episodes.csv wall_time), SB3 from building its envs.

    pip install -e ".[bench,box2d,mujoco]"
    python -m scripts.bench_suite --seeds 1 2 3 --out bench-out
    python -m scripts.bench_suite --envs HalfCheetah-v5 Hopper-v5 Walker2d-v5 --seeds 1 2 3 --out bench-mujoco
    python -m scripts.bench_suite --envs CartPole-v1 Acrobot-v1 --seeds 1 --scale 0.01   # a smoke test
    python -m scripts.bench_suite --merge out-a/suite.json out-b/suite.json --out bench-out   # runs made apart

Per env: the final 100-episode training mean (mean +- std over seeds), how many seeds reached the threshold, the
median steps and wall time to it, the median steps/s. Writes OUT/suite.json, .md and .png (learning curves against
steps and against wall time, a3c and SB3 on the same axes, two per env).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from collections import deque
from pathlib import Path
from typing import Any

from scripts._common import (
    WINDOW,
    Episodes,
    command_line,
    final_mean,
    first_reach,
    markdown_table,
    median,
    read_episodes,
    run_train,
    save_results,
)
from scripts.sb3_runner import ALGOS, sb3_run

# Issue 10's budgets and thresholds (100-episode training mean); SB3's hyperparameters are rl-zoo3's
# (scripts/sb3_runner.py). "zoo": rl-zoo3's published A2C score for the env (mean deterministic evaluation return,
# benchmark.md), a reference.
SUITE: dict[str, dict[str, Any]] = {
    "CartPole-v1": {"budget": 500_000, "threshold": 475.0, "zoo": "500 at 500k"},
    "Acrobot-v1": {
        "budget": 500_000,
        "threshold": -100.0,
        "zoo": "-83 at 500k",
    },
    "MountainCar-v0": {
        "budget": 1_000_000,
        "threshold": -130.0,
        "zoo": "-111 at 1M",
    },
    "LunarLander-v3": {
        "budget": 1_000_000,
        "threshold": 100.0,
        "zoo": "156 at 200k (v2)",
    },
    # continuous control (issue 12); thresholds: issue 12's for Pendulum, gymnasium's "solved" for the others
    "Pendulum-v1": {
        "budget": 1_000_000,
        "threshold": -300.0,
        "zoo": "-163 at 1M",
    },
    "MountainCarContinuous-v0": {
        "budget": 100_000,
        "threshold": 90.0,
        "zoo": "91 at 100k",
    },
    "LunarLanderContinuous-v3": {
        "budget": 1_000_000,
        "threshold": 100.0,
        "zoo": "84 at 5M (v2)",
    },
    # MuJoCo (issue 25; rl-zoo3's mujoco-defaults: VecNormalize, 1 env, SB3's A2C defaults otherwise: n_steps 5,
    # RMSprop 7e-4, ent_coef 0, vf_coef 0.5, max_grad_norm 0.5, orthogonal init, log-std 0). Thresholds: rl-zoo3's A2C
    # scores where it has one (HalfCheetah 3041, Hopper 733 on -v3), rounded down; Walker2d has none: 1000.
    "HalfCheetah-v5": {"budget": 1_000_000, "threshold": 3000.0, "zoo": "3041 at 1M (v3)"},
    "Hopper-v5": {"budget": 1_000_000, "threshold": 700.0, "zoo": "733 at 1M (v3)"},
    "Walker2d-v5": {"budget": 1_000_000, "threshold": 1000.0, "zoo": "none published"},
}
CLASSIC = ["CartPole-v1", "Acrobot-v1", "MountainCar-v0", "LunarLander-v3"]  # issue 10's suite


def curve(episodes: Episodes, points: int = 300) -> Episodes:
    """(wall seconds, global step, mean of the last <= WINDOW episodes), thinned to about ``points`` points for the
    plot/JSON."""
    recent: deque[float] = deque(maxlen=WINDOW)
    out = []
    every = max(1, len(episodes) // points)
    for i, (wall, step, ret) in enumerate(episodes):
        recent.append(ret)
        if i % every == 0 or i == len(episodes) - 1:
            out.append((wall, step, statistics.fmean(recent)))
    return out


def summarize(episodes: Episodes, threshold: float, steps: int, steps_per_s: float) -> dict:
    step, wall = first_reach(episodes, threshold)
    return {
        "final_mean_100": final_mean(episodes),
        "episodes": len(episodes),
        "reached_at_step": step,
        "reached_at_s": wall,
        "steps": steps,
        "steps_per_s": steps_per_s,
        "curve": curve(episodes),
    }


def a3c_run(env_id: str, seed: int, budget: int, workers: int, threshold: float, tmp: Path, timeout: float) -> dict:
    run_dir = tmp / f"a3c-{env_id}-{seed}-{time.time_ns()}"
    args = ["--env", env_id, "--workers", str(workers), "--seed", str(seed), "--total-steps", str(budget)]
    summary = run_train([*args, "--checkpoint-every", "0"], run_dir, timeout=timeout)
    episodes = read_episodes(run_dir)
    config = (run_dir / "config.json").read_text()
    shutil.rmtree(run_dir, ignore_errors=True)
    return {
        **summarize(episodes, threshold, summary["total_steps"], summary["steps_per_s"]),
        "config": config,
    }


def _mean_std(values: list[float | None]) -> tuple[float | None, float | None]:
    known = [v for v in values if v is not None]
    if not known:
        return None, None
    return statistics.fmean(known), (statistics.stdev(known) if len(known) > 1 else 0.0)


def report(results: dict[str, dict[str, list[dict]]], budgets: dict[str, int]) -> tuple[str, dict]:
    headers = [
        "env",
        "steps",
        "threshold",
        "trainer",
        "final mean100",
        "± std",
        "reached",
        "median steps to thr",
        "median s to thr",
        "median steps/s",
        "rl-zoo3 A2C (eval)",
    ]
    rows, aggregate = [], {}
    for env_id, by_trainer in results.items():
        for trainer, runs in by_trainer.items():
            if not runs:  # a trainer left out (--trainers)
                continue
            mean, std = _mean_std([r["final_mean_100"] for r in runs])
            reached = [r for r in runs if r["reached_at_step"] is not None]
            agg = {
                "final_mean_100": mean,
                "final_std": std,
                "reached": f"{len(reached)}/{len(runs)}",
                "median_steps_to_threshold": median([r["reached_at_step"] for r in reached]),
                "median_s_to_threshold": median([r["reached_at_s"] for r in reached]),
                "median_steps_per_s": median([r["steps_per_s"] for r in runs]),
            }
            aggregate.setdefault(env_id, {})[trainer] = agg
            steps_to = agg["median_steps_to_threshold"]
            rows.append(
                [
                    env_id,
                    f"{budgets[env_id]:,}",
                    SUITE[env_id]["threshold"],
                    "a3c" if trainer == "a3c" else "SB3 (rl-zoo3)",
                    mean,
                    std,
                    agg["reached"],
                    None if steps_to is None else f"{steps_to:,.0f}",
                    agg["median_s_to_threshold"],
                    agg["median_steps_per_s"],
                    SUITE[env_id]["zoo"],
                ]
            )
    table = (
        "Training return (mean of the last 100 episodes at the end; mean ± std over seeds), and the median over the "
        "seeds that reached the threshold of the steps and wall time to it\n\n" + markdown_table(headers, rows)
    )
    return table, aggregate


def figure(results: dict[str, dict[str, list[dict]]]) -> Any:
    """Two axes per env: the return against steps and against wall time, a3c and SB3 on each (curves of older
    suite.json files, without steps, are drawn against wall time only)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(results)
    fig, axes = plt.subplots(n, 2, figsize=(11, 3.4 * n), dpi=80, squeeze=False)
    colors = {"a3c": "tab:blue", "sb3": "tab:orange"}
    for (by_steps, by_wall), (env_id, by_trainer) in zip(axes, results.items(), strict=True):
        for trainer, runs in by_trainer.items():
            for i, run in enumerate(runs):
                label = ("a3c (2 workers, preset)" if trainer == "a3c" else "SB3 (rl-zoo3)") if i == 0 else None
                points = run["curve"]
                walls = [p[0] for p in points]
                means = [p[-1] for p in points]
                style = {"color": colors[trainer], "alpha": 0.8, "linewidth": 1.2, "label": label}
                by_wall.plot(walls, means, **style)
                if points and len(points[0]) == 3:
                    by_steps.plot([p[1] for p in points], means, **style)
        for ax, xlabel in ((by_steps, "steps"), (by_wall, "wall time (s)")):
            ax.axhline(SUITE[env_id]["threshold"], color="grey", linestyle="--", linewidth=0.8)
            ax.set_title(env_id)
            ax.set_xlabel(xlabel)
            ax.set_ylabel(f"mean return, last {WINDOW} episodes")
            ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    return fig


def merge(paths: list[Path], out: Path, replace: bool = False) -> None:
    """One table and figure from several suite.json files; their commands are recorded in the merged JSON. An env
    and trainer found in several files gets the runs of all of them, or with ``replace`` those of the last file that
    has runs of it (a rerun, e.g. of a3c on one env after its preset changed, replaces those rows of a full run)."""
    import json

    results: dict[str, dict[str, list[dict]]] = {}
    budgets: dict[str, int] = {}
    commands = []
    for path in paths:
        data = json.loads(path.read_text())
        commands.append(data["command"])
        budgets.update(data["budgets"])
        for env_id, by_trainer in data["runs"].items():
            for trainer, runs in by_trainer.items():
                merged = results.setdefault(env_id, {"a3c": [], "sb3": []})
                if replace and runs:
                    merged[trainer] = []
                merged[trainer].extend(runs)
    results = {env_id: results[env_id] for env_id in SUITE if env_id in results}  # the suite's order
    table, aggregate = report(results, budgets)
    data = {"budgets": budgets, "window": WINDOW, "merged_from": commands, "aggregate": aggregate, "runs": results}
    save_results(out, "suite", data, table, figure(results))


def _save_partial(out: Path, results: dict[str, dict[str, list[dict]]], budgets: dict[str, int]) -> None:
    """OUT/suite.partial.json after every env and seed: a long suite stopped early keeps what it measured (a
    ``--merge`` of it reports those runs)."""
    import json

    out.mkdir(parents=True, exist_ok=True)
    data = {"command": command_line(), "budgets": budgets, "window": WINDOW, "runs": results}
    (out / "suite.partial.json").write_text(json.dumps(data) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--envs",
        nargs="+",
        default=CLASSIC,
        choices=list(SUITE),
        metavar="ENV",
        help=f"envs to run (default: issue 10's {', '.join(CLASSIC)}; continuous control: "
        f"{', '.join(e for e in SUITE if e not in CLASSIC)}; MuJoCo needs the mujoco extra)",
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--workers", type=int, default=2, help="a3c worker processes")
    parser.add_argument(
        "--scale", type=float, default=1.0, help="multiply every step budget by this (e.g. 0.01 for a smoke test)"
    )
    parser.add_argument("--timeout", type=float, default=7200.0, help="seconds allowed per a3c run")
    parser.add_argument("--out", type=Path, default=Path("bench-out"))
    parser.add_argument(
        "--merge",
        type=Path,
        nargs="+",
        metavar="JSON",
        help="run nothing: report the runs of these suite.json files (e.g. one per env, run side by side) together",
    )
    parser.add_argument(
        "--replace",
        action="store_true",
        help="with --merge: an env and trainer in several files keeps only the runs of the last file that has any",
    )
    parser.add_argument(
        "--trainers",
        nargs="+",
        default=["a3c", "sb3"],
        choices=["a3c", "sb3"],
        help="run only these (e.g. a3c and SB3 in two processes side by side, then --merge their suite.json)",
    )
    parser.add_argument("--sb3-algo", choices=ALGOS, default="a2c", help="SB3's algorithm (rl-zoo3's settings)")
    args = parser.parse_args()
    if args.merge:
        merge(args.merge, args.out, args.replace)
        return
    if not 0.0 < args.scale <= 1.0:
        parser.error("--scale must be in (0, 1]")
    budgets = {env_id: max(1000, int(SUITE[env_id]["budget"] * args.scale)) for env_id in args.envs}
    tmp = Path(tempfile.mkdtemp(prefix="a3c-suite-"))
    results: dict[str, dict[str, list[dict]]] = {env_id: {"a3c": [], "sb3": []} for env_id in args.envs}
    try:
        for seed in args.seeds:
            for env_id in args.envs:  # alternate a3c and SB3, env by env, seed by seed
                threshold = SUITE[env_id]["threshold"]
                line = f"{env_id} seed {seed}:"
                if "a3c" in args.trainers:
                    a = a3c_run(env_id, seed, budgets[env_id], args.workers, threshold, tmp, args.timeout)
                    results[env_id]["a3c"].append({"seed": seed, **a})
                    line += f" a3c final {a['final_mean_100']}, reached at {a['reached_at_s']} s;"
                if "sb3" in args.trainers:
                    run = sb3_run(args.sb3_algo, env_id, seed, budgets[env_id])
                    s = summarize(run["episodes"], threshold, run["steps"], run["steps_per_s"])
                    results[env_id]["sb3"].append({"seed": seed, **s})
                    line += f" SB3 final {s['final_mean_100']}, reached at {s['reached_at_s']} s"
                print(line, file=sys.stderr, flush=True)
                _save_partial(args.out, results, budgets)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    table, aggregate = report(results, budgets)
    save_results(
        args.out,
        "suite",
        {"budgets": budgets, "window": WINDOW, "sb3_algo": args.sb3_algo, "aggregate": aggregate, "runs": results},
        table,
        figure(results),
    )


if __name__ == "__main__":
    main()
