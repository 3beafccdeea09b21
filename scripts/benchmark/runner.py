"""One run's life: where it lives, what state it is in, running (or resuming) it, and the row it leaves in the store.

A run (env x arm x seed x budget, on this code's commit) lives in WORK_DIR/<env>__<arm>__<seed>__<budget>__<commit>/:
``run/`` is the run directory (a3c.train's, or scripts/sb3_runner.py's), ``sessions.jsonl`` the times the run was
started (the command, the exit code, the run's summary.json then; see ``sessions``), ``lock`` is held while a driver
runs it (two drivers on one queue never run the same run), ``log.txt`` its output when it is not shown (``--jobs`` >
1).

``state`` says what the driver will do: nothing (stored), store it (finished but not stored: stopped between the two),
resume it (an a3c run with a checkpoint: ``--resume``), or run it (from the start; an SB3 peer stopped before its end
starts again). ``execute`` does that and appends the row the moment the run finishes. A Ctrl-C or SIGTERM reaches the
run once (it runs in a process group of its own, so a terminal's Ctrl-C is passed on by the driver, not doubled): the
run saves a checkpoint and stops, the driver records the session and stops too; the same command later resumes it.
"""

from __future__ import annotations

import datetime
import errno
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from scripts._common import host
from scripts.benchmark import curves
from scripts.benchmark.arms import Arm, command, shown
from scripts.benchmark.store import REPO, Store

FINISHED = ("total_steps", "solved")  # a summary's stop_reason of a run that ran to its end
# what a3c's summary.json says that a peer's does not: kept in a row's "extra"
A3C_EXTRA = (
    "algo",
    "update_path",
    "workers",
    "envs_per_worker",
    "solved_at_step",
    "solved_at_s",
    "stopped_solved_at_step",
    "final_checkpoint_step",
    "restarts",
    "skipped_updates",
    "startup_s",
)


@dataclass(frozen=True)
class Run:
    env: str
    arm: Arm
    seed: int
    budget: int
    threshold: float | None = None  # the return counted as solved (None: the env's reward_threshold)
    group: str = ""  # the queue's block it came from

    def folder(self, work_dir: Path, commit: str) -> Path:
        env = self.env.replace("/", "_").replace(":", "_")
        return Path(work_dir) / f"{env}__{self.arm.name}__{self.seed}__{self.budget}__{commit}"


def env_threshold(env: str) -> float | None:
    """gymnasium's reward_threshold of ``env`` (None where it has none or the id is unknown here)."""
    from a3c.spec.environment import register_env_id, registered_spec  # (its import registers the envs/ ids)

    try:  # its module imported, the ALE ids registered, a versionless id at its highest version, as make_env does
        threshold = registered_spec(register_env_id(env).rpartition(":")[2]).reward_threshold
    except Exception:  # an env this machine cannot name (a missing extra, a module gone): no threshold
        return None
    return None if threshold is None else float(threshold)


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def has_checkpoint(run_dir: Path) -> bool:
    """Whether ``run_dir`` is an a3c run that ``--resume`` can continue: its config and a checkpoint --resume takes
    (latest.pt or a step-N.pt; best.pt alone, from an evaluation before the first checkpoint, is not one)."""
    ckpts = run_dir / "checkpoints"
    resumable = (ckpts / "latest.pt").is_file() or any(ckpts.glob("step-*.pt"))
    return (run_dir / "config.json").is_file() and resumable


ARM_FILE = "arm.json"  # in a run folder: the arm its run was made with (how it trains: its --evaluate aside)


def _made_with(arm: Arm) -> dict[str, Any]:
    return {key: value for key, value in arm.spec().items() if key != "evaluate"}


def record_arm(folder: Path, arm: Arm) -> None:
    """Write the arm a run folder's run is made with, once (``arm_conflict`` holds later commands to it)."""
    path = folder / ARM_FILE
    if not path.exists():
        path.write_text(json.dumps(_made_with(arm)) + "\n")


def arm_conflict(run: Run, work_dir: Path, commit: str) -> str | None:
    """The line refusing ``run`` where its folder's run was made with other flags under the same arm name (resumed or
    stored under the new ones, its row would name flags its first steps did not run); None where it fits, or the
    folder records no arm (made before the driver wrote one)."""
    folder = run.folder(work_dir, commit)
    held = read_json(folder / ARM_FILE)
    asked = _made_with(run.arm)
    if held is None or held == asked:
        return None
    return (
        f"arm {run.arm.name!r} made {folder} with {held}, and is asked with {asked}: give the changed arm a new name "
        "(or remove that folder to run it again)"
    )


def finished(summary: dict[str, Any] | None, budget: int) -> bool:
    if summary is None or summary.get("stop_reason") not in FINISHED:
        return False
    return summary["stop_reason"] == "solved" or int(summary.get("total_steps", 0)) >= budget


def state(run: Run, work_dir: Path, commit: str) -> str:
    """What running ``run`` now does: "store" (finished, not stored), "resume" or "run"."""
    run_dir = run.folder(work_dir, commit) / "run"
    if finished(read_json(run_dir / "summary.json"), run.budget):
        return "store"
    if run.arm.peer is None and has_checkpoint(run_dir):
        return "resume"
    return "run"


def sessions(folder: Path) -> list[dict[str, Any]]:
    """The run's sessions, oldest first. A session's line is written as it starts (exit code and summary None) and
    again as it ends, the later line replacing the earlier (the same ``session_id``), so that a session whose driver
    was killed with it (a machine shut down, a terminal closed) still counts, with no summary: a row's steps/s is over
    the sessions that have one. Lines without an id (older files, adopted runs) are a session each."""
    path = folder / "sessions.jsonl"
    if not path.exists():
        return []
    by_id: dict[str, dict[str, Any]] = {}  # (insertion order: a session keeps its place when its end replaces it)
    for i, line in enumerate(path.read_text().splitlines()):
        try:
            entry = json.loads(line)
        except ValueError:  # empty, or cut short by a crash as it was written
            continue
        by_id[entry.get("session_id") or f"line {i}"] = entry
    return list(by_id.values())


def _log_session(folder: Path, entry: dict[str, Any]) -> None:
    """Append one session line to the folder's sessions.jsonl (see ``sessions``)."""
    with open(folder / "sessions.jsonl", "a") as f:
        f.write(json.dumps(entry) + "\n")


def _set_aside_sessions(folder: Path) -> None:
    """A run that starts again from the beginning counts its sessions from that start: the lines of the attempts
    before it (a run stopped before its first checkpoint, a peer stopped before its end) go to
    discarded_sessions.jsonl, kept but not counted in its row."""
    path = folder / "sessions.jsonl"
    if path.exists():
        with open(folder / "discarded_sessions.jsonl", "a") as out:
            out.write(path.read_text())
        path.unlink()


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def nice_session(pid: int) -> None:
    """Give the session of ``pid`` (a run started in a session of its own) the driver's niceness as a group. Where
    the kernel schedules sessions as groups (Linux's sched_autogroup), a new session's group weighs as much as any
    other whatever its processes' niceness, so a run of a driver started under ``nice -n 10`` took as much of the
    machine as a timed run beside it at 0. Best effort: no such file (another kernel, autogroup not built in), or
    not allowed, leaves it be; a driver at niceness 0 or below changes nothing."""
    niceness = os.getpriority(os.PRIO_PROCESS, 0)
    if niceness <= 0:
        return
    for attempt in range(2):
        try:
            with open(f"/proc/{pid}/autogroup", "w") as f:
                f.write(str(niceness))
            return
        except OSError as err:
            # EAGAIN: the kernel takes one change of a group's niceness a 100 ms machine-wide from a process without
            # CAP_SYS_NICE; once more after that
            if err.errno != errno.EAGAIN or attempt:
                return
            time.sleep(0.11)


class Children:
    """The runs under way, so that a signal to the driver reaches each of them once (they run in process groups of
    their own: a terminal's Ctrl-C reaches only the driver)."""

    def __init__(self) -> None:
        self.procs: set[subprocess.Popen[bytes]] = set()
        self.stopping: int | None = None  # the first signal the driver received
        # re-entrant: ``forward`` is the signal handler, and runs in the main thread wherever it was, also inside a
        # ``with self._lock`` of its own (start, wait) or of the handler itself (a second Ctrl-C): a plain Lock
        # waited there forever, and the driver then ignored SIGTERM too
        self._lock = threading.RLock()

    def forward(self, signum: int, _frame: Any = None) -> None:
        if self.stopping is None:
            self.stopping = signum
        with self._lock:
            for proc in list(self.procs):
                try:
                    os.killpg(proc.pid, signum)  # as a terminal does: the run's whole process group
                except ProcessLookupError:
                    pass

    def install(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self.forward)

    def start(self, argv: list[str], out: IO[str] | None, lock: int | None = None) -> subprocess.Popen[bytes]:
        """Start ``argv`` in a process group of its own; ``lock``: a file descriptor it inherits (the run's lock, held
        as long as the run lives, even if the driver is killed)."""
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
        with self._lock:
            proc = subprocess.Popen(
                argv,
                cwd=REPO,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT if out else None,
                start_new_session=True,
                pass_fds=() if lock is None else (lock,),
            )
            self.procs.add(proc)
        nice_session(proc.pid)
        if self.stopping is not None:  # a signal came while it was starting
            os.killpg(proc.pid, self.stopping)
        return proc

    def wait(self, proc: subprocess.Popen[bytes]) -> int:
        code = proc.wait()
        with self._lock:
            self.procs.discard(proc)
        return code


def row_of(run: Run, folder: Path, commit: str, bench_command: str) -> dict[str, Any]:
    """The store's row of a finished run (store.FIELDS), from its run directory and its sessions."""
    run_dir = folder / "run"
    summary = read_json(run_dir / "summary.json") or {}
    episodes = curves.read_episodes(run_dir)
    log = sessions(folder)
    ran = [s["summary"] for s in log if s.get("summary")]
    if run.arm.peer is None:  # a3c: each session's summary counts its own steps and training time
        train_s = sum(s.get("training_time_s") or 0.0 for s in ran)
        steps = sum(s["total_steps"] - (s.get("resumed_from_step") or 0) for s in ran)
        workers = summary.get("workers")
        extra = {k: summary.get(k) for k in A3C_EXTRA}
        extra["bf16"] = (read_json(run_dir / "config.json") or {}).get("bf16")  # (a preset's holds on bf16 CPUs only)
        final, best = (scored(folder, run.arm.evaluate, b) if run.arm.evaluate else None for b in (False, True))
        if final is not None:
            extra["eval_mean_return"], extra["eval_episodes"] = final["mean_return"], final["episodes"]
        if best is not None:  # its best checkpoint (checkpoints/best.pt), evaluated alike
            extra["eval_best_mean_return"] = best["mean_return"]
        spec = run.arm.spec()
    else:
        train_s, steps = summary["training_time_s"], summary["total_steps"]
        workers = summary["hyperparameters"].get("n_envs")
        extra = {}
        spec = {**run.arm.spec(), "hyperparameters": summary["hyperparameters"]}
    threshold = run.threshold if run.threshold is not None else env_threshold(run.env)
    reached = curves.first_reach(episodes, threshold) if threshold is not None else None
    curve = curves.downsample(curves.rolling_mean(episodes))
    return {
        "env": run.env,
        "arm": run.arm.name,
        "seed": run.seed,
        "budget": run.budget,
        "commit": commit,
        "arm_spec": spec,
        "command": log[-1]["command"] if log else "",
        "bench_command": bench_command,
        "total_steps": summary.get("total_steps"),
        "episodes": len(episodes),
        "final_mean_100": curves.final_mean(episodes),
        "best_mean_100": curves.best_mean(episodes),
        "threshold": threshold,
        "reached_at_step": None if reached is None else reached[0],
        "reached_at_s": None if reached is None else round(reached[1], 3),
        "wall_s": summary.get("wall_time_s"),
        "train_s": train_s,
        "steps_per_s": steps / train_s if train_s else None,
        "sessions": len(log),
        "stop_reason": summary.get("stop_reason"),
        "workers": workers,
        "curve": [[p.step, round(p.wall_s, 3), round(p.mean, 3)] for p in curve],
        "machine": log[0].get("machine") if log else host(),  # the machine as the run's first session began
        "finished_at": _now(),
        "extra": extra,
    }


def score_path(folder: Path, best: bool = False) -> Path:
    """Where a3c.evaluate's score of the run of ``folder`` goes: its final checkpoint's, or (``best``) its best's."""
    return folder / ("eval_best.json" if best else "eval.json")


def scored(folder: Path, episodes: int, best: bool = False) -> dict[str, Any] | None:
    """The score a3c.evaluate wrote for the run of ``folder`` (``best``: of checkpoints/best.pt) if it played
    ``episodes`` episodes; None where there is none (not made, cut short, or made for another --evaluate)."""
    made = read_json(score_path(folder, best)) or {}
    ours = made.get("episodes") == episodes and made.get("deterministic", True) is True  # (evaluate's, above)
    return made if ours and made.get("mean_return") is not None else None


def score(run: Run, folder: Path, children: Children, out: IO[str] | None) -> str | None:
    """The arm's scores of a finished run (--evaluate N: a3c.evaluate on the final checkpoint, and on
    checkpoints/best.pt where the evaluations during training made one), those not made yet: a driver stopped while
    it evaluated makes them the next time. None when every score is made; else what stopped it ("stopped", or
    "failed (...)"), and no row may be stored."""
    for best in (False, True) if run.arm.evaluate else ():
        if scored(folder, run.arm.evaluate, best) is not None:
            continue
        if best and not (folder / "run" / "checkpoints" / "best.pt").exists():
            continue
        code = evaluate(run, folder, children, out, best=best)
        if children.stopping is not None:
            return "stopped"
        if code != 0:
            return f"failed (a3c.evaluate exit {code} on the {'best' if best else 'final'} checkpoint)"
    return None


def evaluate(run: Run, folder: Path, children: Children, out: IO[str] | None, best: bool = False) -> int:
    """a3c.evaluate on the run's final checkpoint (``best``: its checkpoints/best.pt) for the arm's ``evaluate``
    episodes, into FOLDER/eval.json (eval_best.json); its exit code. The policy's most likely actions, whatever the
    run evaluated during training (the atari presets sample): every stored score is of one protocol."""
    argv = [sys.executable, "-m", "a3c.evaluate", str(folder / "run"), "--episodes", str(run.arm.evaluate)]
    argv += ["--deterministic"]
    argv += ["--best"] if best else []
    argv += ["--json", str(score_path(folder, best))]
    return children.wait(children.start(argv, out))


def execute(
    run: Run, store: Store, work_dir: Path, commit: str, bench_command: str, children: Children, quiet: bool = False
) -> tuple[str, dict[str, Any] | None]:
    """Run (or resume, or only store) ``run``; its row is appended to ``store`` as soon as it has finished. Returns
    (what happened: "stored", "stopped", "failed (exit N)", "running elsewhere"; the row or None)."""
    folder = run.folder(work_dir, commit)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return "running elsewhere", None
        out = open(folder / "log.txt", "a") if quiet else None
        try:
            return _execute(run, store, folder, commit, bench_command, children, out, lock.fileno())
        finally:
            if out is not None:
                out.close()


def _execute(
    run: Run,
    store: Store,
    folder: Path,
    commit: str,
    bench_command: str,
    children: Children,
    out: IO[str] | None,
    lock: int,
) -> tuple[str, dict[str, Any] | None]:
    run_dir = folder / "run"
    what = state(run, folder.parent, commit)
    record_arm(folder, run.arm)
    if what != "store":
        if what == "run":  # stopped before a checkpoint (or a peer): from the start, its earlier sessions set aside
            if run_dir.exists():
                shutil.rmtree(run_dir)
            _set_aside_sessions(folder)
        argv = command(run.arm, run.env, run.seed, run.budget, run_dir, resume=what == "resume")
        entry = {"session_id": uuid.uuid4().hex, "command": shown(argv), "started_at": _now(), "machine": host()}
        _log_session(folder, {**entry, "ended_at": None, "exit_code": None, "summary": None})
        code = children.wait(children.start(argv, out, lock))
        summary = read_json(run_dir / "summary.json")
        _log_session(folder, {**entry, "ended_at": _now(), "exit_code": code, "summary": summary})
        if not finished(summary, run.budget):
            return ("stopped" if children.stopping is not None else f"failed (exit {code})"), None
    failed = score(run, folder, children, out)
    if failed is not None:
        return failed, None
    row = row_of(run, folder, commit, bench_command)
    store.append(row)
    return "stored", row
