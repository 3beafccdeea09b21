"""Helpers for the tests that run `python -m a3c.train` as a real process tree: start it in its own session (so a
test can signal its whole process group), find its descendants through /proc, and wait for things with deadlines."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

START_METHODS = ("fork", "forkserver", "spawn")
# Every deadline of a test is how long the event it waits for takes on an idle machine, times PATIENCE: a deadline
# only tells a hang from a late event, and a machine kept busy by other jobs (CI beside a benchmark) makes events late
# by several times, never early. A3C_TEST_PATIENCE sets it.
PATIENCE = float(os.environ.get("A3C_TEST_PATIENCE", "10"))


# the aggregate scalar tags of docs/design.md that every run writes (per-worker tags: workers/<rank>/...)
DESIGN_TAGS = frozenset(
    {
        "charts/episodic_return",
        "charts/episodic_length",
        "charts/SPS",
        "losses/loss",
        "losses/policy_loss",
        "losses/value_loss",
        "losses/entropy",
        "perf/updates_per_s",
        "perf/policy_lag",
        "perf/grad_norm",
        "perf/skipped_updates",
        "perf/restarts",
    }
)


def train_cmd(run_dir: Path, *extra: str, start_method: str = "fork", workers: int = 2) -> list[str]:
    """A small, fast training command; ``extra`` flags come last (and override these). ``start_method`` is left out
    under --backend serial, which starts no process (and refuses the flag)."""
    flags = " ".join(extra)
    serial = "--backend serial" in flags or "--backend=serial" in flags
    return [
        sys.executable,
        "-m",
        "a3c.train",
        "--workers",
        str(workers),
        "--envs-per-worker",
        "2",
        *([] if serial else ["--start-method", start_method]),
        "--run-dir",
        str(run_dir),
        "--checkpoint-every",
        "0",
        *extra,
    ]


class Run:
    """A training process started in a new session; stderr goes to a file (a full pipe would block it)."""

    def __init__(self, cmd: list[str], log: Path, cwd: Path | None = None) -> None:
        self.log_path = log
        self.log = open(log, "w")
        # (without A3C_WORKER_RANK: a test that ran a Worker in this process set it, and a command inheriting it would
        # take its main process and evaluator for worker 0: envs/Faulty-v0 fires by it)
        env = {k: v for k, v in os.environ.items() if k != "A3C_WORKER_RANK"}
        self.proc = subprocess.Popen(
            cmd, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True, cwd=cwd, env=env
        )
        self.pid = self.proc.pid

    def output(self) -> str:
        if not self.log.closed:
            self.log.flush()
        return self.log_path.read_text()

    def wait(self, timeout: float) -> int:
        """The exit code, waiting up to ``timeout`` seconds on an idle machine (times PATIENCE)."""
        try:
            return self.proc.wait(timeout=timeout * PATIENCE)
        finally:
            self.log.close()

    def signal_group(self, sig: int) -> None:
        os.killpg(self.pid, sig)  # what a terminal does on Ctrl-C: the whole foreground process group

    def cleanup(self) -> None:
        """After a test: nothing of this run may survive it, whatever the test's outcome."""
        if self.proc.poll() is None:  # (once reaped, its pid may be another process's: nothing of it to find)
            kill_tree(self.pid)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        self.log.close()


def _ppids() -> dict[int, int]:
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # the command name (field 2) may hold spaces and parentheses: parse after the last ')'
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] != "Z":  # zombies have exited: they hold no resources and are not "left running"
            out[int(entry)] = int(fields[1])
    return out


def descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (children, grandchildren: forkserver workers are the server's children)."""
    ppids = _ppids()
    found, frontier = set(), {pid}
    while frontier:
        frontier = {p for p, parent in ppids.items() if parent in frontier} - found
        found |= frontier
    return found


def kill_tree(pid: int) -> None:
    """SIGKILL ``pid`` and every process below it, all stopped first (SIGSTOP) so that none starts another (a
    supervisor replacing a worker that died first) between the listing and the kill."""
    stopped: set[int] = set()
    while new := ({pid} | descendants(pid)) - stopped:
        for p in new:
            try:
                os.kill(p, signal.SIGSTOP)
            except ProcessLookupError:
                pass
        stopped |= new
    for p in stopped:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass


def alive(pids: set[int]) -> set[int]:
    live = set(_ppids())
    return {p for p in pids if p in live}


def wait_for(predicate: Callable[[], object], timeout: float, interval: float = 0.05) -> bool:
    """Whether ``predicate()`` came true within ``timeout`` seconds on an idle machine (times PATIENCE: the deadline
    says that the event will not come, not that it came late)."""
    deadline = time.monotonic() + timeout * PATIENCE
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())


def shm_entries() -> set[str]:
    return set(os.listdir("/dev/shm"))


def leaked_shm(before: set[str], pids: set[int]) -> set[str]:
    """Entries of /dev/shm that appeared since ``before``, belong to this run and no live process holds (call it once
    the run's processes have exited): torch names its segments torch_<pid>_..., multiprocessing its semaphores
    sem.mp-... and shared memory psm_... with no pid in the name, so an entry of those two kinds that another process on
    the machine (another run, another session) still maps or keeps open is that process's, not a leak."""
    new = shm_entries() - before
    ours = {e for e in new if e.startswith(("sem.mp-", "psm_")) or any(f"_{p}_" in e for p in pids)}
    return ours - held_shm(exclude=pids) if ours else ours


def held_shm(exclude: frozenset[int] | set[int] = frozenset()) -> set[str]:
    """The /dev/shm entries some live process maps or holds open (the processes /proc lets this one read), but the
    processes ``exclude`` (a run's own: one of them still holding an entry is the run's, not another's)."""
    held: set[str] = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if int(pid) in exclude:
            continue
        try:
            with open(f"/proc/{pid}/maps") as maps:
                held.update(line.rsplit("/dev/shm/", 1)[1].split(" ")[0] for line in maps if "/dev/shm/" in line)
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:  # (gone meanwhile, or not ours to read)
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:  # (closed meanwhile)
                continue
            if target.startswith("/dev/shm/"):
                held.add(target[len("/dev/shm/") :].split(" ")[0])
    return held


def run_backends(
    tmp_path: Path, backends: tuple[str, ...], *flags: str, outputs: dict[str, str] | None = None
) -> dict[str, Path]:
    """The same small training command under each of ``backends`` (each must exit 0; a backend may carry its own
    flags: "ray --ray-same-node ray"); their run directories, by backend. ``outputs``: filled with each one's stderr."""
    dirs = {}
    for backend in backends:
        name, *own_flags = backend.split()
        run_dir = dirs[backend] = tmp_path / name
        done = subprocess.run(train_cmd(run_dir, *flags, "--backend", name, *own_flags), capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        if outputs is not None:
            outputs[backend] = done.stderr
    return dirs


def run_files(run_dir: Path) -> list[str]:
    """The names in a run directory, but the event files (named by time and host)."""
    return sorted(p.name for p in Path(run_dir).iterdir() if not p.name.startswith("events."))


def scalar_tags(run_dir: Path) -> set[str]:
    """The scalar tags TensorBoard reads from the event files directly in ``run_dir``."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    acc.Reload()
    return set(acc.Tags()["scalars"])


def summary(run_dir: Path) -> dict:
    return json.loads((run_dir / "summary.json").read_text())


def episodes_started(run_dir: Path, n: int = 1) -> bool:
    """True once episodes.csv holds at least ``n`` episodes (the workers are up and stepping)."""
    path = run_dir / "episodes.csv"
    try:
        return len(path.read_text().splitlines()) > n
    except OSError:
        return False


def episode_rows(run_dir: Path) -> list[dict[str, str]]:
    """The rows of RUN_DIR/episodes.csv."""
    with open(Path(run_dir) / "episodes.csv") as f:
        return list(csv.DictReader(f))


def indexes_by_worker(rows: list[dict[str, str]]) -> dict[int, list[int]]:
    """Each worker's episode indexes, in file order."""
    by_worker: dict[int, list[int]] = defaultdict(list)
    for row in rows:
        by_worker[int(row["worker"])].append(int(row["index"]))
    return by_worker


def indexes_contiguous(rows: list[dict[str, str]]) -> bool:
    """Every worker's indexes are 0, 1, 2, ... in file order: none missing, none twice."""
    return all(idx == list(range(len(idx))) for idx in indexes_by_worker(rows).values())
