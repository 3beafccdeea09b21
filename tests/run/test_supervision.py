"""Supervision: a worker killed, crashed or hung is restarted (same rank, episode indexes going on) up to
--max-restarts; past that the run stops with exit 1, the rank, the cause and the worker's own traceback. Non-finite
updates are skipped and counted, and too many in a row stop the run. Uses envs/Faulty-v0 (envs/faulty.py)."""

import multiprocessing
import os
import signal
import subprocess
import sys
import types

import numpy as np
import pytest
import torch
from procs import (
    PATIENCE,
    START_METHODS,
    Run,
    alive,
    episode_rows,
    indexes_by_worker,
    indexes_contiguous,
    summary,
    train_cmd,
    wait_for,
)

import a3c.run.supervisor as supervisor_module
from a3c.record.rows import STATS_WIDTH, Stat
from a3c.run.backends.shared_memory import ProcessLauncher
from a3c.run.supervisor import Supervisor
from a3c.run.worker import _cut_to_bytes


@pytest.mark.parametrize("start_method", START_METHODS)
def test_worker_killed_with_sigkill_is_restarted_and_the_run_goes_on(tmp_path, start_method):
    """The run's budget is out of reach and it is stopped (Ctrl-C) only once the killed rank's new process has
    written episodes: it cannot end before the kill lands or before the restart (with a 60,000-step budget, a second
    of training, a busy machine could let it); then the counts stayed exact through the kill."""
    run_dir, pids = tmp_path / "run", tmp_path / "pids"
    pids.mkdir()
    cmd = train_cmd(
        run_dir,
        "--env",
        "envs/Faulty-v0",
        "--env-kwargs",
        f"pid_dir={pids}",
        "--total-steps",
        "100000000",
        start_method=start_method,
    )
    run = Run(cmd, tmp_path / "log.txt")
    try:
        pid_file, victim = _running_rank(run, run_dir, pids, 1)
        os.kill(victim, signal.SIGKILL)  # mid-run: in a rollout or in the middle of an update
        assert wait_for(lambda: int(pid_file.read_text()) != victim, timeout=60), run.output()
        written = _rows_of(run_dir, 1)
        assert wait_for(lambda: _rows_of(run_dir, 1) > written, timeout=60), run.output()  # the new process's
        run.signal_group(signal.SIGINT)
        code = run.wait(timeout=120)
        out = run.output()
        assert code == 128 + signal.SIGINT, out
        assert "worker 1 was killed by signal SIGKILL; restarting it" in out
        s = summary(run_dir)
        assert s["restarts"] >= 1 and s["stop_reason"] == "interrupted"
        rows = episode_rows(run_dir)
        by_worker = indexes_by_worker(rows)
        assert indexes_contiguous(rows), {w: idx[:5] for w, idx in by_worker.items()}  # rank 1 went on counting
        # the board's counters and the stats the worker publishes stayed consistent through the kill
        ckpt = torch.load(run_dir / "checkpoints" / "latest.pt", weights_only=True)
        assert int(ckpt["episodes_written"][1]) == len(by_worker[1])
        assert int(ckpt["worker_steps"].sum()) == s["total_steps"]
        assert s["updates"] == int(ckpt["worker_stats"][:, Stat.UPDATES].sum())
    finally:
        run.cleanup()


def test_a_worker_stopped_alone_by_sigterm_is_restarted_not_counted_as_finished(tmp_path):
    """Found in review: a worker that exited with code 0 counted as done whatever the run's state, and its SIGTERM
    handler ends the loop cleanly (code 0): a SIGTERM to the workers alone (a scheduler's, an OOM killer's polite
    first step) ended the run at once with exit 0 and stop_reason "total_steps" far short of --total-steps. A worker
    stopped by SIGTERM now exits 143, and one that ends while the run goes on is restarted like a crash."""
    run_dir, pids = tmp_path / "run", tmp_path / "pids"
    pids.mkdir()
    cmd = train_cmd(run_dir, "--env", "envs/Faulty-v0", "--env-kwargs", f"pid_dir={pids}", "--total-steps", "100000000")
    run = Run(cmd, tmp_path / "log.txt")
    try:
        pid_file, victim = _running_rank(run, run_dir, pids, 1)
        os.kill(victim, signal.SIGTERM)
        assert wait_for(lambda: int(pid_file.read_text()) != victim or run.proc.poll() is not None, timeout=60)
        assert run.proc.poll() is None, run.output()  # the run goes on (it ended here, "reached --total-steps")
        run.signal_group(signal.SIGINT)
        assert run.wait(timeout=120) == 128 + signal.SIGINT, run.output()
        assert "worker 1 was stopped by SIGTERM; restarting it" in run.output()
        assert summary(run_dir)["stop_reason"] == "interrupted"
    finally:
        run.cleanup()


def test_a_rollout_longer_than_the_worker_timeout_is_not_taken_for_a_hang(tmp_path):
    """Found by probing: a worker beat only between updates, so one rollout of a slow env longer than --worker-timeout
    (a 10 ms env, PPO's 1,024 steps x 8 envs: 82 s against the default 60) had a healthy worker killed as hung,
    restarted and the run stopped. It beats during the rollout too (at most once a second, as during an update)."""
    run_dir = tmp_path / "run"
    cmd = train_cmd(
        run_dir,
        "--env",
        "envs/SlowCartPole-v1",
        "--env-kwargs",
        "latency=0.05",
        "--workers",
        "1",
        "--envs-per-worker",
        "8",
        "--n-steps",
        "10",  # 80 env steps of 50 ms: a 4 s rollout
        "--worker-timeout",
        "3",
        "--max-restarts",
        "0",
        "--total-steps",
        "240",
        "--eval-every",
        "0",
    )
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300 * PATIENCE)
    assert done.returncode == 0, done.stderr
    assert "hung" not in done.stderr


def _calls_sys_exit_0(terminate):
    sys.exit(0)


def test_an_env_that_calls_sys_exit_0_in_a_worker_is_a_failure_not_a_finish():
    """sys.exit(0) from the env (or a library it calls) ended the worker with code 0: "done" to the supervisor."""
    from a3c.run.worker import run_as_process

    process = multiprocessing.get_context("fork").Process(target=run_as_process, args=(_calls_sys_exit_0, None))
    process.start()
    process.join(60 * PATIENCE)
    assert process.exitcode == 1


def _running_rank(run, run_dir, pids, rank: int):
    """(its pid file, its pid) once worker ``rank`` of ``run`` runs and the run has written episodes."""
    pid_file = pids / f"rank-{rank}.pid"
    assert wait_for(pid_file.exists, timeout=60), run.output()
    assert wait_for(lambda: (run_dir / "episodes.csv").exists(), timeout=60)
    return pid_file, int(pid_file.read_text())


def _rows_of(run_dir, rank: int) -> int:
    """How many episode rows ``rank`` has written so far (whole lines: the run may be writing the last one)."""
    lines = (run_dir / "episodes.csv").read_text().splitlines(keepends=True)[1:]
    return sum(line.endswith("\n") and line.split(",", 1)[0] == str(rank) for line in lines)


@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_crash_past_the_restart_limit_exits_1_with_the_traceback(tmp_path, start_method):
    run_dir = tmp_path / "run"
    cmd = train_cmd(
        run_dir,
        "--env",
        "envs/Faulty-v0",
        "--env-kwargs",
        "crash_at=7",
        "crash_ranks=1",
        "--max-restarts",
        "1",
        "--total-steps",
        "10000000",
        start_method=start_method,
    )
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 1, proc.stderr
    err = proc.stderr
    assert err.count("restarting it") == 1
    assert "a3c: error: worker 1 exited with code 1" in err and "--max-restarts" in err
    # the worker's own traceback, sent over its pipe: down to the line of the env that raised
    assert "worker 1's traceback:\nTraceback (most recent call last):" in err
    assert 'envs/faulty.py", line' in err
    assert "RuntimeError: envs/Faulty-v0: injected crash at step 7 on rank 1" in err
    s = summary(run_dir)
    assert s["restarts"] == 1 and s["stop_reason"] == "worker 1 exited with code 1"
    assert (run_dir / "checkpoints" / "latest.pt").is_file()  # final checkpoint even on failure


def test_hung_worker_is_killed_and_restarted(tmp_path):
    """One worker, the one made to hang: with a second one beside it, a machine busy enough to keep that healthy
    worker off the CPU for --worker-timeout had it reported hung instead."""
    run_dir = tmp_path / "run"
    cmd = train_cmd(
        run_dir,
        "--env",
        "envs/Faulty-v0",
        "--env-kwargs",
        "hang_at=40",
        "hang_ranks=0",
        "--worker-timeout",
        "1.5",
        "--max-restarts",
        "1",
        "--total-steps",
        "10000000",
        workers=1,
    )
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 1, proc.stderr
    assert "worker 0 hung: no heartbeat for" in proc.stderr and "restarting it (restart 1 of 1" in proc.stderr
    assert "a3c: error: worker 0 hung" in proc.stderr
    assert summary(run_dir)["restarts"] == 1


def test_one_nan_observation_skips_updates_and_the_run_goes_on(tmp_path):
    run_dir = tmp_path / "run"
    cmd = train_cmd(
        run_dir, "--env", "envs/Faulty-v0", "--env-kwargs", "nan_at=30", "nan_for=1", "--total-steps", "4000"
    )
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    s = summary(run_dir)
    assert s["skipped_updates"] >= 1 and s["updates"] > 0
    ckpt = torch.load(run_dir / "checkpoints" / "latest.pt", weights_only=True)
    assert torch.isfinite(ckpt["model"]).all()  # the NaN never reached the shared model


def test_one_nan_observation_never_reaches_the_normalisation_statistics(tmp_path):
    """The same fault with --normalize-obs: the run goes on as without it (before, the NaN made the shared mean NaN
    and every later update was skipped until the run stopped), the NaN samples are counted, and the checkpoint's
    statistics are finite (a resume or a3c.load applies them)."""
    run_dir = tmp_path / "run"
    cmd = train_cmd(
        run_dir,
        "--env",
        "envs/Faulty-v0",
        "--env-kwargs",
        "nan_at=20",
        "nan_for=1",
        "--normalize-obs",
        "--max-skipped-in-row",
        "10",
        "--total-steps",
        "3000",
    )
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    s = summary(run_dir)
    assert s["nonfinite_samples"] == 4  # 2 workers x 2 envs, one NaN observation each
    assert 1 <= s["skipped_updates"] <= 4 and s["updates"] > s["skipped_updates"]
    ckpt = torch.load(run_dir / "checkpoints" / "latest.pt", weights_only=True)
    assert torch.isfinite(ckpt["model"]).all()
    assert all(torch.isfinite(value).all() for value in ckpt["obs_stats"].values())
    assert ckpt["obs_stats"]["count"] > 1000  # every other observation counted


def test_non_finite_updates_in_a_row_stop_the_run(tmp_path):
    run_dir = tmp_path / "run"
    cmd = train_cmd(
        run_dir,
        "--env",
        "envs/Faulty-v0",
        "--env-kwargs",
        "nan_at=30",
        "nan_for=0",  # NaN forever from step 30
        "nan_ranks=1",
        "--max-skipped-in-row",
        "20",
        "--total-steps",
        "10000000",
    )
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 1, proc.stderr
    assert "worker 1 skipped" in proc.stderr and "updates in a row for a non-finite loss" in proc.stderr
    assert "Traceback" not in proc.stderr
    s = summary(run_dir)
    assert s["skipped_updates"] >= 20
    ckpt = torch.load(run_dir / "checkpoints" / "latest.pt", weights_only=True)
    assert torch.isfinite(ckpt["model"]).all()


# -- the Supervisor on its own, with trivial targets (fork: fast) -----------------------------------------------------
def _exit_with(rank, code, incarnation, errors):
    errors.close()
    sys.exit(code)


def _sleep(rank, seconds, incarnation, errors):
    import time

    time.sleep(seconds)


def test_supervisor_stops_restarting_at_the_limit_and_counts_incarnations():
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    stats = np.zeros((1, STATS_WIDTH))
    launcher = ProcessLauncher(ctx, _exit_with, lambda rank: (rank, 3))
    sup = Supervisor(launcher, 1, lambda: stats, worker_timeout=30.0, max_restarts=2, log=lambda line: None)
    sup.start_all()
    assert wait_for(lambda: sup.poll(stopping=False) is not None or sup.failure is not None, timeout=30)
    failure = sup.failure
    assert failure is not None and failure.rank == 0 and failure.cause == "exited with code 3"
    assert sup.restarts == 2 and list(sup.incarnations()) == [3]


def test_supervisor_kills_a_worker_without_heartbeat():
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    stats = np.zeros((1, STATS_WIDTH))
    launcher = ProcessLauncher(ctx, _sleep, lambda rank: (rank, 60))
    sup = Supervisor(launcher, 1, lambda: stats, worker_timeout=0.5, max_restarts=0, log=lambda line: None)
    sup.start_all()
    stats[0, Stat.HEARTBEAT] = sup.slots[0].started_at + 0.01  # one heartbeat, then silence
    pid = sup.pids()[0]
    assert wait_for(lambda: sup.poll(stopping=False) is not None, timeout=10)
    assert sup.failure.cause.startswith("hung: no heartbeat")
    assert not alive({pid})


def test_a_crash_with_a_huge_non_ascii_message_is_reported_as_a_crash(tmp_path):
    """Risk closed (f374bab): the traceback was cut to 16,000 characters, but the pipe's buffer (64 KiB) holds
    bytes; cut to bytes now, a crash whose text is mostly 4-byte characters still reaches the supervisor at once
    (a blocked send would have shown as a hang after --worker-timeout)."""
    run_dir = tmp_path / "run"
    cmd = train_cmd(
        run_dir,
        "--env",
        "envs/Faulty-v0",
        "--env-kwargs",
        "crash_at=7",
        "crash_ranks=0",
        "crash_pad=40000",
        "--max-restarts",
        "0",
        "--worker-timeout",
        "30",
        "--total-steps",
        "10000000",
    )
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "a3c: error: worker 0 exited with code 1" in proc.stderr and "hung" not in proc.stderr
    assert "worker 0's traceback:" in proc.stderr and "\N{GRINNING FACE}" in proc.stderr


def test_traceback_is_cut_to_bytes_at_a_character_boundary():
    text = "Traceback\n" + "\N{GRINNING FACE}" * 10_000 + "\nRuntimeError: end"
    cut = _cut_to_bytes(text, 16_000)
    assert len(cut.encode()) <= 16_000 and cut.endswith("RuntimeError: end")
    assert _cut_to_bytes("short", 16_000) == "short"


class _PendingLauncher:
    """A launcher whose worker's process comes up only when the test says so (a Ray actor waiting to be placed)."""

    def __init__(self):
        self.up_at = None
        self.killed = []

    def start(self, rank, incarnation):
        pass

    def exitcode(self, rank):
        return None

    def running_since(self, rank):
        return self.up_at

    def traceback(self, rank):
        return None

    def kill(self, rank):
        self.killed.append(rank)

    def pids(self):
        return []


def _supervise_pending(monkeypatch):
    """One worker through a _PendingLauncher, started, under a clock the test moves (clock[0]: the supervisor's
    time.time())."""
    clock = [1000.0]
    monkeypatch.setattr(supervisor_module, "time", types.SimpleNamespace(time=lambda: clock[0]))
    launcher = _PendingLauncher()
    stats = np.zeros((1, STATS_WIDTH))
    sup = Supervisor(launcher, 1, lambda: stats, worker_timeout=5.0, max_restarts=0, log=lambda line: None)
    sup.start_all()
    return clock, launcher, sup


def test_a_worker_whose_process_is_not_up_yet_is_not_hung_and_its_grace_counts_from_when_it_is(monkeypatch):
    """The loaded-machine failure of the Ray tests: actors placed more than --worker-timeout after they were asked
    for were killed as 'hung' before they had run a line. Time is the test's own (the supervisor's clock patched)."""
    clock, launcher, sup = _supervise_pending(monkeypatch)
    clock[0] += supervisor_module.PLACEMENT_GRACE_S - 1  # not up for minutes: still starting, not hung
    assert sup.poll(stopping=False) is None and not launcher.killed
    launcher.up_at = clock[0]  # its process is up now: the start-up grace counts from here
    clock[0] += supervisor_module.STARTUP_GRACE_S - 1
    assert sup.poll(stopping=False) is None and not launcher.killed
    clock[0] += 2  # up, and silent past the start-up grace: hung
    failure = sup.poll(stopping=False)
    assert failure is not None and launcher.killed == [0]
    assert failure.cause.startswith("hung: no heartbeat for 61.0 s after its process started")


def test_a_worker_whose_process_never_comes_up_fails_to_start(monkeypatch):
    clock, launcher, sup = _supervise_pending(monkeypatch)
    clock[0] += supervisor_module.PLACEMENT_GRACE_S + 1
    failure = sup.poll(stopping=False)
    assert failure is not None and launcher.killed == [0]
    assert failure.describe() == "worker 0 did not start: its process was not up 601 s after it was asked for"
