"""The tutorial's experiment: one shared model trained on a slow data source by one worker, then by N workers, with
the same total work, on envs/Classify-v0 (one labelled sample per env step, fetched with --latency seconds of sleep).

    python -m scripts.bench_tutorial --workers 8 --latency 0.02 --steps-per-worker 200 --out bench-out

Same total work: both runs take N * K env steps (K = --steps-per-worker), so both see as many samples, make as many
updates (one every --n-steps steps) and finish as many episodes; the single run's one worker takes all N * K steps,
each of the N workers of the multi run takes about K. Each worker steps one env (--envs-per-worker 1): with more, one
worker would already fetch several samples per forward pass, one after the other, which is not the tutorial's setup.

Time: the trainer's training time, summary.json total_steps / steps_per_s: from the moment all workers take their
first step together (they wait at a start line until every one has built its envs and model) to the end of the last
worker's last update. Process start-up (imports, forking, building envs and models) is not in it; it is reported
apart (startup_s, wall_s). The speed-up is single_s / multi_s; the multi run may overshoot the step budget by less
than one rollout per worker (each worker checks it between rollouts), which only counts against it.

Final loss: the mean, over the last --final-fraction of the run's episodes in wall-time order (all workers together),
of the per-episode value loss (episodes.csv `value_loss`: the critic's squared error on the n-step return, averaged
over the updates made during the episode). Both runs finish the same number of episodes, so the two means average the
same number of episodes and updates. Why not the total A3C loss (`loss`, also reported): its policy-gradient term is
log-probability times advantage, whose mean is about zero by construction (the value is the advantage's baseline), so
the total is a small number of either sign that is mostly noise: measured with one worker and 6 seeds, the last
quarter's total loss ranged from -0.014 to 0.037, the value loss from 0.099 to 0.118. The value loss is a proper
loss (>= 0, falls as the model learns which samples it classifies right) and stable enough to compare.

Learning rate 3e-4, not the trainer's 1e-3: the N workers' gradients are about N - 1 updates stale when applied, and
at 1e-3 Adam's momentum plus that staleness makes the shared critic overshoot: measured with 8 workers (2 seeds), the
last quarter's value loss was 1.5x to 2x the single run's at the same accuracy. At 3e-4 both runs learn alike (the
single run a little slower than at 1e-3).

Writes OUT/tutorial.json (single_s, multi_s, speedup, single_final_loss, multi_final_loss, ...) and OUT/tutorial.png
(the tutorial's figure for the multi run: each worker's loss history left, all workers' losses in time order right,
with the single run's for comparison); prints a markdown table and the command that made them.
"""

from __future__ import annotations

if not __package__:  # run as a file (python scripts/NAME.py): the repository's root on sys.path
    import _root  # noqa: F401

import argparse
import csv
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from a3c.record.figures import loss_history_figure, save_figure
from scripts._common import command_line, machine, markdown_table, run_train, train_seconds


def read_episodes(run_dir: Path) -> list[dict[str, float]]:
    with open(run_dir / "episodes.csv") as f:
        return [{k: float(v) for k, v in row.items()} for row in csv.DictReader(f)]


def final_mean(episodes: list[dict[str, float]], field: str, fraction: float) -> float:
    """Mean of ``field`` over the last ``fraction`` of the episodes in wall-time order (at least one episode)."""
    ordered = sorted(episodes, key=lambda e: e["wall_time"])
    tail = ordered[-max(1, int(round(len(ordered) * fraction))) :]
    return float(np.mean([e[field] for e in tail]))


def per_worker(episodes: list[dict[str, float]], field: str) -> tuple[dict[int, list[float]], dict[int, list[float]]]:
    """``field`` of each worker's episodes in its own order, and their wall times (for loss_history_figure)."""
    losses: dict[int, list[float]] = {}
    times: dict[int, list[float]] = {}
    for e in sorted(episodes, key=lambda e: (e["worker"], e["index"])):
        losses.setdefault(int(e["worker"]), []).append(e[field])
        times.setdefault(int(e["worker"]), []).append(e["wall_time"])
    return losses, times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=8, help="workers of the multi run")
    parser.add_argument("--latency", type=float, default=0.02, help="seconds to fetch one sample (sleep)")
    parser.add_argument("--steps-per-worker", type=int, default=200, help="K: env steps per worker of the multi run")
    parser.add_argument("--episode-length", type=int, default=20, help="samples per episode")
    parser.add_argument("--n-steps", type=int, default=5, help="the trainer's rollout length")
    parser.add_argument("--gamma", type=float, default=0.5, help="discount (the task is a bandit: short horizon)")
    parser.add_argument("--lr", type=float, default=3e-4, help="learning rate (see the module docstring)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--final-fraction", type=float, default=0.25, help="share of last episodes in final loss")
    parser.add_argument("--out", type=Path, default=Path("bench-out"))
    parser.add_argument("--dpi", type=int, default=80)
    args = parser.parse_args()
    if args.workers < 2:
        parser.error("--workers must be at least 2 (the multi run is compared with one worker)")

    total = args.workers * args.steps_per_worker
    common = ["--env", "envs/Classify-v0", "--env-kwargs", f"latency={args.latency}"]
    common += [f"episode_length={args.episode_length}", "--envs-per-worker", "1", "--n-steps", str(args.n_steps)]
    common += ["--gamma", str(args.gamma), "--lr", str(args.lr), "--seed", str(args.seed)]
    common += ["--total-steps", str(total), "--checkpoint-every", "0"]
    info = machine()
    runs: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="a3c-bench-tutorial-") as tmp:
        for name, workers in (("single", 1), ("multi", args.workers)):
            run_dir = Path(tmp) / name
            summary = run_train([*common, "--workers", str(workers)], run_dir)
            episodes = read_episodes(run_dir)
            runs[name] = {
                "summary": summary,
                "episodes": episodes,
                "train_s": train_seconds(summary),
                "final_loss": final_mean(episodes, "value_loss", args.final_fraction),
                "final_total_loss": final_mean(episodes, "loss", args.final_fraction),
                "final_accuracy": final_mean(episodes, "return", args.final_fraction) / args.episode_length,
            }
            print(f"  {name}: {workers} worker(s), {runs[name]['train_s']:.2f} s", file=sys.stderr)

    single, multi = runs["single"], runs["multi"]
    speedup = single["train_s"] / multi["train_s"]
    loss_diff = abs(multi["final_loss"] - single["final_loss"]) / abs(single["final_loss"])
    result = {
        "command": command_line(),
        "machine": info,
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "time_measured": "summary.json total_steps / steps_per_s: all workers' first env step (start line) to the "
        "end of the last update",
        "final_loss_definition": f"mean episode value_loss over the last {args.final_fraction:.0%} of episodes "
        "(wall-time order, all workers)",
        "single_s": single["train_s"],
        "multi_s": multi["train_s"],
        "speedup": speedup,
        "ideal_speedup": args.workers,
        "single_final_loss": single["final_loss"],
        "multi_final_loss": multi["final_loss"],
        "final_loss_relative_difference": loss_diff,
        "single_final_total_loss": single["final_total_loss"],
        "multi_final_total_loss": multi["final_total_loss"],
        "single_final_accuracy": single["final_accuracy"],
        "multi_final_accuracy": multi["final_accuracy"],
        **{f"{name}_{key}": runs[name]["summary"][key] for name in runs for key in ("total_steps", "updates")},
        **{f"{name}_episodes": len(runs[name]["episodes"]) for name in runs},
        **{f"{name}_startup_s": runs[name]["summary"]["startup_s"] for name in runs},
        **{f"{name}_wall_s": runs[name]["summary"]["wall_time_s"] for name in runs},
        **{f"{name}_command": runs[name]["summary"]["command"] for name in runs},
        **{f"{name}_config": runs[name]["summary"]["config"] for name in runs},
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "tutorial.json").write_text(json.dumps(result, indent=2) + "\n")

    losses, times = per_worker(multi["episodes"], "value_loss")
    fig = loss_history_figure(
        losses,
        times,
        title=f"envs/Classify-v0, {args.latency * 1000:g} ms per sample: {args.workers} workers "
        f"{multi['train_s']:.1f} s vs 1 worker {single['train_s']:.1f} s ({speedup:.2f}x), same {total} samples",
    )
    fig.set_dpi(args.dpi)
    right = fig.axes[1]
    fig.axes[0].set_ylabel("value loss (per episode)")
    single_losses = [e["value_loss"] for e in sorted(single["episodes"], key=lambda e: e["wall_time"])]
    right.lines[0].set_label(f"{args.workers} workers")
    right.plot(np.arange(len(single_losses)), single_losses, lw=0.6, color="tab:orange", alpha=0.7, label="1 worker")
    right.legend(fontsize=7)
    save_figure(fig, args.out / "tutorial.png")

    print(
        markdown_table(
            [
                "run",
                "workers",
                "env steps",
                "updates",
                "episodes",
                "train s",
                "speed-up",
                "final loss",
                "total loss",
                "acc.",
            ],
            [
                [
                    name,
                    runs[name]["summary"]["workers"],
                    runs[name]["summary"]["total_steps"],
                    runs[name]["summary"]["updates"],
                    len(runs[name]["episodes"]),
                    f"{runs[name]['train_s']:.2f}",
                    "1.00x" if name == "single" else f"{speedup:.2f}x",
                    f"{runs[name]['final_loss']:.4f}",
                    f"{runs[name]['final_total_loss']:.4f}",
                    f"{runs[name]['final_accuracy']:.1%}",
                ]
                for name in ("single", "multi")
            ],
        )
    )
    print(
        f"\nspeed-up {speedup:.2f}x (ideal {args.workers}x); final losses (value loss, last {args.final_fraction:.0%} "
        f"of episodes) differ by {loss_diff:.1%}; acc. = mean reward (accuracy) over the same episodes; "
        f"{info['cores']} cores, load {info['loadavg_1m_at_start']:.2f} at start; made by: {result['command']}; "
        f"wrote {args.out / 'tutorial.json'} and {args.out / 'tutorial.png'}"
    )


if __name__ == "__main__":
    main()
