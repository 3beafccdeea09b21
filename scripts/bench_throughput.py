"""Throughput: a3c's env steps/s against the number of workers and envs per worker, and in the same run the
raw-loop limit (env.step + the acting forward pass only, one process per core, see raw_loop.py).

    python -m scripts.bench_throughput --workers 1 2 4 8 16 --envs-per-worker 1 4 8 16 --out bench-out

The cost of evaluation during training: ``--eval-every 0 50000`` runs each configuration without and with it, one
after the other (0: off, the default).

The worker's update kernel (a3c.learn.update.kernel): ``--update-kernel on off`` runs each configuration with the
compiled kernel and with the closed-form numpy update it stands in for (``A3C_UPDATE_KERNEL=0``), in turn within each
round: the two against the same raw loop. The table names the update path each run took (summary.json's
``update_path``, a3c.learn.update.paths).

``--repeats N`` measures each K's round (raw loop, the a3c runs, raw loop) N times in turn and adds a table of each
configuration's median and lowest share of the raw loop over the rounds: on a shared machine the raw loop itself moves
by 10-20% from minute to minute, so one round's ratio is one draw of that noise.

Prints a markdown table; writes OUT/throughput.json, .md and .png.
"""

from __future__ import annotations

if not __package__:  # run as a file (python scripts/NAME.py): the repository's root on sys.path
    import _root  # noqa: F401

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from a3c.learn.update.kernel import KERNEL_ENV
from scripts._common import markdown_table, run_train, save_results
from scripts.raw_loop import raw_loop_steps_per_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    parser.add_argument("--envs-per-worker", type=int, nargs="+", default=[1, 4, 8, 16])  # 8: the default
    parser.add_argument("--steps", type=int, default=120_000, help="env steps per a3c run (at least 30 rollouts)")
    parser.add_argument("--raw-seconds", type=float, default=5.0)
    parser.add_argument(
        "--eval-every", type=int, nargs="+", default=[0], help="a3c's --eval-every for each run (0: off); several: each"
    )
    parser.add_argument("--eval-episodes", type=int, default=10)
    parser.add_argument(
        "--update-kernel",
        nargs="+",
        choices=["on", "off"],
        default=["on"],
        help="the worker's compiled update kernel (off: the numpy update); several: each, in turn",
    )
    parser.add_argument(
        "--repeats", type=int, default=1, help="rounds per K, each with its own raw loop before and after"
    )
    parser.add_argument("--out", type=Path, default=Path("bench-out"))
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="a3c-throughput-"))
    raw: dict[int, list[float]] = {}  # per K, each round's mean of its raw loop before and after
    results = []
    try:
        for k, repeat in ((k, r) for k in args.envs_per_worker for r in range(args.repeats)):
            # the raw loop is measured right before and right after this K's a3c runs, and averaged: a change in
            # the machine's load during the runs moves the limit and the runs alike
            before = raw_loop_steps_per_s(args.env, envs=k, seconds=args.raw_seconds)
            runs = []
            configurations = [(w, e, u) for w in args.workers for e in args.eval_every for u in args.update_kernel]
            for w, every, kernel in configurations:
                steps = max(args.steps, w * k * 5 * 30)
                s = run_train(
                    [
                        "--env",
                        args.env,
                        "--workers",
                        str(w),
                        "--envs-per-worker",
                        str(k),
                        "--total-steps",
                        str(steps),
                        "--checkpoint-every",
                        "0",
                        "--eval-every",
                        str(every),
                        "--eval-episodes",
                        str(args.eval_episodes),
                    ],
                    tmp / f"w{w}k{k}e{every}{kernel}r{repeat}",
                    env={**os.environ, KERNEL_ENV: "1" if kernel == "on" else "0"},
                )
                runs.append(
                    {
                        "workers": w,
                        "envs_per_worker": k,
                        "eval_every": every,
                        "update_kernel": kernel,
                        "update_path": s.get("update_path"),  # the update path the run reports it took
                        "evaluations": s.get("evaluations", 0),
                        "steps_per_s": s["steps_per_s"],
                        "startup_s": s["startup_s"],
                    }
                )
                print(
                    f"workers={w} envs={k} eval-every={every} kernel={kernel}: {s['steps_per_s']:,.0f} steps/s",
                    file=sys.stderr,
                    flush=True,
                )
            after = raw_loop_steps_per_s(args.env, envs=k, seconds=args.raw_seconds)
            raw.setdefault(k, []).append((before + after) / 2)
            print(f"raw loop, {k} envs: {before:,.0f} before, {after:,.0f} after", file=sys.stderr, flush=True)
            for r in runs:
                results.append(
                    {
                        **r,
                        "repeat": repeat,
                        "raw_limit": raw[k][-1],
                        "raw_before": before,
                        "raw_after": after,
                        "ratio_to_raw": r["steps_per_s"] / raw[k][-1],
                    }
                )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    rows = [
        [
            r["repeat"] + 1,
            r["workers"],
            r["envs_per_worker"],
            r["eval_every"] or "off",
            # what was asked, and what the run says it took where that differs (asked "on", but not built)
            f"{r['update_kernel']} ({r['update_path']})",
            r["evaluations"],
            r["steps_per_s"],
            r["raw_limit"],
            f"{r['ratio_to_raw']:.0%}",
            r["startup_s"],
        ]
        for r in results
    ]
    table = markdown_table(
        [
            "round",
            "workers",
            "envs/worker",
            "eval every",
            "update kernel",
            "evaluations",
            "a3c steps/s",
            "raw-loop limit",
            "of limit",
            "startup s",
        ],
        rows,
    )

    summary = []

    def key(r: dict) -> tuple:
        return r["workers"], r["envs_per_worker"], r["eval_every"], r["update_kernel"]

    for w, k, every, kernel in dict.fromkeys(key(r) for r in results):
        ratios = [r["ratio_to_raw"] for r in results if key(r) == (w, k, every, kernel)]
        summary.append(
            {
                "workers": w,
                "envs_per_worker": k,
                "eval_every": every,
                "update_kernel": kernel,
                "rounds": len(ratios),
                "median_ratio_to_raw": statistics.median(ratios),
                "min_ratio_to_raw": min(ratios),
                "max_ratio_to_raw": max(ratios),
            }
        )
    if args.repeats > 1:
        table += "\n\n" + markdown_table(
            ["workers", "envs/worker", "eval every", "update kernel", "rounds", "median of limit", "lowest", "highest"],
            [
                [
                    x["workers"],
                    x["envs_per_worker"],
                    x["eval_every"] or "off",
                    x["update_kernel"],
                    x["rounds"],
                    f"{x['median_ratio_to_raw']:.0%}",
                    f"{x['min_ratio_to_raw']:.0%}",
                    f"{x['max_ratio_to_raw']:.0%}",
                ]
                for x in summary
            ],
        )

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4), dpi=80)
    for k in args.envs_per_worker:
        for i, (every, kernel) in enumerate((e, u) for e in args.eval_every for u in args.update_kernel):
            rs = [
                r
                for r in results
                if (r["envs_per_worker"], r["eval_every"], r["update_kernel"], r["repeat"]) == (k, every, kernel, 0)
            ]
            label = f"a3c, {k} envs" + (f", eval every {every:,}" if every else "") + f", kernel {kernel}"
            line = ax.plot(
                [r["workers"] for r in rs],
                [r["steps_per_s"] for r in rs],
                marker="o",
                ls="-" if i == 0 else ":",
                label=label,
            )
        ax.axhline(
            statistics.median(raw[k]), color=line[0].get_color(), ls="--", lw=0.8, label=f"raw-loop limit, {k} envs"
        )
    ax.set_xscale("log", base=2)
    ax.set_xlabel("workers")
    ax.set_ylabel("env steps/s")
    ax.set_title(f"{args.env} throughput ({os.cpu_count()} cores)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    save_results(args.out, "throughput", {"results": results, "summary": summary, "raw_limit": raw}, table, fig)


if __name__ == "__main__":
    main()
