"""`python -m a3c.plot RUN_DIR [RUN_DIR ...]`: figures drawn from runs' episodes.csv, at any time (during a run too).

For each run: the tutorial's loss-history figure (each worker's loss history; all workers' losses in global-step
order).
For all runs together: the episodic return and the episode loss against the global env step and against wall time,
one line per run (e.g. 1 against 16 workers). With one run the figures go to RUN_DIR/plots/, with several to --out.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from a3c.record.figures import RunCurve, comparison_figure, draw_loss_history, save_figure
from a3c.spec.errors import OneLineParser, UserError, run_cli
from a3c.spec.wording import count

NEEDED = ("worker", "return", "loss", "global_step", "wall_time")


@dataclass
class RunEpisodes:
    """A run's episodes.csv as columns, in the run's order: by global step (then worker, then index)."""

    path: Path
    label: str
    columns: dict[str, np.ndarray]
    name: str  # the run's name, told apart from the other runs' (run_names)

    def curve(self, metric: str) -> RunCurve:
        c = self.columns
        return RunCurve(self.label, c["global_step"], c["wall_time"], c[metric])


def run_names(paths: Sequence[Path]) -> list[str]:
    """A name for each run directory, told apart from the others': its own name, or as many of its last path parts
    as it takes (runs a/cp and b/cp: "a/cp", "b/cp"), or " (2)", " (3)" after one directory given again."""
    parts = [Path(p).resolve().parts for p in paths]
    depth = [1] * len(paths)
    while True:
        names = ["/".join(ps[-d:]) for ps, d in zip(parts, depth, strict=True)]
        clashing = [  # a name another directory has too (a directory given twice keeps its own)
            i
            for i, n in enumerate(names)
            if depth[i] < len(parts[i]) and any(m == n and parts[j] != parts[i] for j, m in enumerate(names))
        ]
        if not clashing:
            break
        for i in clashing:
            depth[i] += 1
    seen: dict[str, int] = {}
    for i, name in enumerate(names):
        seen[name] = seen.get(name, 0) + 1
        if seen[name] > 1:
            names[i] = f"{name} ({seen[name]})"
    return names


def run_label(path: Path, name: str | None = None) -> str:
    """The run's name (``name``, else its directory's), with the env and worker count from its config.json when it
    has one."""
    name = name or path.name
    try:
        config = json.loads((path / "config.json").read_text())
        return f"{name} ({config['env']}, {count(int(config['workers']), 'worker')})"
    except (OSError, ValueError, KeyError, TypeError):
        return name


def read_episodes(path: Path, name: str | None = None) -> RunEpisodes:
    """Read RUN_DIR/episodes.csv (``name``: the run's name in labels and file names; default its directory's). A user
    error if the directory or the file is missing, or it has no episodes. A last line cut short by a run that is
    still writing is skipped."""
    path = Path(path)
    if not path.is_dir():
        problem = "is a file, not a directory" if path.exists() else "does not exist"
        raise UserError(f"run directory {path} {problem}; pass the directory a3c.train wrote (e.g. runs/...)")
    csv_path = path / "episodes.csv"
    if not csv_path.is_file():
        raise UserError(f"{path} holds no episodes.csv; pass a run directory written by a3c.train")
    try:
        with open(csv_path, newline="") as f:
            reader = csv.reader(f)
            header = next(reader, None)
            missing = [c for c in NEEDED if header is None or c not in header]
            if missing:
                raise UserError(f"{csv_path} lacks the columns {', '.join(missing)}; is it an a3c.train episodes.csv?")
            assert header is not None
            rows = []
            for row in reader:
                if len(row) != len(header):
                    continue
                try:
                    rows.append([float(v) for v in row])
                except ValueError:
                    continue
    except (OSError, UnicodeDecodeError) as err:  # (not text: the file of something else under its name)
        why = err.strerror if isinstance(err, OSError) and err.strerror else "not text"
        raise UserError(f"cannot read {csv_path} ({why}); is it an a3c.train episodes.csv?") from None
    if not rows:
        raise UserError(f"{csv_path} has no finished episodes yet; plot it once some episodes have ended")
    data = np.asarray(rows, dtype=float)
    # the run's order is the global step's (docs/design.md): wall time orders one session's rows, but in a run resumed
    # by an earlier a3c every session's wall time began at 0 again, and a sort by it interleaved the sessions
    tie = header.index("index") if "index" in header else header.index("wall_time")
    data = data[np.lexsort((data[:, tie], data[:, header.index("worker")], data[:, header.index("global_step")]))]
    columns = {column: data[:, i] for i, column in enumerate(header)}
    return RunEpisodes(path, run_label(path, name), columns, name or path.name)


def draw(runs: Sequence[RunEpisodes], out: Path, window: int = 100) -> list[Path]:
    """Write the figures of ``runs`` under ``out``; returns the paths written."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UserError(f"cannot create the output directory {out}: {err.strerror}; pass a writable --out") from None
    written: list[Path] = []
    for run in runs:
        workers, losses = run.columns["worker"].astype(int), run.columns["loss"]
        per_worker = {int(r): (np.arange(int((workers == r).sum())), losses[workers == r]) for r in np.unique(workers)}
        overall = (np.arange(len(losses)), losses)  # the rows are in the run's order, the global step's (read_episodes)
        name = "loss_history.png" if len(runs) == 1 else f"{run.name.replace('/', '__')}__loss_history.png"
        written.append(save_figure(draw_loss_history(per_worker, overall, title=run.label), out / name))
    title = runs[0].label if len(runs) == 1 else f"{len(runs)} runs"
    for metric, name in (("return", "returns.png"), ("loss", "losses.png")):
        fig = comparison_figure([r.curve(metric) for r in runs], metric, window=window, title=title)
        written.append(save_figure(fig, out / name))
    return written


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="python -m a3c.plot", description=__doc__.splitlines()[0])
    parser.add_argument("run_dirs", nargs="+", type=Path, metavar="RUN_DIR", help="run directories of a3c.train")
    parser.add_argument(
        "--out", type=Path, default=None, help="output directory (default: RUN_DIR/plots for one run, else required)"
    )
    parser.add_argument("--window", type=int, default=100, help="episodes in the moving average of the curves")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.window < 1:
        raise UserError(f"--window must be at least 1 (got {args.window})")
    runs = [read_episodes(p, name) for p, name in zip(args.run_dirs, run_names(args.run_dirs), strict=True)]
    if args.out is None and len(runs) > 1:
        raise UserError("several runs need --out DIR for the comparison figures; e.g. --out plots/compare")
    out = args.out if args.out is not None else runs[0].path / "plots"
    for path in draw(runs, out, args.window):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main, prog="a3c.plot"))
