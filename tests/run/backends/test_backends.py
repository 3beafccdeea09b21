"""The backend interfaces (a3c/run/backends): the shared-memory coordinator and channel, the process launcher's orderly
stop, and the serial backend, which must produce the same run directory and tags as worker processes."""

import json
import multiprocessing as mp
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import torch
from procs import (
    DESIGN_TAGS,
    PATIENCE,
    episode_rows,
    indexes_contiguous,
    run_backends,
    run_files,
    scalar_tags,
    train_cmd,
    wait_for,
)

from a3c.learn.model import build_model, flatten_parameters
from a3c.learn.optim import make_optimizer
from a3c.record.rows import FIELD, FIELDS, Stat
from a3c.run.backends.serial import SerialLauncher
from a3c.run.backends.shared_memory import ProcessLauncher, SharedMemoryCoordinator, SharedRun
from a3c.run.board import EpisodeBoard
from a3c.run.worker import worker_main
from a3c.spec.config import Config
from a3c.spec.environment import describe_env


def coordinator(workers=2, total_steps=10**9, cfg=None):
    cfg = cfg or Config(workers=workers)
    params, _ = flatten_parameters(build_model(describe_env(cfg.env), cfg)[0], shared=True)
    optimizer = make_optimizer(cfg.optimizer, params, cfg.lr, slots=workers)
    return SharedMemoryCoordinator(SharedRun(params, optimizer, EpisodeBoard(workers, capacity=64), total_steps))


def row(ret=1.0, step=0):
    values = np.zeros(len(FIELDS))
    values[FIELD["return"]], values[FIELD["global_step"]] = ret, step
    return values


def test_snapshot_reads_the_step_counters_once():
    """Risk closed (f374bab): a checkpoint read global_step and the per-worker steps at two instants, so under a
    running worker they disagreed. The snapshot reads the counters once."""
    coord = coordinator()
    channel = coord.channel(1)
    done = threading.Event()

    def stepping():
        while not done.is_set():
            channel.publish(40, [], channel.load_stats())

    thread = threading.Thread(target=stepping)
    thread.start()
    try:
        for _ in range(2000):
            snap = coord.snapshot()
            assert snap["global_step"] == int(snap["worker_steps"].sum())
    finally:
        done.set()
        thread.join()


def test_publish_makes_steps_visible_before_the_episodes_they_contain():
    """An episode the main process can drain is always within the global step read after it (what makes a
    checkpoint's global_step cover every episode it counts)."""
    coord = coordinator()
    seen = []
    original = coord.board.write

    def write(rank, values):
        seen.append(coord.global_step())  # the global step at the moment the row is published
        return original(rank, values)

    coord.board.write = write
    coord.channel(0).publish(40, [row(step=40)], coord.channel(0).load_stats())
    assert seen == [40]


def test_restore_with_another_worker_count_keeps_the_global_step_and_episode_counters():
    big = coordinator(workers=3)
    for rank in range(3):
        ch = big.channel(rank)
        stats = ch.load_stats()
        stats[Stat.UPDATES] = 10 + rank
        ch.publish(100 * (rank + 1), [row(), row()], stats)
    big.drain()
    snap = big.snapshot()
    small = coordinator(workers=2)
    small.restore(snap)
    assert small.global_step() == 600 and list(small.board.written) == [2, 2]
    assert list(small.stats()[:, Stat.UPDATES]) == [10 + 12, 11]  # rank 2's updates, like its steps, go to rank 0
    assert small.drain() == []  # the restored episodes were read before the snapshot: none is read again
    small.channel(1).publish(0, [row(ret=5.0)], small.channel(1).load_stats())
    (episode,) = small.drain()
    assert (episode.worker, episode.index, episode["return"]) == (1, 2, 5.0)
    torch.testing.assert_close(small.params, big.params)


def _session(workers, checkpoint, episodes):
    """A session of ``workers`` ranks resumed from ``checkpoint`` (None: a new run), in which rank r finishes
    ``episodes[r]`` episodes (100 steps and one update each); returns its final checkpoint's snapshot and the
    (worker, index) of the episodes it read."""
    coord = coordinator(workers=workers)
    if checkpoint is not None:
        coord.restore(checkpoint)
    for rank, count in enumerate(episodes):
        ch = coord.channel(rank)
        stats = ch.load_stats()
        stats[Stat.UPDATES] += count
        ch.publish(100 * count, [row() for _ in range(count)], stats)
    read = [(ep.worker, ep.index) for ep in coord.drain()]
    return coord.snapshot(), read


def test_resume_with_fewer_workers_then_more_keeps_every_rank_s_episode_counter():
    """Bug (issue 22, item 2): resumed with fewer workers, the checkpoint kept the new ranks' episode counters only, so
    the next resume trimmed the other ranks' rows from episodes.csv, and a resume with more workers again restarted
    their indexes at 0. Now 2 -> 1 -> 1 -> 2 workers: every checkpoint counts every rank the run has had, rank 1's
    indexes go on where they stopped, and the step and update totals stay exact."""
    snap, read = _session(2, None, [3, 2])
    assert list(snap["episodes_written"]) == [3, 2]
    seen = set(read)
    for workers, episodes, written in ((1, [1], [4, 2]), (1, [2], [6, 2]), (2, [1, 3], [7, 5])):
        snap, read = _session(workers, snap, episodes)
        assert list(snap["episodes_written"]) == written
        # the vectors a checkpoint's consistency check wants: one length, every rank the run has had
        assert len(snap["worker_steps"]) == len(snap["worker_stats"]) == len(written)
        assert snap["global_step"] == int(snap["worker_steps"].sum())
        assert not seen & set(read)  # no (worker, index) twice
        seen |= set(read)
    assert sorted(seen) == [(0, i) for i in range(7)] + [(1, i) for i in range(5)]
    assert snap["global_step"] == 100 * 12
    assert int(snap["worker_stats"][:, Stat.UPDATES].sum()) == 12  # the run's updates, summed over every session


def test_channel_stop_and_interval_follow_the_coordinator():
    coord = coordinator(total_steps=100)
    ch = coord.channel(0)
    assert not ch.should_stop() and ch.interval() == 0
    coord.next_interval()
    assert ch.interval() == 1
    ch.publish(100, [], ch.load_stats())
    assert ch.should_stop() and coord.should_stop()
    coord2 = coordinator()
    coord2.request_stop()
    assert coord2.channel(1).should_stop()


# -- the process launcher's orderly stop -------------------------------------------------------------------------
def test_sigterm_lets_a_worker_finish_its_update_and_exit_cleanly():
    """Risk closed (f374bab): a straggler was SIGTERMed wherever it was, possibly inside the optimizer step, and the
    final checkpoint could hold a half-applied update. SIGTERM now sets a flag read at the top of the loop: the
    worker finishes the update in hand and exits, every update it counted applied in full; with 143 (128 + SIGTERM),
    not 0, which would tell the supervisor that the run is over for it."""
    cfg = Config(env="envs/SlowCartPole-v1", env_kwargs={"latency": 0.02}, workers=1, envs_per_worker=1, n_steps=20)
    coord = coordinator(workers=1, cfg=cfg)
    spec = describe_env(cfg.env, cfg.env_kwargs)
    launcher = ProcessLauncher(
        mp.get_context("fork"), worker_main, lambda rank: (rank, coord.channel(rank), cfg, spec, time.time(), 0)
    )
    launcher.start(0, 0)
    try:
        assert wait_for(lambda: coord.stats()[0, Stat.UPDATES] >= 1, timeout=60)
        time.sleep(0.1)  # inside the next rollout (20 steps x 20 ms)
        launcher.procs[0].process.terminate()
        launcher.procs[0].process.join(timeout=10 * PATIENCE)  # (an event: the process's exit)
        assert launcher.exitcode(0) == 128 + signal.SIGTERM
        assert int(coord.optimizer.steps[0]) == int(coord.stats()[0, Stat.UPDATES])
    finally:
        launcher.kill_all()


# -- the serial backend ------------------------------------------------------------------------------------------
class _Scripted:
    def __init__(self, fail_at=None, stop_after=3):
        self.steps, self.fail_at, self.stop_after, self.closed = 0, fail_at, stop_after, False

    def step(self):
        self.steps += 1
        if self.steps == self.fail_at:
            raise RuntimeError("boom")

    def should_stop(self):
        return self.steps >= self.stop_after

    def close(self):
        self.closed = True


def test_serial_launcher_runs_workers_in_turn_and_reports_crashes():
    made = {}

    def make(rank, incarnation):
        made[rank, incarnation] = _Scripted(fail_at=2 if rank == 1 else None)
        return made[rank, incarnation]

    launcher = SerialLauncher(make)
    launcher.start(0, 0)
    launcher.start(1, 0)
    launcher.wait(1.0)  # returns early: every worker has ended
    assert launcher.exitcode(0) == 0 and made[0, 0].steps == 3 and made[0, 0].closed
    assert launcher.exitcode(1) == 1 and "RuntimeError: boom" in launcher.traceback(1) and made[1, 0].closed
    launcher.start(1, 1)  # a restart builds a new worker with the next incarnation
    assert launcher.exitcode(1) is None and (1, 1) in made


def test_serial_backend_writes_the_same_run_directory_and_tags(tmp_path):
    flags = ("--total-steps", "4000", "--checkpoint-every", "2000")
    dirs = run_backends(tmp_path, ("shared-memory", "serial"), *flags)
    assert run_files(dirs["serial"]) == run_files(dirs["shared-memory"])
    tags = scalar_tags(dirs["serial"])
    assert tags == scalar_tags(dirs["shared-memory"]) and DESIGN_TAGS <= tags
    serial = json.loads((dirs["serial"] / "summary.json").read_text())
    assert serial["total_steps"] >= 4000 and serial["updates"] > 0 and serial["lost_episodes"] == 0
    assert set(serial) == set(json.loads((dirs["shared-memory"] / "summary.json").read_text()))
    rows = episode_rows(dirs["serial"])
    assert indexes_contiguous(rows) and {int(r["worker"]) for r in rows} == {0, 1}
    assert list((dirs["serial"] / "checkpoints").glob("step-*.pt"))  # periodic checkpoints in serial too


def test_serial_backend_restarts_a_crashed_worker(tmp_path):
    run_dir = tmp_path / "run"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "a3c.train",
            "--backend",
            "serial",
            "--workers",
            "2",
            "--envs-per-worker",
            "1",
            "--env",
            "envs/Faulty-v0",
            "--env-kwargs",
            "crash_at=600",
            "crash_ranks=1",
            # rank 0 then stalls for 0.5 s (its turn blocks the one process): the tick ends while the run goes on, so
            # the supervisor sees the crash before the run is over, however fast the turns are (2,000 steps of
            # CartPole now fit in one 0.25 s tick, and a crash found at the end is not restarted)
            "hang_at=700",
            "hang_ranks=0",
            "hang_s=0.5",
            "--total-steps",
            "2000",
            "--run-dir",
            str(run_dir),
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert "worker 1 exited with code 1 (RuntimeError: envs/Faulty-v0: injected crash at step 600" in done.stderr
    assert "restarting it" in done.stderr
    assert json.loads((run_dir / "summary.json").read_text())["restarts"] == 1


def test_a_push_applies_the_gradient_at_the_learning_rate_the_worker_gives():
    """The schedule is the worker's (a3c.learn.update.step): the channel applies the lr it is handed, not its own."""
    cfg = Config(workers=1, lr=1e-2, lr_schedule="linear")
    params, _ = flatten_parameters(build_model(describe_env(cfg.env), cfg)[0], shared=True)
    coord = SharedMemoryCoordinator(
        SharedRun(params, make_optimizer("adam", params, cfg.lr, slots=1), EpisodeBoard(1), 1000)
    )
    ch = coord.channel(0)
    before = params.clone()
    ch.push(torch.ones_like(params), 0, 2.5e-3)
    # Adam's first step moves every parameter by lr * sign(grad): the lr pushed, a quarter of --lr
    torch.testing.assert_close((before - params).abs(), torch.full_like(params, 2.5e-3), rtol=1e-4, atol=1e-9)


@pytest.mark.parametrize("backend, workers", [("serial", 2), ("shared-memory", 1)])
def test_the_same_seed_reproduces_a_serial_or_single_worker_run(tmp_path, backend, workers):
    """What the README says --seed reproduces: runs whose updates have one order (one worker, or the serial
    backend's turns) repeat exactly; another seed gives another run."""
    episodes = {}
    for name, seed in (("a", "5"), ("b", "5"), ("c", "6")):
        run_dir = tmp_path / name
        done = subprocess.run(
            train_cmd(run_dir, "--total-steps", "2000", "--seed", seed, "--backend", backend, workers=workers),
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
        # by (worker, index): the file's interleaving of workers follows the dashboard's ticks (wall time)
        episodes[name] = sorted(
            (int(r["worker"]), int(r["index"]), r["return"], r["loss"]) for r in episode_rows(run_dir)
        )
    assert episodes["a"] == episodes["b"] and len(episodes["a"]) > 10
    assert episodes["a"] != episodes["c"]


def test_restore_carries_the_nonfinite_count_and_reads_checkpoints_from_before_it():
    """Stat.NONFINITE_SAMPLES counts over the whole run (restored like skipped updates); a checkpoint written before
    that column existed (one column fewer) restores the other counters and starts it at 0."""
    first = coordinator(workers=1)
    ch = first.channel(0)
    stats = ch.load_stats()
    stats[Stat.NONFINITE_SAMPLES], stats[Stat.SKIPPED] = 4, 2
    ch.publish(10, [], stats)
    snap = first.snapshot()
    resumed = coordinator(workers=1)
    resumed.restore(snap)
    assert resumed.stats()[0, Stat.NONFINITE_SAMPLES] == 4 and resumed.stats()[0, Stat.SKIPPED] == 2
    older = coordinator(workers=1)
    older.restore({**snap, "worker_stats": snap["worker_stats"][:, : Stat.NONFINITE_SAMPLES]})
    assert older.stats()[0, Stat.NONFINITE_SAMPLES] == 0 and older.stats()[0, Stat.SKIPPED] == 2
