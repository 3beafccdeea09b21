"""Start-up against the cost of importing torch and gymnasium, measured in turn in one run: what a user waits for from
the command to the first env step (summary.json's startup_s: from the process's start, as the OS recorded it, to
the moment the last worker takes its first step; workers wait at a start line, so every worker steps then), against
``python -c "import torch, gymnasium"``, timed two ways: the command's wall time (start to exit, as ``time`` shows
it) and, stricter, from its process's start to the end of the imports (no interpreter shutdown).

    python -m scripts.bench_startup --workers 2 16 --rounds 5 --out bench-out

Each round runs the import command, then ``python -m a3c.train --env ENV --workers N`` for each N (a few thousand
steps), so every ratio is a pair measured within seconds of each other. Prints a markdown table (medians, and the
median of the per-round ratios); writes OUT/startup.json, .md and .png. With ``PYTHONPATH`` pointing at another
checkout it measures that one's a3c (before 2026-12-02 its startup_s began at ``main``, ~0.2 s after the process).
"""

from __future__ import annotations

if not __package__:  # run as a file (python scripts/NAME.py): the repository's root on sys.path
    import _root  # noqa: F401

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scripts._common import alternate, markdown_table, save_results

# Prints the time from its own process's start (/proc/self/stat, against the boot-time clock: the origin of
# a3c.train's startup_s) to the end of the imports.
IMPORT_PROBE = """
import torch, gymnasium
import os, time
with open("/proc/self/stat") as f:
    ticks = int(f.read().rsplit(")", 1)[1].split()[19])
print(time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK"))
"""


def import_s() -> tuple[float, float]:
    """(the command's wall time, its process's start to the end of the imports)."""
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", IMPORT_PROBE], capture_output=True, text=True, check=True)
    return time.perf_counter() - t0, float(out.stdout.strip().splitlines()[-1])


def a3c_startup_s(env: str, workers: int, run_dir: Path, extra: list[str]) -> float:
    # twenty updates a worker at the defaults: past the first step, soon done. (Three were too few on the machine of
    # 2026-12-04, with the update kernel and without: with 16 workers on 2 cores the first ones scheduled used the
    # budget up within a scheduler period, before the last had stepped, and such a run has no startup_s.)
    steps = workers * 8 * 5 * 20
    cmd = [sys.executable, "-m", "a3c.train", "--env", env, "--workers", str(workers), "--total-steps", str(steps)]
    cmd += ["--run-dir", str(run_dir), *extra]
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=True, timeout=600)
    startup = json.loads((run_dir / "summary.json").read_text())["startup_s"]
    if startup is None:
        raise RuntimeError(f"{run_dir}: no startup_s (a worker never stepped)")
    return float(startup)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--workers", type=int, nargs="+", default=[2, 16])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--a3c-flags", default="", help="more flags for every a3c.train run, as one string")
    parser.add_argument("--out", type=Path, default=Path("bench-out"))
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="a3c-startup-"))

    def startup(n: int) -> Callable[[int], float]:
        def trial(r: int) -> float:
            s = a3c_startup_s(args.env, n, tmp / f"r{r}-w{n}", args.a3c_flags.split())
            print(f"round {r + 1}: {n} workers {s:.2f} s", file=sys.stderr)
            return s

        return trial

    # each round: the import command, then a3c with each worker count (alternating, as the load drifts)
    trials: dict[str, Callable[[int], Any]] = {"import": lambda r: import_s()}
    trials.update({str(n): startup(n) for n in args.workers})
    runs = alternate(args.rounds, trials)
    rounds = [
        {
            "import_wall_s": runs["import"][r][0],
            "import_s": runs["import"][r][1],
            "a3c_s": {n: runs[str(n)][r] for n in args.workers},
        }
        for r in range(args.rounds)
    ]
    walls = [r["import_wall_s"] for r in rounds]
    imports = [r["import_s"] for r in rounds]
    rows, results = [], []
    for n in args.workers:
        times = [r["a3c_s"][n] for r in rounds]
        ratios = [r["a3c_s"][n] / r["import_wall_s"] for r in rounds]
        strict = [r["a3c_s"][n] / r["import_s"] for r in rounds]
        results.append({"workers": n, "startup_s": times, "ratios": ratios, "ratios_to_imports_done": strict})
        rows.append(
            [
                n,
                f"{statistics.median(times):.2f}",
                f"{statistics.median(walls):.2f}",
                f"**{statistics.median(ratios):.2f}x**",
                ", ".join(f"{x:.2f}" for x in ratios),
                f"{statistics.median(imports):.2f}",
                f"{statistics.median(strict):.2f}x",
            ]
        )
    table = markdown_table(
        [
            "workers",
            "a3c: command to first step, s",
            "python -c 'import torch, gymnasium', s",
            "ratio",
            "ratio each round",
            "its imports done, s",
            "ratio to that",
        ],
        rows,
    )
    print(table)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.2), dpi=80)
    labels = ["python -c 'import torch, gymnasium'"] + [f"a3c, {n} workers" for n in args.workers]
    ax.boxplot([walls] + [res["startup_s"] for res in results], tick_labels=labels, orientation="horizontal")
    ax.set_xlabel("seconds: the command's wall time; a3c's to its first env step")
    ax.set_title(f"{args.env}: command to the first env step ({args.rounds} rounds)")
    fig.tight_layout()
    data = {
        "env": args.env,
        "rounds": args.rounds,
        "import_wall_s": walls,
        "import_s": imports,
        "results": results,
        "a3c_flags": args.a3c_flags,
    }
    save_results(args.out, "startup", data, table, fig)


if __name__ == "__main__":
    main()
