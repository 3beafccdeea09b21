"""The run directory: where a run's files live and how each is written (config.json, episodes.csv, summary.json).
Only the main process writes here.

A write that fails (the disk is full, the directory went away or read-only) raises ``RunDirWriteError`` naming the
file, here and in every other writer of the main process (TensorBoard, checkpoints, eval.csv, the figure: see
``writing``); the trainer stops the run on it, as on any other ending (a3c.run.trainer).
"""

from __future__ import annotations

import csv
import errno
import json
import math
import os
import re
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from a3c.record.files import atomic_write
from a3c.record.rows import FIELDS, Episode
from a3c.spec.config import Config
from a3c.spec.errors import UserError

CSV_COLUMNS: tuple[str, ...] = ("worker", "index", *FIELDS)
LATEST = "latest.pt"  # checkpoints/latest.pt: the run's newest checkpoint (a3c.record.checkpoint writes it)
BEST = "best.pt"  # checkpoints/best.pt: the evaluator's best policy; retention never deletes it
DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT})  # no space left, disk quota exceeded


class RunDirWriteError(Exception):
    """A file of the run directory could not be written: ``what`` names it (relative to the run directory, or as
    "its TensorBoard event files"), ``error`` is the OSError. Not a bug: the trainer ends the run on it with one line
    (``line``) and exit code 1. Not an OSError itself, so that the writers' own ``except OSError`` let it through."""

    def __init__(self, what: str, error: OSError) -> None:
        super().__init__(f"cannot write {what}: {error}")
        self.what, self.error = what, error

    @property
    def disk_full(self) -> bool:
        return self.error.errno in DISK_FULL

    def line(self, run_dir: Path | str, resumable: bool) -> str:
        """The run's last line: what failed, and the fix (``resumable``: the run has a checkpoint to go on from)."""
        reason = self.error.strerror or str(self.error)
        if resumable:
            then = f"--resume {run_dir}"
        else:  # a new run starts only in a missing or empty directory (check_new_run_dir, below)
            again = "start the run again (it has no checkpoint to resume from)"
            then = f"remove {run_dir} (or give another --run-dir) and {again}" if _holds_files(run_dir) else again
        if self.disk_full:
            problem = f"the disk of {run_dir} is full ({reason}) while writing {self.what}; free space"
        else:
            problem = f"cannot write {self.what} in {run_dir} ({reason}); make it writable again"
        return f"a3c: error: {problem}, then {then}"


def _holds_files(path: Path | str) -> bool:
    try:
        return any(Path(path).iterdir())
    except OSError:  # (gone, or not a directory)
        return False


@contextmanager
def writing(what: str) -> Iterator[None]:
    """Writes to the run directory inside: an OSError becomes RunDirWriteError(what) (see RunDirWriteError)."""
    try:
        yield
    except OSError as err:
        raise RunDirWriteError(what, err) from err


def check_new_run_dir(path: Path) -> None:
    """A new run may go into a missing or empty directory; anything else is a user error."""
    if path.exists() and not path.is_dir():
        raise UserError(f"--run-dir {path} exists and is not a directory; choose another path")
    if path.is_dir() and any(path.iterdir()):
        resumable = (path / "config.json").is_file() and has_checkpoint(path)
        then = f" (or --resume {path} to continue)" if resumable else ""
        raise UserError(f"--run-dir {path} is not empty; choose a new directory{then}")


def default_run_dir(config: Config, now: float | None = None) -> Path:
    """runs/<env>__<exp-name>__<seed>__<unix time>, the experiment's name by default the objective (a3c, ppo)."""
    env = re.sub(r"[^A-Za-z0-9_.-]+", "_", config.env)
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", config.exp_name or config.algo)
    return Path("runs") / f"{env}__{name}__{config.seed}__{int(now or time.time())}"


def write_json_atomic(path: Path, data: Any) -> None:
    """``data`` as JSON at ``path``, atomically (a3c.record.files.atomic_write: a failed write leaves no temporary file
    behind, and the previous file in place); a number that is not finite as null (``json_ready``)."""

    def write(f: IO[str]) -> None:
        json.dump(json_ready(data), f, indent=2, sort_keys=False, allow_nan=False)
        f.write("\n")

    atomic_write(path, write)


def json_ready(data: Any) -> Any:
    """``data`` with every float that is NaN or infinite replaced by None, in dicts, lists and tuples: Python's json
    writes them as NaN and Infinity, which are not JSON (a strict parser refuses the file)."""
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, dict):
        return {key: json_ready(value) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return [json_ready(value) for value in data]
    return data


def round_return(value: float | None) -> float | None:
    """A mean return as reported (summary.json, the final line): two decimals are more than its noise."""
    return None if value is None else round(float(value), 2)


def has_checkpoint(run_dir: Path) -> bool:
    """Whether a run can go on from its directory: checkpoints/latest.pt or a step-N.pt (a3c.record.resume takes the
    newest intact one)."""
    checkpoints = run_dir / "checkpoints"
    return (checkpoints / LATEST).is_file() or any(checkpoints.glob("step-*.pt"))


def resume_checkpoint(run_dir: str | Path) -> Path:
    """The run's checkpoints/latest.pt, or a UserError naming what is wrong with the path: no run, or no checkpoint
    (neither latest.pt nor a step-N.pt: a3c.record.resume goes on from the newest intact one of them). No torch: a
    path that is no run answers before the command imports it."""
    run = Path(run_dir)
    if not run.exists():
        raise UserError(f"--resume {run}: no such directory; give the run directory of an earlier a3c run")
    if not run.is_dir() or not (run / "config.json").is_file():
        raise UserError(f"--resume {run} is not an a3c run directory (no config.json); give the run's directory")
    path = run / "checkpoints" / LATEST
    if not has_checkpoint(run):
        raise UserError(
            f"--resume {run}: the run has no checkpoints/{LATEST} (it ended before its first checkpoint); "
            "start a new run instead"
        )
    return path


# the final line points out a final 100-episode mean this far below the run's best (a fraction of the best's size)
FAR_BELOW_BEST = 0.25


def final_line(summary: dict[str, Any], path: Path | str, budget: int | None = None) -> str:
    """The last line a run prints: how it ended (solved at step N (T s) when it stopped because it solved: the
    episode of this session at which the 100-episode mean met the threshold; --total-steps ``budget`` reached, and
    why the count went past it), this session's steps, time and speed
    (over the training window: from the first step to the last update), and, after a resume, the run's total apart
    from this session's; a final mean far below the run's best window says so. The summary's wall_time_s and
    solved_at_s are the run's wall time, which goes on across sessions; session_wall_time_s is this session's."""
    reason = summary.get("stop_reason", "total_steps")
    resumed = summary.get("resumed_from_step")
    total, wall, sps = summary["total_steps"], summary["wall_time_s"], summary["steps_per_s"]
    session_s = summary.get("session_wall_time_s", wall)
    before_s = wall - session_s  # the run's wall time when this session started
    mean = summary.get("mean_return_100")
    solved_at = summary.get("stopped_solved_at_step", summary.get("solved_at_step"))
    solved_s = summary.get("stopped_solved_at_s", summary.get("solved_at_s"))
    if reason == "solved" and solved_at is not None:
        if resumed is None:
            head = f"solved at step {solved_at:,} ({solved_s:.1f} s)"
        elif solved_at > resumed:
            head = f"solved at step {solved_at:,} ({solved_s - before_s:.1f} s into this session)"
        else:
            head = f"solved at step {solved_at:,} (in an earlier session)"
    elif reason == "total_steps" and budget is not None and total > budget:
        # each worker checks the budget between updates: the rollouts and updates under way when the global step
        # reached it are finished (their steps trained the model), so a run ends up to a rollout a worker past it
        head = f"reached --total-steps {budget:,} (at {total:,}: each worker ends the rollout and update it is in)"
    elif reason == "total_steps":
        head = f"reached --total-steps {total if budget is None else budget:,}"
    else:
        head = f"stopped: {reason}"
    if mean is not None:
        mean_text = f"mean return (last 100) {mean:g}"
    else:  # (episodes whose returns were all NaN or infinite, an env's non-finite rewards, average to nothing)
        mean_text = "no finite return to average (see episodes.csv)" if summary["episodes"] else "no episode finished"
    train_s = summary.get("training_time_s")
    speed = f"{sps:,.0f} steps/s" if train_s is None else f"training {train_s:.1f} s at {sps:,.0f} steps/s"
    if resumed is None:
        body = f"{total:,} steps in {wall:.1f} s ({speed}), {summary['episodes']:,} episodes, {mean_text}"
    else:
        body = (
            f"this session: steps {resumed:,} -> {total:,} ({total - resumed:,} steps) in {session_s:.1f} s "
            f"({speed}); the run: {total:,} steps, {summary['episodes']:,} episodes, {mean_text}"
        )
    best, best_at = summary.get("best_mean_return_100"), summary.get("best_mean_return_100_at_step")
    # (a solve's mean is the window that met the threshold: a better one after it is of the episodes finished while
    # the workers stopped, no collapse)
    if reason != "solved" and mean is not None and best is not None and best - mean > FAR_BELOW_BEST * abs(best):
        has_best = (Path(path) / "checkpoints" / BEST).is_file()
        where = f"checkpoints/{BEST} holds its best evaluated policy" if has_best else "see episodes.csv"
        body += f" (far below the run's best 100-episode mean, {best:g} at step {best_at:,}: {where})"
    if (reason == "interrupted" or reason.startswith("terminated")) and summary.get("final_checkpoint_step"):
        # stopped by a signal, its checkpoint written: how to go on (the run has not reached its --total-steps)
        body += f"; go on with: python -m a3c.train --resume {path}"
    return f"a3c: {head}; {body}; {path}"


class RunDirectory:
    """Paths of one run, and the writers for its plain files."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.config_json = self.path / "config.json"
        self.episodes_csv = self.path / "episodes.csv"
        self.summary_json = self.path / "summary.json"
        self.checkpoints = self.path / "checkpoints"
        self.plots = self.path / "plots"
        self.made: list[Path] = []  # the directories ``create`` made, parents first

    @classmethod
    def create(cls, config: Config) -> RunDirectory:
        """Make a new run directory (an existing empty one is fine; a non-empty one is a user error)."""
        path = Path(config.run_dir) if config.run_dir else default_run_dir(config)
        check_new_run_dir(path)
        run = cls(path)
        try:
            for folder in (*reversed(path.parents), path, run.checkpoints, run.plots):
                if not folder.exists():
                    try:
                        folder.mkdir()
                    except FileExistsError:  # (made meanwhile by someone else: not this start's)
                        continue
                    run.made.append(folder)
        except OSError as err:
            run.remove_made()
            raise UserError(f"cannot create --run-dir {path}: {err.strerror}; choose a writable path") from None
        return run

    def remove_made(self) -> None:
        """Remove the directories ``create`` made, those still empty (a start that failed before the run began:
        the directory is as it was, so that starting again is not refused as "not empty")."""
        for folder in reversed(self.made):
            try:
                folder.rmdir()
            except OSError:  # holds something now (not this start's), or already gone
                pass
        self.made.clear()

    def discard_new(self) -> None:
        """A new run that did not start after all (its tracker refused to, its model did not fit in memory: see
        a3c.run.trainer's ``_setting_up``): what this start wrote in the directory,
        which was missing or empty before it (check_new_run_dir), goes, and so do the directories ``create`` made, so
        that the same command is not refused as "not empty" once the cause is fixed."""
        for child in self.path.iterdir() if self.path.is_dir() else ():
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child, ignore_errors=True)
            else:
                child.unlink(missing_ok=True)
        self.remove_made()

    def write_config(self, config: Config) -> None:
        """config.json: every setting as resolved: this directory, the start method, the worker count (with how
        --workers auto chose it, in ``workers_auto``). The first file of a new run: when it cannot be written, the
        run does not start, and the directories ``create`` made go again (``remove_made``)."""
        data = config.to_dict()
        data["run_dir"] = str(self.path)
        data["start_method"] = config.resolved_start_method()
        try:
            with writing(self.config_json.name):
                write_json_atomic(self.config_json, data)
        except RunDirWriteError:
            self.remove_made()
            raise

    def write_summary(self, summary: dict[str, Any]) -> None:
        with writing(self.summary_json.name):
            write_json_atomic(self.summary_json, summary)


class CsvLog:
    """A CSV file appended to row by row, its header written when the file is new; every append is flushed. A write
    that fails raises RunDirWriteError, and so does every ``sync`` after it: rows may be missing from the file, so no
    checkpoint may count them as written."""

    def __init__(self, path: Path, columns: tuple[str, ...]) -> None:
        self.name = path.name
        self.error: RunDirWriteError | None = None
        with self._writing():
            new = not path.exists() or path.stat().st_size == 0
            self.file = open(path, "a", newline="")
            self.writer = csv.writer(self.file)
            if new:
                self.writer.writerow(columns)
                self.file.flush()

    @contextmanager
    def _writing(self) -> Iterator[None]:
        try:
            with writing(self.name):
                yield
        except RunDirWriteError as err:
            self.error = self.error or err
            raise

    def write_rows(self, rows: list[list[Any]]) -> None:
        if rows:
            with self._writing():
                self.writer.writerows(rows)
                self.file.flush()

    def sync(self) -> None:
        """Everything appended so far on disk (before a checkpoint that counts these rows)."""
        if self.error is not None:
            raise self.error
        with self._writing():
            self.file.flush()
            os.fsync(self.file.fileno())

    def close(self) -> None:
        with self._writing():
            self.file.close()


# episodes.csv's columns as written: the return exact (repr), the length and step as integers, the losses with 7
# significant digits (they are float32 in the worker: nothing is lost that it had), the wall time to the millisecond.
# A one-step episode's row is then about 70 bytes, against 120 with every float's repr (measured on Blackjack-v1).
_COLUMN_FORMATS = {
    "return": lambda v: repr(float(v)),
    "length": lambda v: str(int(v)),
    "global_step": lambda v: str(int(v)),
    "wall_time": lambda v: f"{float(v):.3f}",
}
_LOSS_FORMAT = "{:.7g}"


def csv_value(field: str, value: float) -> str:
    """One of an episode's ``FIELDS`` as episodes.csv writes it (see _COLUMN_FORMATS)."""
    format_one = _COLUMN_FORMATS.get(field)
    return format_one(value) if format_one is not None else _LOSS_FORMAT.format(float(value))


class EpisodeLog(CsvLog):
    """episodes.csv, appended to as episodes are read from the board."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, CSV_COLUMNS)

    def append(self, episodes: list[Episode]) -> None:
        rows = [
            [ep.worker, ep.index, *(csv_value(f, v) for f, v in zip(FIELDS, ep.values, strict=True))] for ep in episodes
        ]
        self.write_rows(rows)
