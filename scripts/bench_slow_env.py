"""Speed-up against workers on a slow environment, for an I/O-bound source (mode sleep) and a CPU-bound one (mode
cpu): I/O-bound sources scale with the number of workers, CPU-bound ones stop at the number of cores.

    python -m scripts.bench_slow_env --workers 1 2 4 8 16 --modes sleep cpu --latency 0.01 --out bench-out

Every run gives each worker the same work (--steps-per-worker env steps, one env per worker, so a run with N workers
takes --total-steps N * steps-per-worker), so an ideal run takes the same time whatever N; the speed-up of N workers
is summary.json's steps_per_s of that run over the 1-worker run's of the same mode. steps_per_s is measured by the
trainer from the moment all workers take their first step together (they wait at a start line, a3c/run/worker.py) to the
end of the last worker's last update: process start-up is not in it (it is the startup_s column).

The machine's 1-minute load average after each run is recorded (column "load"): on a shared machine other jobs take
cores, and the cpu mode shows it first. Prints a markdown table; writes OUT/slow_env.json (with the machine and the
command) and OUT/slow_env.png.
"""

from __future__ import annotations

if not __package__:  # run as a file (python scripts/NAME.py): the repository's root on sys.path
    import _root  # noqa: F401

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from scripts._common import command_line, machine, markdown_table, run_train, train_seconds


def plot(results: list[dict[str, Any]], workers: list[int], nproc: int, latency: float, path: Path, dpi: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 4), dpi=dpi)
    ax.plot(workers, workers, "k--", lw=1, label="ideal (N x one worker)")
    for mode, marker in (("sleep", "o"), ("cpu", "s")):
        points = [(r["workers"], r["speedup"]) for r in results if r["mode"] == mode]
        if points:
            xs, ys = zip(*points, strict=True)
            label = "mode sleep (I/O-bound)" if mode == "sleep" else "mode cpu (CPU-bound)"
            ax.plot(xs, ys, marker=marker, label=label)
    ax.axhline(nproc, color="grey", lw=0.8, ls=":")
    ax.text(workers[0], nproc, f" {nproc} cores", va="bottom", fontsize=8, color="grey")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xticks(workers, [str(w) for w in workers])
    ax.set_yticks(workers, [str(w) for w in workers])
    ax.set_xlabel("workers (one env each)")
    ax.set_ylabel("speed-up over one worker (env steps/s)")
    loads = [r["loadavg_1m_after"] for r in results]
    ax.set_title(
        f"envs/SlowCartPole-v1, {latency * 1000:g} ms per step, {nproc} cores\n"
        f"(1-min load average after the runs: {min(loads):.1f} to {max(loads):.1f})",
        fontsize=9,
    )
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, which="both")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="envs/SlowCartPole-v1", help="an env that takes latency= and mode= kwargs")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    parser.add_argument("--modes", nargs="+", default=["sleep", "cpu"], choices=["sleep", "cpu"])
    parser.add_argument("--latency", type=float, default=0.01, help="seconds per env step")
    parser.add_argument("--steps-per-worker", type=int, default=400, help="env steps each worker takes")
    parser.add_argument("--n-steps", type=int, default=5, help="the trainer's rollout length")
    parser.add_argument("--out", type=Path, default=Path("bench-out"))
    parser.add_argument("--dpi", type=int, default=80)
    args = parser.parse_args()
    if 1 not in args.workers:
        args.workers = [1, *args.workers]
    workers = sorted(set(args.workers))

    info = machine()
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="a3c-bench-slow-") as tmp:
        for mode in args.modes:
            base = None
            for n in workers:
                steps = n * args.steps_per_worker
                flags = ["--env", args.env, "--env-kwargs", f"latency={args.latency}", f"mode={mode}"]
                flags += ["--workers", str(n), "--envs-per-worker", "1", "--n-steps", str(args.n_steps)]
                flags += ["--total-steps", str(steps), "--checkpoint-every", "0"]
                t0 = time.time()
                s = run_train(flags, Path(tmp) / f"{mode}-w{n}")
                base = s["steps_per_s"] if n == 1 else base
                row = {
                    "mode": mode,
                    "workers": n,
                    "total_steps": s["total_steps"],
                    "steps_per_s": s["steps_per_s"],
                    "train_s": train_seconds(s),
                    "startup_s": s["startup_s"],
                    "wall_s": s["wall_time_s"],
                    "speedup": s["steps_per_s"] / base,
                    "efficiency": s["steps_per_s"] / base / n,
                    "command": s["command"],
                    "config": s["config"],
                    "loadavg_1m_after": os.getloadavg()[0],
                }
                results.append(row)
                print(
                    f"  {mode:5s} {n:2d} workers: {row['steps_per_s']:8.1f} steps/s, speed-up {row['speedup']:5.2f} "
                    f"({time.time() - t0:.0f} s)",
                    file=sys.stderr,
                )

    table = markdown_table(
        ["mode", "workers", "env steps", "steps/s", "speed-up", "ideal", "efficiency", "train s", "startup s", "load"],
        [
            [
                r["mode"],
                r["workers"],
                r["total_steps"],
                f"{r['steps_per_s']:.1f}",
                f"{r['speedup']:.2f}x",
                f"{r['workers']}x",
                f"{r['efficiency']:.0%}",
                f"{r['train_s']:.1f}",
                f"{r['startup_s']:.1f}" if r["startup_s"] is not None else "-",
                f"{r['loadavg_1m_after']:.1f}",
            ]
            for r in results
        ],
    )
    args.out.mkdir(parents=True, exist_ok=True)
    data = {
        "command": command_line(),
        "machine": info,
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "results": results,
    }
    (args.out / "slow_env.json").write_text(json.dumps(data, indent=2) + "\n")
    plot(results, workers, info["cores"] or 1, args.latency, args.out / "slow_env.png", args.dpi)
    print(table)
    print(
        f"\n{info['cores']} cores ({info['cpu']}), Python {info['python']}, torch {info['torch']}; "
        f"made by: {data['command']}; wrote {args.out / 'slow_env.json'} and {args.out / 'slow_env.png'}"
    )


if __name__ == "__main__":
    main()
