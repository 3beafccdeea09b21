"""Soak test: does a long run keep its memory flat and its disk use bounded? Runs ``python -m a3c.train`` for N
minutes and samples, every --sample-s seconds, the RSS and PSS of the main process and of every worker (from
/proc/<pid>/smaps_rollup), the sizes of the TensorBoard event files, episodes.csv and checkpoints/; then stops the run
with Ctrl-C (SIGINT), which writes summary.json (lost episodes, steps, episodes).

    nice -n 10 python -m scripts.soak --minutes 30 --workers 16 --out bench-out

Prints a table (one row a minute, then every 5), the memory slope per minute after the warm-up (least squares over
the samples from --warmup-min minutes on, and, separately, from --warmup-min minutes after every worker was up: on a
loaded machine start-up alone can take minutes) and the disk growth per hour; writes OUT/soak.json, .md and .png
(memory against time). ``--replot OUT/soak.json`` redoes the table and figure from saved samples. Linux only (/proc).
"""

from __future__ import annotations

if not __package__:  # run as a file (python scripts/NAME.py): the repository's root on sys.path
    import _root  # noqa: F401

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from scripts._common import markdown_table, save_results
from scripts.bench_memory import descendants, worker_pids

MB = 1024 * 1024


def memory_mb(pid: int) -> tuple[float, float]:
    """(RSS, PSS) of ``pid`` in MB."""
    rss = pss = None
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Rss:"):
            rss = int(line.split()[1]) / 1024
        elif line.startswith("Pss:"):
            pss = int(line.split()[1]) / 1024
    if rss is None or pss is None:
        raise RuntimeError(f"no Rss/Pss in /proc/{pid}/smaps_rollup")
    return rss, pss


def dir_bytes(paths) -> int:
    total = 0
    for p in paths:
        try:
            total += p.stat().st_size
        except OSError:  # a checkpoint replaced or pruned while we looked
            pass
    return total


def disk(run_dir: Path) -> dict[str, float]:
    return {
        "events_mb": dir_bytes(run_dir.rglob("events.out.tfevents.*")) / MB,
        "episodes_csv_mb": dir_bytes([run_dir / "episodes.csv"]) / MB,
        "checkpoints_mb": dir_bytes((run_dir / "checkpoints").glob("*.pt")) / MB,
        "checkpoint_files": len(list((run_dir / "checkpoints").glob("*.pt"))),
    }


def slope_per_min(t_s: list[float], y: list[float], after_s: float) -> float | None:
    """Least-squares slope of y against time, in units per minute, over the samples after ``after_s``."""
    t, v = np.asarray(t_s), np.asarray(y, dtype=float)
    keep = (t >= after_s) & np.isfinite(v)
    if keep.sum() < 3:
        return None
    return float(np.polyfit(t[keep] / 60.0, v[keep], 1)[0])


def sample(proc: subprocess.Popen, run_dir: Path, start: float) -> dict:
    main_rss, main_pss = memory_mb(proc.pid)
    workers = []
    for pid in worker_pids(proc.pid):
        try:
            workers.append(memory_mb(pid))
        except (OSError, RuntimeError):  # exited between the listing and the read
            pass
    return {
        "t_s": time.time() - start,
        "main_rss_mb": main_rss,
        "main_pss_mb": main_pss,
        "workers_found": len(workers),
        "worker_rss_mb": [w[0] for w in workers],
        "worker_pss_mb": [w[1] for w in workers],
        "processes": 1 + len(descendants(proc.pid)),
        **disk(run_dir),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0, help="how long the run trains")
    parser.add_argument("--workers", type=int, default=16, help="worker processes of the run")
    parser.add_argument("--env", default="CartPole-v1", help="gymnasium env id")
    parser.add_argument("--sample-s", type=float, default=5.0, help="seconds between samples")
    parser.add_argument("--warmup-min", type=float, default=2.0, help="minutes left out of the slopes")
    parser.add_argument("--out", type=Path, default=Path("bench-out"), help="directory for soak.json, .md, .png")
    parser.add_argument("--run-dir", type=Path, default=None, help="the run's directory (default: a temporary one)")
    parser.add_argument("--replot", type=Path, default=None, help="redo table and figure from this soak.json")
    parser.add_argument("train_args", nargs="*", help="extra a3c.train flags, after --")
    args = parser.parse_args()
    if args.replot is not None:
        saved = json.loads(args.replot.read_text())
        args.minutes, args.workers, args.env = saved["minutes"], saved["workers"], saved["env"]
        report(args, saved["train_command"], saved["samples"], saved["summary"], saved["final_disk"])
        return

    tmp = tempfile.TemporaryDirectory(prefix="a3c-soak-")
    run_dir = args.run_dir or Path(tmp.name) / "run"
    cmd = [
        sys.executable,
        "-m",
        "a3c.train",
        "--env",
        args.env,
        "--workers",
        str(args.workers),
        "--total-steps",
        str(10**12),
        "--run-dir",
        str(run_dir),
        *args.train_args,
    ]
    log = open(Path(tmp.name) / "train.log", "w")
    start = time.time()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log)
    samples: list[dict] = []
    try:
        while time.time() - start < args.minutes * 60:
            time.sleep(args.sample_s)
            if proc.poll() is not None:
                raise RuntimeError(f"the run exited early ({proc.returncode}): {Path(log.name).read_text()[-2000:]}")
            try:
                samples.append(sample(proc, run_dir, start))
            except (OSError, RuntimeError) as err:
                print(f"soak: sample skipped ({err})", file=sys.stderr)
                continue
            s = samples[-1]
            print(
                f"{s['t_s']:7.0f} s  main RSS {s['main_rss_mb']:6.1f} MB  workers {s['workers_found']}  "
                f"events {s['events_mb']:6.2f} MB  csv {s['episodes_csv_mb']:6.2f} MB  "
                f"ckpt {s['checkpoints_mb']:.2f} MB",
                file=sys.stderr,
                flush=True,
            )
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()
    summary = json.loads((run_dir / "summary.json").read_text())
    report(args, cmd, samples, summary, disk(run_dir))
    tmp.cleanup()


def report(args: argparse.Namespace, cmd: list[str], samples: list[dict], summary: dict, final_disk: dict) -> None:
    hours = samples[-1]["t_s"] / 3600
    warm = args.warmup_min * 60
    t = [s["t_s"] for s in samples]
    up = next((s["t_s"] for s in samples if s["workers_found"] >= args.workers), warm)  # every worker running
    worker_pss_mean = [float(np.mean(s["worker_pss_mb"])) if s["worker_pss_mb"] else np.nan for s in samples]
    worker_rss_max = [max(s["worker_rss_mb"], default=np.nan) for s in samples]
    slopes = {
        "main_rss_mb_per_min": slope_per_min(t, [s["main_rss_mb"] for s in samples], warm),
        "main_pss_mb_per_min": slope_per_min(t, [s["main_pss_mb"] for s in samples], warm),
        "worker_pss_mean_mb_per_min": slope_per_min(t, worker_pss_mean, warm),
        "worker_rss_max_mb_per_min": slope_per_min(t, worker_rss_max, warm),
        "workers_up_s": up,
        "main_rss_mb_per_min_after_up": slope_per_min(t, [s["main_rss_mb"] for s in samples], up + warm),
        "main_pss_mb_per_min_after_up": slope_per_min(t, [s["main_pss_mb"] for s in samples], up + warm),
        "worker_pss_mean_mb_per_min_after_up": slope_per_min(t, worker_pss_mean, up + warm),
    }
    rates = {
        "events_mb_per_hour": slope_per_min(t, [s["events_mb"] for s in samples], warm) * 60,
        "episodes_csv_mb_per_hour": slope_per_min(t, [s["episodes_csv_mb"] for s in samples], warm) * 60,
    }

    rows, next_row = [], 0.0
    for s, wp in zip(samples, worker_pss_mean, strict=True):
        if s["t_s"] + 1e-9 >= next_row or s is samples[-1]:
            rows.append(
                [
                    f"{s['t_s'] / 60:.1f}",
                    s["main_rss_mb"],
                    s["main_pss_mb"],
                    s["workers_found"],
                    wp,
                    max(s["worker_pss_mb"], default=None),
                    s["events_mb"],
                    s["episodes_csv_mb"],
                    s["checkpoints_mb"],
                    s["checkpoint_files"],
                ]
            )
            next_row += 60.0 if s["t_s"] < 600 else 300.0
    headers = [
        "min",
        "main RSS MB",
        "main PSS MB",
        "workers",
        "worker PSS MB (mean)",
        "worker PSS MB (max)",
        "events MB",
        "episodes.csv MB",
        "checkpoints MB",
        "checkpoint files",
    ]
    table = markdown_table(headers, rows)

    def fmt(v: float | None) -> str:
        return "-" if v is None else f"{v:+.3f}"

    table += (
        f"\n\nAfter the first {args.warmup_min:g} min (least squares over the samples): main RSS "
        f"{fmt(slopes['main_rss_mb_per_min'])} MB/min, main PSS {fmt(slopes['main_pss_mb_per_min'])} MB/min, "
        f"worker PSS (mean) {fmt(slopes['worker_pss_mean_mb_per_min'])} MB/min. Every worker was up at "
        f"{up / 60:.1f} min; from {args.warmup_min:g} min after that: main RSS "
        f"{fmt(slopes['main_rss_mb_per_min_after_up'])} MB/min, main PSS "
        f"{fmt(slopes['main_pss_mb_per_min_after_up'])} MB/min, worker PSS (mean) "
        f"{fmt(slopes['worker_pss_mean_mb_per_min_after_up'])} MB/min. TensorBoard events "
        f"{rates['events_mb_per_hour']:.1f} MB/hour, episodes.csv {rates['episodes_csv_mb_per_hour']:.1f} MB/hour "
        f"({summary['episodes'] / max(hours * 3600, 1e-9):,.0f} episodes/s, "
        f"{final_disk['episodes_csv_mb'] * MB / max(summary['episodes'], 1):.0f} bytes each). "
        f"Run: {summary['total_steps']:,} steps, {summary['episodes']:,} episodes, lost episodes "
        f"{summary['lost_episodes']}, restarts {summary['restarts']}, {summary['steps_per_s']:,.0f} steps/s; "
        f"{final_disk['checkpoint_files']} checkpoint files at the end ({final_disk['checkpoints_mb']:.2f} MB)."
    )

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (mem, dsk) = plt.subplots(1, 2, figsize=(12, 4.2))
    tm = np.asarray(t) / 60
    mem.plot(tm, [s["main_rss_mb"] for s in samples], label="main RSS")
    mem.plot(tm, [s["main_pss_mb"] for s in samples], label="main PSS")
    mem.plot(tm, worker_pss_mean, label="worker PSS (mean)")
    mem.plot(tm, worker_rss_max, label="worker RSS (max)", ls="--")
    mem.axvline(args.warmup_min, color="grey", lw=0.8, ls=":")
    mem.axvline(up / 60 + args.warmup_min, color="black", lw=0.8, ls=":")
    mem.set_xlabel("minutes")
    mem.set_ylabel("MB")
    mem.set_ylim(bottom=0)
    mem.set_title(f"memory ({args.workers} workers, {args.env})")
    mem.legend(fontsize=8)
    dsk.plot(tm, [s["events_mb"] for s in samples], label="TensorBoard events")
    dsk.plot(tm, [s["episodes_csv_mb"] for s in samples], label="episodes.csv")
    dsk.plot(tm, [s["checkpoints_mb"] for s in samples], label="checkpoints/")
    dsk.set_xlabel("minutes")
    dsk.set_ylabel("MB")
    dsk.set_title("disk")
    dsk.legend(fontsize=8)
    fig.tight_layout()
    data = {
        "minutes": args.minutes,
        "workers": args.workers,
        "env": args.env,
        "train_command": cmd,
        "slopes_after_warmup": slopes,
        "disk_rates": rates,
        "summary": summary,
        "final_disk": final_disk,
        "samples": samples,
    }
    save_results(args.out, "soak", data, table, fig)


if __name__ == "__main__":
    main()
