"""The results store: one JSON object a line (docs/data/results.jsonl by default), one line per finished run, appended
the moment the run ends; the tables and figures of the docs are generated from it (docsgen/results_store.py).

A row is keyed by ``KEY``: the env, the arm's name, the seed, the budget (the env steps asked for) and the commit of
the code that ran it (``code_commit``: the newest commit that changed a3c/, envs/, scripts/sb3_runner.py or
pyproject.toml, so that committing results or docs does not make the stored runs stale; "-dirty" added when those
paths had uncommitted changes). ``FIELDS`` names every key a row holds, one spelling each, and says what it is.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from a3c.record.files import unwritable_reason

REPO = Path(__file__).resolve().parents[2]
DEFAULT_STORE = REPO / "docs" / "data" / "results.jsonl"
KEY = ("env", "arm", "seed", "budget", "commit")
# what a run's results depend on: a change elsewhere (docs, tests, the store itself) keeps the stored runs current
CODE_PATHS = ("a3c", "envs", "scripts/sb3_runner.py", "pyproject.toml")

FIELDS: dict[str, str] = {
    "env": "the gymnasium id",
    "arm": "the arm's name (an a3c.train command, or a peer: sb3-a2c, sb3-ppo, sb3-ppo-cleanrl)",
    "seed": "the run's seed",
    "budget": "the env steps asked for (--total-steps)",
    "commit": "the code's commit (code_commit), with -dirty for uncommitted changes",
    "arm_spec": "what the arm is: {kind, flags} for a3c, {kind, settings, hyperparameters} for a peer",
    "command": "the exact command of the run's last session (a resumed run: with --resume)",
    "bench_command": "the driver's command that ran it",
    "total_steps": "env steps taken (a3c rounds the budget up to whole rollouts)",
    "episodes": "episodes finished",
    "final_mean_100": "mean return of the last 100 training episodes at the end",
    "best_mean_100": "best mean over 100 consecutive episodes (null under 100 episodes)",
    "threshold": "the return counted as solved (the env's reward_threshold, or the queue's), or null",
    "reached_at_step": "the step at which the 100-episode mean first reached the threshold, or null",
    "reached_at_s": "the run's wall time then, or null",
    "wall_s": "the run's wall time from its start to its end, all sessions together",
    "train_s": "training time: from the first env step to the last update, all sessions together",
    "steps_per_s": "env steps over training time, all sessions together",
    "sessions": "how many times it was started: 1, or more after being stopped and resumed",
    "stop_reason": "total_steps, or solved for an arm that stops when solved",
    "workers": "a3c's worker processes (a peer: its envs, stepped in one process)",
    "curve": "[[step, wall seconds, 100-episode mean], ...] after each episode, at most 200 points",
    "machine": "cores, cpu, whether it has bfloat16 instructions, the 1-minute load average when the run started",
    "finished_at": "when it ended (UTC, ISO 8601)",
    "extra": "what only one kind of arm reports (a3c: update path, objective, solve steps, restarts, skips)",
}


class StoreError(ValueError):
    """A store that cannot be read (a line that is not JSON): the driver prints it in one line."""


def code_commit(repo: Path = REPO) -> str:
    """The newest commit that changed ``CODE_PATHS`` (its 12-character abbreviation), with "-dirty" when they hold
    uncommitted changes; "unknown" outside a git checkout."""
    try:
        sha = subprocess.run(
            ["git", "log", "-1", "--format=%H", "--", *CODE_PATHS], cwd=repo, capture_output=True, text=True, check=True
        ).stdout.strip()
        status = subprocess.run(
            ["git", "status", "--porcelain", "--", *CODE_PATHS], cwd=repo, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return (sha[:12] or "unknown") + ("-dirty" if status else "")


def commit_store(path: Path, message: str) -> str | None:
    """Commit the store file at ``path`` alone (``git commit -- PATH``: whatever else is staged stays staged); None, or
    git's complaint in one line."""
    path = Path(path).resolve()
    for args in (["add", "--", path.name], ["commit", "-q", "-m", message, "--", path.name]):
        done = subprocess.run(["git", *args], cwd=path.parent, capture_output=True, text=True)
        if done.returncode != 0:
            lines = (done.stderr or done.stdout).strip().splitlines()
            return lines[-1] if lines else f"git {args[0]} exited {done.returncode}"
    return None


def key_of(row: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(row[k] for k in KEY)


def missing_fields(row: dict[str, Any]) -> list[str]:
    """The keys of FIELDS that ``row`` lacks (all but ``extra`` are required)."""
    return [k for k in FIELDS if k not in row and k != "extra"]


def check_row(row: dict[str, Any]) -> None:
    """A ValueError naming the first key a row lacks or does not know (one spelling of each)."""
    missing = missing_fields(row)
    unknown = [k for k in row if k not in FIELDS]
    if missing or unknown:
        raise ValueError(f"a results row: missing {missing}, unknown {unknown} (store.FIELDS names them)")


class Store:
    """The rows of one JSONL file. ``append`` writes a row as one line under an exclusive lock (two drivers may share
    a store) and flushes it to disk before returning."""

    def __init__(self, path: Path | str = DEFAULT_STORE) -> None:
        self.path = Path(path)

    def rows(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        try:
            text = self.path.read_text()
        except (OSError, UnicodeDecodeError) as err:  # (a directory, no permission, not text)
            why = err.strerror if isinstance(err, OSError) and err.strerror else type(err).__name__
            raise StoreError(f"--store {self.path}: cannot read it ({why}); give the store's .jsonl file") from None
        out = []
        for n, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as err:
                    raise StoreError(
                        f"{self.path}:{n}: not a JSON object ({err.msg}); mend or remove the line"
                    ) from None
                if not isinstance(row, dict) or missing_fields(row):
                    lacking = missing_fields(row) if isinstance(row, dict) else ["a JSON object"]
                    raise StoreError(
                        f"{self.path}:{n}: not a results row (it lacks {', '.join(lacking)}); mend or remove the line"
                    )
                out.append(row)
        return out

    def check_writable(self) -> None:
        """A StoreError now where a finished run's row could not be appended (its folder not one, no permission):
        said before the run, not after it. Writes nothing (a missing file and its folders are made by the first
        append)."""
        reason = unwritable_reason(self.path, folders_made=True)
        if reason is not None:
            raise StoreError(f"--store {self.path}: cannot write it ({reason}); give a writable file")

    def find(self, env: str, arm: str, seed: int, budget: int, commit: str | None) -> dict[str, Any] | None:
        """The newest stored row of this run (``commit`` None: of any commit), or None."""
        found = None
        for row in self.rows():
            if (row["env"], row["arm"], row["seed"], row["budget"]) == (env, arm, seed, budget) and (
                commit is None or row["commit"] == commit
            ):
                found = row
        return found

    def append(self, row: dict[str, Any]) -> None:
        check_row(row)
        self.check_writable()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps(row, separators=(",", ":")) + "\n"
        with open(self.path, "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                f.write(line)
                f.flush()
                os.fsync(f.fileno())
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)


def latest(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (env, arm, seed, budget): the last one stored (a rerun on a newer commit replaces the older)."""
    by_run: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in rows:
        by_run[(row["env"], row["arm"], row["seed"], row["budget"])] = row
    return list(by_run.values())
