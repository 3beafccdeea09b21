"""The README's first command on many seeds: does every run end solved, report the mean that met the threshold, and
keep the solving checkpoint?

    python -m scripts.bench_solve_seeds --seeds 1 2 3 4 5 6 7 8 9 10 --out bench-out

For each seed it runs ``python -m a3c.train --env ENV --stop-when-solved --seed S`` (the README's Quickstart command
with the seed added; --workers auto as there), reads the final line and summary.json, and then scores the checkpoint
that ``a3c.load(run)`` returns (checkpoints/latest.pt) with ``python -m a3c.evaluate RUN --episodes 10 --stochastic``
(the policy as it acted in training). Prints a markdown table (seconds to solve, steps past the solve that the workers
ran before they stopped, the checkpoint's step, the reported mean, the checkpoint's evaluation); writes
OUT/solve_seeds.json, .md and .png.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from scripts._common import markdown_table, save_results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(1, 11)))
    parser.add_argument("--out", type=Path, default=Path("bench-out"))
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in args.seeds:
            run_dir = Path(tmp) / f"seed{seed}"
            cmd = [sys.executable, "-m", "a3c.train", "--env", args.env, "--stop-when-solved", "--seed", str(seed)]
            out = subprocess.run([*cmd, "--run-dir", str(run_dir)], capture_output=True, text=True, timeout=3600)
            final_line = out.stderr.strip().splitlines()[-1] if out.stderr.strip() else ""
            summary = json.loads((run_dir / "summary.json").read_text())
            checkpoint = torch.load(run_dir / "checkpoints" / "latest.pt", weights_only=True)
            scores = Path(tmp) / f"eval{seed}.json"
            evaluate = [sys.executable, "-m", "a3c.evaluate", str(run_dir), "--episodes", "10", "--stochastic"]
            subprocess.run([*evaluate, "--json", str(scores)], capture_output=True, text=True, timeout=600, check=True)
            evaluation = json.loads(scores.read_text())
            solved_at = summary.get("stopped_solved_at_step")
            row = {
                "seed": seed,
                "exit_code": out.returncode,
                "final_line": final_line,
                "stop_reason": summary["stop_reason"],
                "solved_at_step": solved_at,
                "solved_at_s": summary.get("stopped_solved_at_s"),
                "total_steps": summary["total_steps"],
                "steps_past_solve": None if solved_at is None else summary["total_steps"] - solved_at,
                "checkpoint_step": int(checkpoint["global_step"]),
                "mean_return_100": summary["mean_return_100"],
                "eval_mean_return": evaluation["mean_return"],
                "workers": summary["workers"],
            }
            rows.append(row)
            print(final_line, flush=True)
    table = markdown_table(
        ["seed", "solved", "solved at (s)", "steps past solve", "checkpoint step - solve", "mean (last 100)", "eval"],
        [
            [
                r["seed"],
                r["stop_reason"] == "solved" and "solved at step" in r["final_line"],
                r["solved_at_s"],
                r["steps_past_solve"],
                None if r["solved_at_step"] is None else r["checkpoint_step"] - r["solved_at_step"],
                r["mean_return_100"],
                r["eval_mean_return"],
            ]
            for r in rows
        ],
    )
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.5))
    seeds = [r["seed"] for r in rows]
    ax.bar([s - 0.2 for s in seeds], [r["mean_return_100"] or 0 for r in rows], 0.4, label="mean (last 100) reported")
    ax.bar([s + 0.2 for s in seeds], [r["eval_mean_return"] for r in rows], 0.4, label="latest.pt, 10 episodes")
    ax.set_xlabel("seed")
    ax.set_ylabel("return")
    ax.set_title(f"{args.env} --stop-when-solved: what each run reports and keeps")
    ax.legend(loc="lower right")
    fig.tight_layout()
    save_results(args.out, "solve_seeds", {"env": args.env, "runs": rows}, table, fig)


if __name__ == "__main__":
    main()
