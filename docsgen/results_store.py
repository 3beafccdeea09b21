"""The tables and figures of the results store (docs/data/results.jsonl, written by ``python -m scripts.bench run``;
its row: scripts/benchmark/store.py), generated when the site is built, so that a run appended to the store is on
its page at the next build.

A page asks for a table with a marker line, filters optional (comma-separated values):

    <!-- bench-table: store ../data/results.jsonl env=HalfCheetah-v5,Hopper-v5 arm=a3c,sb3-a2c budget=1000000 -->
    <!-- bench-table: store ../data/results.jsonl view=seeds env=Hopper-v5 -->
    <!-- bench-table: store ../data/results.jsonl env=LunarLander-v3 seed=501,502,503 -->

The default view is env x arm: the final 100-episode training mean (mean ± std over seeds), the seeds, the seeds that
reached the threshold, the median wall time and steps/s; ``view=seeds`` shows each run; ``view=ratio`` the steps/s of
two arms seed by seed and their ratio (a speed target's table). Of runs stored more than once
(the same env, arm, seed and budget on several commits) the last stored counts. ``figure`` draws returns against
env steps and against wall time per env, an arm a line (the mean over its seeds) and a band (their range); the
command is ``python -m scripts.bench figure``. hooks.py calls ``expand``.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scripts.benchmark.store import Store, latest

MARKER = re.compile(r"^<!-- bench-table: store (?P<file>\S+\.jsonl)(?P<filters>(?: [a-z]+=\S+)*) -->$", re.M)
FILTERS = ("env", "arm", "budget", "seed", "view")
VIEWS = ("arms", "seeds", "ratio")


def _n(x: float | None, digits: int = 0) -> str:
    return "-" if x is None else f"{x:,.{digits}f}"


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def select(
    rows: list[dict[str, Any]],
    env: list[str] | None = None,
    arm: list[str] | None = None,
    budget: list[int] | None = None,
    seed: list[int] | None = None,
) -> list[dict[str, Any]]:
    """The last stored row of each run, of the envs, arms, budgets and seeds given (all, where None), in the store's
    order."""
    return [
        r
        for r in latest(rows)
        if (env is None or r["env"] in env)
        and (arm is None or r["arm"] in arm)
        and (budget is None or r["budget"] in budget)
        and (seed is None or r["seed"] in seed)
    ]


def _groups(rows: list[dict[str, Any]]) -> dict[tuple[str, int, str], list[dict[str, Any]]]:
    """Rows by (env, budget, arm), in the order each first appears, each group by seed."""
    groups: dict[tuple[str, int, str], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["env"], r["budget"], r["arm"]), []).append(r)
    return {k: sorted(v, key=lambda r: r["seed"]) for k, v in groups.items()}


def _budget(steps: int) -> str:
    return f"{steps / 1e6:g}M" if steps >= 1_000_000 else f"{steps / 1e3:g}k"


def by_arm(rows: list[dict[str, Any]]) -> str:
    """env x arm: final mean ± std over seeds, seeds, the seeds that reached the threshold and the median wall time to
    it, median wall s and steps/s."""
    out = []
    for (env, budget, arm), runs in _groups(rows).items():
        finals = [r["final_mean_100"] for r in runs if r["final_mean_100"] is not None]
        mean = statistics.fmean(finals) if finals else None
        std = statistics.stdev(finals) if len(finals) > 1 else 0.0 if finals else None
        threshold = runs[0]["threshold"]
        times = [r["reached_at_s"] for r in runs if r["reached_at_s"] is not None]
        solved = f"{len(times)}/{len(runs)} (>= {threshold:g})" if threshold is not None else "-"
        if times:
            solved += f", {statistics.median(times):,.1f} s"
        out.append(
            [
                f"{env} ({_budget(budget)})",
                arm,
                f"**{_n(mean, 1)}** ± {_n(std, 1)}",
                str(len(runs)),
                solved,
                _n(statistics.median(r["wall_s"] for r in runs if r["wall_s"] is not None)),
                _n(statistics.median(r["steps_per_s"] for r in runs if r["steps_per_s"] is not None)),
            ]
        )
    header = ["env (steps)", "arm", "final 100-episode mean ± std over seeds", "seeds", "seeds solved, median s to it"]
    return _table([*header, "wall s (median)", "steps/s (median)"], out)


def by_seed(rows: list[dict[str, Any]]) -> str:
    """Each run: final and best 100-episode means, the step it reached the threshold, wall s, steps/s, sessions; and
    where a run of the table was evaluated (--evaluate N), a3c.evaluate's mean return on its final checkpoint (of N
    episodes) and on its best."""
    out = []
    scored = any((r.get("extra") or {}).get("eval_mean_return") is not None for r in rows)
    for (env, budget, arm), runs in _groups(rows).items():
        for r in runs:
            line = [
                f"{env} ({_budget(budget)})",
                arm,
                str(r["seed"]),
                _n(r["final_mean_100"], 1),
                _n(r["best_mean_100"], 1),
                _n(r["reached_at_step"]),
                _n(r["wall_s"]),
                _n(r["steps_per_s"]),
                str(r["sessions"]),
                r["commit"],
            ]
            if scored:
                extra = r.get("extra") or {}
                final = _n(extra.get("eval_mean_return"), 1)
                episodes = extra.get("eval_episodes")
                line += [final if final == "-" else f"{final} ({episodes})", _n(extra.get("eval_best_mean_return"), 1)]
            out.append(line)
    header = ["env (steps)", "arm", "seed", "final mean100", "best mean100", "reached threshold at step", "wall s"]
    header += ["steps/s", "sessions", "commit"]
    return _table([*header, "eval final (episodes)", "eval best"] if scored else header, out)


class TwoArmsNeeded(ValueError):
    """view=ratio over rows of other than two arms of an env (a marker's filter arm=A,B, the command's --arm A B);
    ``what``: the problem without the fix, which each caller words its own way."""

    def __init__(self, env: str, arms: int) -> None:
        self.what = f"needs two arms of {env}, not {arms}"
        super().__init__(f"view=ratio {self.what}")


def by_ratio(rows: list[dict[str, Any]], order: list[str] | None = None) -> str:
    """Speed, pair by pair: per env, budget and seed, the steps/s of the first arm over the second's (``order``, the
    marker's arm=A,B, else the order they were first stored in; runs made one after the other by the driver, seed by
    seed, so that a pair shared the machine's state: a rerun of one arm alone breaks that), and the median of the
    pairs made from each commit (the first arm's)."""
    out = []
    pairs: dict[tuple[str, int], dict[str, dict[int, dict[str, Any]]]] = {}
    for (env, budget, arm), runs in _groups(rows).items():
        pairs.setdefault((env, budget), {})[arm] = {r["seed"]: r for r in runs}
    for (env, budget), arms in pairs.items():
        if len(arms) != 2:
            raise TwoArmsNeeded(env, len(arms))
        names = sorted(arms, key=lambda arm: order.index(arm)) if order else list(arms)
        (first, ours), (second, theirs) = ((name, arms[name]) for name in names)
        label = f"{env} ({_budget(budget)})"
        ratios: dict[str, list[float]] = {}
        for seed in sorted(set(ours) & set(theirs)):
            a, b, commit = ours[seed]["steps_per_s"], theirs[seed]["steps_per_s"], ours[seed]["commit"]
            if a is None or not b:
                continue
            ratios.setdefault(commit, []).append(a / b)
            out.append([label, str(seed), commit, f"{first}: {_n(a)}", f"{second}: {_n(b)}", f"{a / b:.2f}x"])
        for commit, values in ratios.items():
            out.append([label, "median", commit, "", "", f"**{statistics.median(values):.2f}x**"])
    return _table(["env (steps)", "seed", "commit", "steps/s", "steps/s", "ratio"], out)


VIEW: dict[str, Callable[[list[dict[str, Any]]], str]] = {"arms": by_arm, "seeds": by_seed, "ratio": by_ratio}


def made_by(rows: list[dict[str, Any]]) -> str:
    """The driver commands that stored ``rows``, as a reader would type them in a clone: the store as its path in the
    repository, without the machine's --work-dir (where the run directories happened to live)."""
    commands = list(dict.fromkeys(_portable(r["bench_command"]) for r in rows if r.get("bench_command")))
    return ("Made by " + "; ".join(f"`{c}`" for c in commands) + ".") if commands else ""


def _portable(command: str) -> str:
    """A driver command as a reader types it in a clone: no --work-dir, the store as its repository path, and any
    absolute paths adopt names (its run directory, --log and --code) by their last component, the run's own name."""
    command = re.sub(r" --work-dir \S+", "", command)
    command = re.sub(r"--store \S*?(docs/data/\S+)", r"--store \1", command)
    return re.sub(r"((?:adopt|--log|--code) )/\S*/([^/\s]+)", r"\1\2", command)


def parse_filters(text: str) -> dict[str, list[str]]:
    filters: dict[str, list[str]] = {}
    for item in text.split():
        key, _, value = item.partition("=")
        if key not in FILTERS:
            raise ValueError(f"bench-table store: unknown filter {key!r} (known: {', '.join(FILTERS)})")
        filters[key] = value.split(",")
    if filters.get("view", ["arms"])[0] not in VIEWS:
        raise ValueError(f"bench-table store: view={filters['view'][0]} (one of {', '.join(VIEWS)})")
    return filters


def render(path: Path, filters: dict[str, list[str]]) -> str:
    """The table the filters ask for, from the store at ``path``, and the commands that made its rows. A filter that
    selects nothing fails (a page never shows an empty table)."""
    if not path.exists():
        raise FileNotFoundError(f"bench-table store: no store at {path}")
    budget = [int(b) for b in filters["budget"]] if "budget" in filters else None
    seed = [int(s) for s in filters["seed"]] if "seed" in filters else None
    rows = select(Store(path).rows(), filters.get("env"), filters.get("arm"), budget, seed)
    if not rows:
        raise ValueError(f"bench-table store: no run of {path} matches {filters}")
    try:
        return table_of(rows, filters.get("view", ["arms"])[0], filters.get("arm"))
    except TwoArmsNeeded as err:
        raise ValueError(f"bench-table store: {err} (filter arm=A,B)") from None


def table_of(rows: list[dict[str, Any]], view: str, arms: list[str] | None = None) -> str:
    """The table of ``view`` (VIEWS) over ``rows``, then the commands that made them: a page's marker and `python -m
    scripts.bench table` print the same. ``arms``: view=ratio's order (first over second). TwoArmsNeeded for a ratio
    of other than two arms."""
    table = by_ratio(rows, arms) if view == "ratio" else VIEW[view](rows)
    return "\n\n".join(p for p in (table, made_by(rows)) if p)


def expand(markdown: str, page_dir: Path) -> str:
    """``markdown`` with every store marker replaced by its table (the store's path relative to the page's folder)."""
    return MARKER.sub(lambda m: render(page_dir / m["file"], parse_filters(m["filters"])), markdown)


def _band(curves: list[list[tuple[float, float]]], points: int = 200) -> tuple[Any, Any, Any, Any]:
    """(x, mean, low, high) over the seeds' curves, each interpolated on one grid of x: a seed counts from its first
    point on, and past its last at its final value (a run that ended early, in wall time, holds its result)."""
    import numpy as np

    end = max(c[-1][0] for c in curves)
    grid = np.linspace(0.0, end, points)
    ys = np.full((len(curves), points), np.nan)
    for i, c in enumerate(curves):
        c = sorted(c)  # by x (episodes of several workers end a little out of wall-time order)
        x, y = np.array([p[0] for p in c]), np.array([p[1] for p in c])
        started = grid >= x[0]
        ys[i, started] = np.interp(grid[started], x, y)  # beyond the last point: the last value
    seen = ~np.all(np.isnan(ys), axis=0)
    grid, ys = grid[seen], ys[:, seen]
    return grid, np.nanmean(ys, axis=0), np.nanmin(ys, axis=0), np.nanmax(ys, axis=0)


def figure(rows: list[dict[str, Any]]) -> Any:
    """A matplotlib figure: a row of two axes per (env, budget), the 100-episode training mean against env steps and
    against wall time; per arm the mean over its seeds (a line) and their range (a band)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    envs: dict[tuple[str, int], dict[str, list[dict[str, Any]]]] = {}
    for (env, budget, arm), runs in _groups(rows).items():
        envs.setdefault((env, budget), {})[arm] = [r for r in runs if r["curve"]]
    fig, axes = plt.subplots(len(envs), 2, figsize=(11, 3.4 * len(envs)), dpi=80, squeeze=False)
    for (by_steps, by_wall), ((env, budget), arms) in zip(axes, envs.items(), strict=True):
        for i, (arm, runs) in enumerate(arms.items()):
            if not runs:
                continue
            for ax, column in ((by_steps, 0), (by_wall, 1)):
                x, mean, low, high = _band([[(p[column], p[2]) for p in r["curve"]] for r in runs])
                ax.plot(
                    x,
                    mean,
                    color=f"C{i}",
                    linewidth=1.4,
                    label=f"{arm} ({len(runs)} seed{'' if len(runs) == 1 else 's'})",
                )
                ax.fill_between(x, low, high, color=f"C{i}", alpha=0.2, linewidth=0)
        threshold = next((r["threshold"] for runs in arms.values() for r in runs), None)
        for ax, xlabel in ((by_steps, "env steps"), (by_wall, "wall time (s)")):
            if threshold is not None:
                ax.axhline(threshold, color="grey", linestyle="--", linewidth=0.8)
            ax.set_title(f"{env.rpartition(':')[2]}, {_budget(budget)} steps")  # (a module:Name-v0 id: its name)
            ax.set_xlabel(xlabel)
            ax.set_ylabel("100-episode training mean")
            ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    return fig
