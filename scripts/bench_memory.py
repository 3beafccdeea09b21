"""Memory and startup per start method: PSS (proportional set size, shared pages split between the processes that
share them) of each worker process with N workers, read from /proc/<pid>/smaps_rollup while the run trains, and
summary.json's startup_s (command start to every worker's first env step).

    python -m scripts.bench_memory --workers 16 --methods fork forkserver spawn --out bench-out

Prints a markdown table; writes OUT/memory.json, .md and .png. Linux only (/proc).
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
from pathlib import Path

from scripts._common import markdown_table, save_results


def children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return out


def descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        kids = children(todo.pop())
        found += kids
        todo += kids
    return found


def pss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no Pss in /proc/{pid}/smaps_rollup")


def worker_pids(main_pid: int) -> list[int]:
    """The workers are the leaf processes below the main one (the forkserver, when there is one, is their parent;
    multiprocessing's resource tracker is a leaf too and is left out by its command line)."""
    pids = descendants(main_pid)
    leaves = [p for p in pids if not children(p)]
    out = []
    for p in leaves:
        try:
            cmd = Path(f"/proc/{p}/cmdline").read_bytes()
        except OSError:
            continue
        if b"resource_tracker" not in cmd:
            out.append(p)
    return out


def all_workers_logged(episodes_csv: Path, workers: int) -> bool:
    try:
        with open(episodes_csv) as f:
            ranks = {line.split(",", 1)[0] for line in f.readlines()[1:]}
    except OSError:
        return False
    return len(ranks) >= workers


def measure(method: str, workers: int, tmp: Path) -> dict:
    run_dir = tmp / method
    cmd = [
        sys.executable,
        "-m",
        "a3c.train",
        "--env",
        "CartPole-v1",
        "--workers",
        str(workers),
        "--total-steps",
        "100000000",
        "--start-method",
        method,
        "--run-dir",
        str(run_dir),
        "--checkpoint-every",
        "0",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 240
        pids: list[int] = []
        while time.time() < deadline:  # wait for every worker to exist and to have trained a while
            pids = worker_pids(proc.pid)
            if len(pids) == workers:
                break
            time.sleep(0.5)
        # past startup: every worker has finished an episode (so it has stepped and updated), then a few seconds more
        while time.time() < deadline and not all_workers_logged(run_dir / "episodes.csv", workers):
            time.sleep(0.5)
        time.sleep(3.0)
        pids = worker_pids(proc.pid)
        pss = [pss_mb(p) for p in pids]
        main_pss = pss_mb(proc.pid)
    finally:
        proc.send_signal(2)  # SIGINT: orderly stop, which writes summary.json
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    summary = json.loads((run_dir / "summary.json").read_text())
    return {
        "method": method,
        "workers_found": len(pss),
        "pss_mb_mean": statistics.fmean(pss) if pss else None,
        "pss_mb_max": max(pss, default=None),
        "main_pss_mb": main_pss,
        "startup_s": summary.get("startup_s"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--methods", nargs="+", default=["fork", "forkserver", "spawn"])
    parser.add_argument("--out", type=Path, default=Path("bench-out"))
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="a3c-memory-"))
    results = [measure(m, args.workers, tmp) for m in args.methods]
    rows = [
        [r["method"], r["workers_found"], r["pss_mb_mean"], r["pss_mb_max"], r["main_pss_mb"], r["startup_s"]]
        for r in results
    ]
    table = markdown_table(["start method", "workers", "PSS/worker MB (mean)", "max MB", "main MB", "startup s"], rows)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(8, 3.2), dpi=80)
    names = [r["method"] for r in results]
    a.bar(names, [r["pss_mb_mean"] or 0 for r in results])
    a.set_ylabel("PSS per worker, MB")
    b.bar(names, [r["startup_s"] or 0 for r in results], color="tab:green")
    b.set_ylabel("startup s")
    fig.suptitle(f"{args.workers} workers")
    fig.tight_layout()
    save_results(args.out, "memory", {"workers": args.workers, "results": results}, table, fig)


if __name__ == "__main__":
    main()
