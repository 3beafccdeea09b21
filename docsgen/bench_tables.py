"""The benchmark pages' tables, rendered from the JSON the benchmark scripts wrote (docs/data/): no number on those
pages is copied by hand, and rerunning a benchmark and keeping its JSON there updates its page. A page asks for a
table with a marker line, ``<!-- bench-table: KIND data/FILE.json [KEY] -->`` (KEY: one entry of a JSON that holds
several runs); hooks.py replaces the marker with ``render(KIND, data)``.

The kinds, one per script's output: ``throughput`` (scripts/bench_throughput.py), ``vs-sb3``
(scripts/bench_vs_sb3.py), ``suite`` and ``suite-seeds`` (scripts/bench_suite.py), ``atari`` (scripts/bench_atari.py),
``pong`` (scripts/bench_atari_learning.py plot), ``threads`` (scripts/bench_threads.py), ``solve-seeds``
(scripts/bench_solve_seeds.py), ``objective-runs`` (scripts/bench_ppo.py); and ``objective-cost``, which takes
several of bench_ppo's files at once (``data/A.json,data/B.json``) and sets the objectives side by side, seed by
seed. bench_ppo, bench_vs_sb3, bench_suite and bench_solve_seeds are gone (the benchmark driver, scripts/bench.py,
runs what they ran; its store's tables: results_store.py); the JSON they wrote is kept, rendered here."""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

MARKER = re.compile(
    r"^<!-- bench-table: (?P<kind>[a-z0-9-]+) (?P<file>\S+?\.json(?:,\S+?\.json)*)(?: (?P<key>\S+))? -->$", re.M
)
ATARI_FRAME_SKIP = 4  # one agent step of ALE with the standard preprocessing is 4 frames (scripts/bench_atari.py)


def _n(x: float, digits: int = 0) -> str:
    """A number as the pages write it: thousands separated, ``digits`` decimals."""
    return f"{x:,.{digits}f}"


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _command(data: dict[str, Any]) -> str:
    """The command that made ``data``, its output folder (the benchmark machine's path) shown as OUT and the folder of
    any file it read from there as RUNS."""
    if not data.get("command"):
        return ""
    command = re.sub(r"--out \S+", "--out OUT", data["command"])
    command = re.sub(r"python \S*/(scripts/\S+\.py)", r"python \1", command)
    # the input files of a merge (--merge, --from-json): their folder on the benchmark machine shown as RUNS
    command = re.sub(r"(?<= )/\S+", lambda m: "RUNS/" + "/".join(Path(m[0]).parts[-2:]), command)
    return f"Made by `{command}`."


def throughput(data: dict[str, Any]) -> str:
    """scripts/bench_throughput.py: a3c's steps/s against the raw loop's, round by round, per update path."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in data["results"]:
        name = {"on": "C kernel", "off": "numpy"}.get(row.get("update_kernel", ""), "a3c")
        groups.setdefault(f"{name}, {row['workers']} workers x {row['envs_per_worker']} envs", []).append(row)
    rows = []
    for name, runs in groups.items():
        ratios = [100 * r["ratio_to_raw"] for r in runs]
        speeds = [r["steps_per_s"] for r in runs]
        raw = [r["raw_limit"] for r in runs]
        rows.append(
            [
                name,
                f"{_n(min(speeds))}-{_n(max(speeds))}",
                f"{_n(min(raw))}-{_n(max(raw))}",
                ", ".join(f"{x:.0f}" for x in ratios) + "%",
                f"**{statistics.median(ratios):.0f}%**",
                f"{min(ratios):.0f}%",
            ]
        )
    header = ["update", f"a3c steps/s ({len(runs)} rounds)", "raw loop steps/s", "of the raw loop, each round"]
    return _table([*header, "median", "lowest"], rows)


def vs_sb3(data: dict[str, Any]) -> str:
    """scripts/bench_vs_sb3.py: steps/s and time to the threshold, a3c against SB3's A2C, and their ratios."""
    rows = []
    for trainer, label in (("a3c", "a3c"), ("sb3", "SB3 A2C")):
        runs, solves = data["throughput"][trainer], data["solve"][trainer]
        times = [s["solved_at_s"] for s in solves if s["solved_at_s"] is not None]
        rows.append(
            [
                label,
                f"{_n(data['median_throughput'][trainer])} ({', '.join(_n(x) for x in runs)})",
                f"{data['median_solve_s'][trainer]:.1f} ({', '.join(f'{t:.1f}' for t in times)})",
                f"{len(times)}/{len(solves)}",
                ", ".join(_n(s["final_mean100"], 1) for s in solves),
            ]
        )
    speed = data["median_throughput"]["a3c"] / data["median_throughput"]["sb3"]
    time = data["median_solve_s"]["a3c"] / data["median_solve_s"]["sb3"]
    rows.append(["a3c / SB3", f"**{speed:.1f}x**", f"**{time:.2f}x**", "", ""])
    header = ["trainer", "steps/s, median (runs)", "s to a mean of 475, median (seeds)", "seeds solved"]
    return _table([*header, "final 100-episode mean per seed"], rows)


def _mean_std(agg: dict[str, Any]) -> str:
    return f"{_n(agg['final_mean_100'], 1)} ± {_n(agg['final_std'], 1)}"


def suite(data: dict[str, Any]) -> str:
    """scripts/bench_suite.py: per env, the final 100-episode mean over seeds, seeds at the threshold and the median
    time to it, steps/s; a3c beside SB3's A2C where the run had both."""
    trainers = [t for t in ("a3c", "sb3") if any(t in agg for agg in data["aggregate"].values())]
    label = {"a3c": "a3c", "sb3": "SB3 A2C"}
    header = ["env (steps)"]
    header += [f"{label[t]} final" for t in trainers]
    header += [f"{label[t]}: seeds solved, median s" for t in trainers]
    header += [f"{label[t]} steps/s" for t in trainers]
    rows = []
    for env, agg in data["aggregate"].items():
        row = [f"{env} ({_n(data['budgets'][env] / 1e6, 1)}M)" if env in data.get("budgets", {}) else env]
        row += [_mean_std(agg[t]) for t in trainers]
        for t in trainers:
            s = agg[t]["median_s_to_threshold"]
            row.append(f"{agg[t]['reached']}, {s:.1f} s" if s is not None else agg[t]["reached"])
        row += [_n(agg[t]["median_steps_per_s"]) for t in trainers]
        rows.append(row)
    return _table(header, rows)


def suite_seeds(data: dict[str, Any]) -> str:
    """scripts/bench_suite.py: per env, each seed's final 100-episode mean and the seeds at the threshold."""
    rows = []
    for env, by_trainer in data["runs"].items():
        for trainer, runs in by_trainer.items():
            if not runs:  # a trainer the run left out (--trainers a3c)
                continue
            finals = ", ".join(_n(r["final_mean_100"], 1) for r in runs)
            reached = sum(r["reached_at_step"] is not None for r in runs)
            speeds = ", ".join(_n(r["steps_per_s"]) for r in runs)
            seconds = ", ".join(_n(r["steps"] / r["steps_per_s"]) for r in runs)
            label = {"sb3": "SB3 A2C"}.get(trainer, trainer)
            rows.append([env, label, finals, f"{reached}/{len(runs)}", speeds, seconds])
    header = ["env", "trainer", "final 100-episode mean, per seed", "seeds solved", "steps/s, per seed"]
    header.append("training s, per seed")
    return _table(header, rows)


def atari(data: dict[str, Any]) -> str:
    """scripts/bench_atari.py: a3c's frames/s per variant against SB3's algorithm with rl-zoo3's Atari settings (A2C
    where the data does not say: the runs before it recorded which)."""
    sb3 = data["sb3_steps_per_s"]
    threads = data.get("sb3_threads")
    rows = []
    for variant, runs in data["a3c_steps_per_s"].items():
        frames = [ATARI_FRAME_SKIP * x for x in runs]
        rows.append(
            [
                f"a3c, {variant}" if variant == "preset" else f"a3c, preset + `{variant}`",
                f"{_n(statistics.median(frames))} ({', '.join(_n(x) for x in frames)})",
                f"**{data['ratio'][variant]:.1f}x**",
            ]
        )
    frames = [ATARI_FRAME_SKIP * x for x in sb3]
    sb3_name = f"SB3 {data.get('sb3_algo', 'a2c').upper()}" + (
        f", {threads} thread{'s' if threads > 1 else ''}" if threads else ""
    )
    rows.append([sb3_name, f"{_n(statistics.median(frames))} ({', '.join(_n(x) for x in frames)})", "1x"])
    return _table([f"{data['env']}, {_n(data['steps'])} steps a run", "frames/s, median (runs)", "of SB3's"], rows)


def pong(data: dict[str, Any]) -> str:
    """scripts/bench_atari_learning.py plot: per protocol (the env kwargs a run was given, if any) and seed, the final
    100-game training mean, when it first reached 18, and the wall time."""
    groups: dict[str, dict[str, dict[str, Any]]] = {}
    for name, summary in data["summaries"].items():
        m = re.fullmatch(r"a3c \((?P<workers>\d+) workers, seed (?P<seed>\d+)(?:, (?P<variant>.+))?\)", name)
        if m is None:
            raise ValueError(f"unexpected run name {name!r} in {data.get('command')!r}")
        groups.setdefault(m["variant"] or "", {})[m["seed"]] = summary
    seeds = sorted({seed for runs in groups.values() for seed in runs}, key=int)
    rows = []
    for variant, runs in groups.items():
        label = f"`{variant}`" if variant else "ALE's defaults (sticky actions)"

        def cells(value: Callable[[dict[str, Any]], str], runs: dict[str, dict[str, Any]] = runs) -> list[str]:
            return [value(runs[seed]) if seed in runs else "" for seed in seeds]

        def at_18(s: dict[str, Any]) -> str:
            reached = s["reached"].get("18")
            return f"{reached['frames'] / 1e6:.1f}M" if reached else "not reached"

        rows.append([f"**{label}**: final 100-game mean", *cells(lambda s: f"**{s['final_mean']:+.1f}**")])
        rows.append(["best 100-game mean", *cells(lambda s: f"{s['best_mean']:+.1f}")])
        rows.append(["first mean >= 18 at (frames)", *cells(at_18)])
        rows.append(
            ["frames run; wall time", *cells(lambda s: f"{s['frames'] / 1e6:.1f}M; {s['wall_s'] / 60:.0f} min")]
        )
    return _table(["a3c, 2 workers", *(f"seed {seed}" for seed in seeds)], rows)


def threads(data: dict[str, Any]) -> str:
    """scripts/bench_threads.py: steps/s of two checkouts by network width and rollout length, and their ratio."""
    first, last = list(data["checkouts"])[0], list(data["checkouts"])[-1]
    rows = [
        [str(r["width"]), str(r["n_steps"]), _n(r[first]), _n(r[last]), f"**{r[last] / r[first]:.2f}x**"]
        for r in data["results"]
    ]
    return _table(["width", "n_steps", f"{first}: steps/s", f"{last}: steps/s", f"{last} / {first}"], rows)


def solve_seeds(data: dict[str, Any]) -> str:
    """scripts/bench_solve_seeds.py: each seed's --stop-when-solved run: solved, when, how far the workers ran past
    the solve, the checkpoint's step, the mean reported and the checkpoint's evaluation."""
    rows = []
    for r in data["runs"]:
        solved = r["stop_reason"] == "solved" and "solved at step" in r["final_line"]
        past = r["checkpoint_step"] - r["solved_at_step"] if r["solved_at_step"] is not None else None
        rows.append(
            [
                str(r["seed"]),
                "yes" if solved else "**no**",
                "-" if r["solved_at_s"] is None else f"{r['solved_at_s']:.1f}",
                "-" if r["steps_past_solve"] is None else _n(r["steps_past_solve"]),
                "-" if past is None else _n(past),
                f"{r['mean_return_100']:.1f}",
                f"{r['eval_mean_return']:.1f}",
            ]
        )
    header = ["seed", "solved", "solved at (s)", "steps run past the solve", "checkpoint step - solve step"]
    return _table([*header, "mean (last 100) reported", "latest.pt, 10 episodes"], rows)


OBJECTIVE_LABEL = {"a3c": "A3C", "ppo": "PPO"}


def _objective(run: dict[str, Any]) -> str:
    """The objective a run of scripts/bench_ppo.py trained with: its ``algo``, or SB3's trainer for SB3's arms."""
    if "algo" in run:
        return OBJECTIVE_LABEL.get(run["algo"], run["algo"])
    return "SB3 " + run["arm"].removeprefix("sb3-").upper()


def objective_runs(data: dict[str, Any]) -> str:
    """scripts/bench_ppo.py: each run of each arm (a3c.train's flags, or SB3's PPO) and its objective: final and best
    100-episode training mean, the step it first reached the threshold, wall time and steps/s."""
    rows = [
        [
            r["arm"],
            _objective(r),
            str(r["seed"]),
            f"**{_n(r['final_mean_100'], 1)}**",
            _n(r["best_mean_100"], 1),
            "-" if r["reached_at_step"] is None else _n(r["reached_at_step"]),
            _n(r["wall_s"]),
            _n(r["steps_per_s"]),
        ]
        for r in data["runs"]
    ]
    header = ["arm", "objective", "seed", "final mean100", "best mean100", f"step to {data['threshold']:g}"]
    return _table([*header, "wall s", "steps/s"], rows)


def objective_pairs(data: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """The (A3C, PPO) runs of a3c.train on the same seed in one file of scripts/bench_ppo.py, the first of each."""
    pairs = []
    for seed in dict.fromkeys(r["seed"] for r in data["runs"]):
        first: dict[str, dict[str, Any]] = {}
        for r in data["runs"]:
            if r["seed"] == seed and r.get("algo") in ("a3c", "ppo"):
                first.setdefault(r["algo"], r)
        if len(first) == 2:
            pairs.append((first["a3c"], first["ppo"]))
    return pairs


def objective_cost(datas: list[dict[str, Any]]) -> str:
    """Several files of scripts/bench_ppo.py: per env and seed, A3C's objective beside PPO's, their final
    100-episode training means and steps/s, and PPO's steps/s as a fraction of A3C's."""
    rows = []
    for data in datas:
        for a3c, ppo in objective_pairs(data):
            rows.append(
                [
                    f"`{data['env']}` ({data['steps'] / 1e6:g}M)",
                    str(a3c["seed"]),
                    _n(a3c["final_mean_100"], 1),
                    _n(ppo["final_mean_100"], 1),
                    _n(a3c["steps_per_s"]),
                    _n(ppo["steps_per_s"]),
                    f"**{ppo['steps_per_s'] / a3c['steps_per_s']:.2f}x**",
                ]
            )
    header = ["env (steps)", "seed", "A3C final mean100", "PPO final mean100", "A3C steps/s", "PPO steps/s"]
    return _table([*header, "PPO's steps/s of A3C's"], rows)


KINDS: dict[str, Callable[[dict[str, Any]], str]] = {
    "threads": threads,
    "solve-seeds": solve_seeds,
    "throughput": throughput,
    "vs-sb3": vs_sb3,
    "suite": suite,
    "suite-seeds": suite_seeds,
    "atari": atari,
    "pong": pong,
    "objective-runs": objective_runs,
}
MULTI_KINDS: dict[str, Callable[[list[dict[str, Any]]], str]] = {"objective-cost": objective_cost}


def render(kind: str, path: Path | list[Path], key: str | None = None) -> str:
    """The table of ``kind`` from the JSON at ``path`` (its entry ``key``, if given), and the command that made it;
    a kind of MULTI_KINDS takes a list of paths and says the command of each."""
    paths = path if isinstance(path, list) else [path]
    if kind not in KINDS and kind not in MULTI_KINDS:
        raise ValueError(f"unknown bench-table kind {kind!r} (known: {', '.join([*KINDS, *MULTI_KINDS])})")
    datas = [json.loads(p.read_text()) for p in paths]
    if key is not None:
        datas = [data[key] for data in datas]
    if kind in MULTI_KINDS:
        made = [c.removeprefix("Made by ").removesuffix(".") for c in map(_command, datas) if c]
        commands = f"Made by {'; '.join(made)}." if made else ""
        return "\n\n".join(p for p in (MULTI_KINDS[kind](datas), commands) if p)
    if len(datas) != 1:
        raise ValueError(f"bench-table kind {kind!r} takes one file (got {len(datas)})")
    return "\n\n".join(p for p in (KINDS[kind](datas[0]), _command(datas[0])) if p)


def marker_paths(files: str, page_dir: Path) -> Path | list[Path]:
    """A marker's file part as paths (relative to the page's folder): one path, or a list for ``A.json,B.json``."""
    paths = [page_dir / f for f in files.split(",")]
    return paths if len(paths) > 1 else paths[0]


def expand(markdown: str, page_dir: Path) -> str:
    """``markdown`` with every bench-table marker replaced by its table (paths relative to the page's folder)."""

    def table(m: re.Match[str]) -> str:
        return render(m["kind"], marker_paths(m["file"], page_dir), m["key"])

    return MARKER.sub(table, markdown)
