"""End to end: a real training run in a subprocess, its run directory, its episodes and its TensorBoard tags."""

import errno
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from procs import (
    DESIGN_TAGS,
    Run,
    episode_rows,
    episodes_started,
    indexes_by_worker,
    indexes_contiguous,
    train_cmd,
    wait_for,
)
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import a3c
from a3c.learn.update.kernel import kernel_available
from a3c.record.checkpoint import load_checkpoint, step_checkpoints
from a3c.run.backends.serial import SerialLauncher
from a3c.run.backends.shared_memory import SharedMemoryCoordinator
from a3c.spec.errors import run_cli
from a3c.train import main as train_main

WORKERS, N_STEPS, ENVS = 3, 5, 2


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("runs") / "smoke"
    cmd = train_cmd(
        run_dir,
        "--env",
        "CartPole-v1",
        "--workers",
        str(WORKERS),
        "--envs-per-worker",
        str(ENVS),
        "--n-steps",
        str(N_STEPS),
        "--total-steps",
        "6000",
        "--seed",
        "3",
        "--checkpoint-every",
        "3000",
        start_method="forkserver",
    )
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return run_dir


def test_run_directory_holds_everything(finished_run):
    for name in ("config.json", "episodes.csv", "summary.json", "checkpoints/latest.pt", "plots/loss_history.png"):
        assert (finished_run / name).is_file(), name
    assert list(finished_run.glob("events.out.tfevents.*"))
    assert list((finished_run / "checkpoints").glob("step-*.pt"))
    config = json.loads((finished_run / "config.json").read_text())
    assert config["workers"] == WORKERS and config["env"] == "CartPole-v1"


def test_summary_counts_steps_exactly(finished_run):
    summary = json.loads((finished_run / "summary.json").read_text())
    for key in (
        "env",
        "workers",
        "total_steps",
        "wall_time_s",
        "steps_per_s",
        "episodes",
        "mean_return_100",
        "solved_at_step",
        "solved_at_s",
        "startup_s",
        "restarts",
        "skipped_updates",
    ):
        assert key in summary, key
    rollout = N_STEPS * ENVS
    # every worker stops before a rollout once the target is reached: at most one rollout each past it
    assert 6000 <= summary["total_steps"] <= 6000 + WORKERS * rollout
    assert summary["total_steps"] % rollout == 0
    assert summary["startup_s"] > 0 and summary["steps_per_s"] > 0
    # CartPole (Discrete) in float32: the workers' update takes the MLP by hand and the compiled kernel wherever it is
    # built (a3c.learn.update.paths)
    assert summary["update_path"] == ("mlp+kernel" if kernel_available() else "mlp+closed-form")


def test_episodes_csv_contiguous_per_worker(finished_run):
    rows = episode_rows(finished_run)
    summary = json.loads((finished_run / "summary.json").read_text())
    assert len(rows) == summary["episodes"] > 0
    assert sorted(indexes_by_worker(rows)) == list(range(WORKERS))
    assert indexes_contiguous(rows)  # none missing, none twice
    assert all(float(r["length"]) >= 1 and float(r["return"]) >= 1 for r in rows)


def test_event_file_holds_the_tags(finished_run):
    acc = EventAccumulator(str(finished_run), size_guidance={"scalars": 0})
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    assert DESIGN_TAGS <= tags, DESIGN_TAGS - tags
    for r in range(WORKERS):  # each worker's tags in its own event stream (a TensorBoard run, a colour, of its own)
        worker = EventAccumulator(str(finished_run / "workers" / str(r)), size_guidance={"scalars": 0})
        worker.Reload()
        assert {f"workers/{r}/episodic_return", f"workers/{r}/episode_loss"} <= set(worker.Tags()["scalars"])
    summary = json.loads((finished_run / "summary.json").read_text())
    # per-episode points are a rate-limited sample; every episode counts once in the interval aggregates
    assert 0 < len(acc.Scalars("charts/episodic_return")) <= summary["episodes"]
    assert sum(e.value for e in acc.Scalars("charts/episodes")) == summary["episodes"]


def test_sixteen_workers_on_few_cores(tmp_path):
    """Oversubscribed (16 processes, however many cores): finishes, counts steps exactly, every worker reports.
    Countdown-v0's episodes last 4 steps, so a worker that takes one rollout (5 steps) finishes an episode; on
    CartPole (random episodes of ~22 steps) a worker that the OS scheduler ran little in a 4,000-step run (250 steps a
    worker on average) could finish none, and the test failed once in two fresh clones on an idle 2-core machine."""
    run_dir = tmp_path / "w16"
    tests = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([tests, *filter(None, [os.environ.get("PYTHONPATH")])])}
    cmd = train_cmd(
        run_dir,
        "--env",
        "countdown_env:Countdown-v0",
        "--envs-per-worker",
        "1",
        "--n-steps",
        "5",
        "--total-steps",
        "4000",
        start_method="forkserver",
        workers=16,
    )
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert 4000 <= summary["total_steps"] <= 4000 + 16 * 5
    rows = episode_rows(run_dir)
    assert sorted(indexes_by_worker(rows)) == list(range(16))
    assert indexes_contiguous(rows)


def _removed(folder: Path) -> bool:
    try:
        shutil.rmtree(folder)
    except FileNotFoundError:
        return True
    except OSError:  # (not empty: the trainer wrote into it meanwhile)
        return False
    return True


def test_a_checkpoint_that_cannot_be_written_stops_the_run_with_one_line(tmp_path):
    """A failed mid-run checkpoint once raised out of the main loop (a traceback, no summary.json), then was
    reported while training went on without checkpoints; now it ends the run as every failed write to the run
    directory does (issue 22, item 7): exit code 1, summary.json, and a last line naming the file and the fix. The
    real command with worker processes; the checkpoints directory turns into a file mid-run: every write fails. The
    budget is out of reach, so only the failed checkpoint can end the run (a finite one could end first, exit 0)."""
    run_dir = tmp_path / "run"
    run = Run(train_cmd(run_dir, "--total-steps", "100000000", "--checkpoint-every", "2000"), tmp_path / "log.txt")
    try:
        assert wait_for(lambda: episodes_started(run_dir), timeout=60), run.output()
        # (a checkpoint being written as the folder goes leaves a file in it, and rmtree fails: again, until it is gone)
        assert wait_for(lambda: _removed(run_dir / "checkpoints"), timeout=60), run.output()
        (run_dir / "checkpoints").write_text("not a directory")
        code = run.wait(timeout=120)
    finally:
        run.cleanup()
    output = run.output()
    assert code == 1, output
    assert "Traceback" not in output
    last = output.strip().splitlines()[-1]
    assert last.startswith("a3c: error: cannot write checkpoints/") and f".pt in {run_dir} (" in last, last
    # (the same --run-dir again would be refused as not empty: the line says to remove it first)
    fix = f"; make it writable again, then remove {run_dir} (or give another --run-dir) and start the run again"
    assert last.endswith(f"{fix} (it has no checkpoint to resume from)"), last
    s = json.loads((run_dir / "summary.json").read_text())
    assert s["stop_reason"].startswith("cannot write checkpoints/")


def test_step_files_are_named_from_the_step_their_snapshot_holds(tmp_path, monkeypatch):
    """Bug (issue 22, item 9): step-N.pt was named from the step the main loop read before the snapshot, and worker
    processes run on in between, so step-N.pt could hold another step than N. Here (the serial backend, in this
    process) every snapshot finds 7 more steps than the loop read, as if the workers had run on: each file's name is
    its own global step."""
    original = SharedMemoryCoordinator.snapshot

    def late_snapshot(self):
        self.board.add_steps(0, 7)  # the workers ran on after the main loop read the step
        return original(self)

    monkeypatch.setattr(SharedMemoryCoordinator, "snapshot", late_snapshot)
    # one round of worker steps per tick (10 env steps), whatever the machine's speed: a tick of the real wait runs
    # for TICK_S, and on a fast or a loaded machine its step count (so the number of checkpoints) varies
    monkeypatch.setattr(SerialLauncher, "wait", lambda self, seconds: self.step_round())
    result = a3c.train(
        env="CartPole-v1",
        backend="serial",
        workers=1,
        envs_per_worker=2,
        total_steps=2000,
        checkpoint_every=400,
        checkpoint_every_s=0,
        keep_checkpoints=100,
        eval_every=0,
        run_dir=str(tmp_path / "run"),
    )
    files = step_checkpoints(result.run_dir / "checkpoints")
    assert len(files) == 5  # steps 400, 800, ..., 2000 (+7 each): the schedule met each multiple once
    for step, path in files:
        assert load_checkpoint(path)["global_step"] == step, path.name


def _enospc() -> OSError:
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


class _FillsUpFile:
    """A file of the run directory on a disk that fills up once ``full()`` is true: from then on every write
    raises ENOSPC; everything else is the real file's."""

    def __init__(self, file, full) -> None:
        self._file, self._full, self.writes = file, full, 0

    def write(self, data):
        if self._full(self):
            raise _enospc()
        self.writes += 1
        return self._file.write(data)

    def __getattr__(self, name):
        return getattr(self._file, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._file.close()


def _fill_up_file(monkeypatch, name: str, writes: int) -> None:
    """The run directory's ``name`` (episodes.csv, eval.csv: opened by a3c.record.run_dir) fills the disk once the run
    has a checkpoint and the file has had ``writes`` writes (its header is one, each row one)."""
    import builtins

    from a3c.record import run_dir

    def fake_open(path, *args, **kwargs):
        file = builtins.open(path, *args, **kwargs)
        if Path(path).name != name:
            return file
        latest = Path(path).parent / "checkpoints" / "latest.pt"
        return _FillsUpFile(file, lambda f: f.writes >= writes and latest.is_file())

    monkeypatch.setattr(run_dir, "open", fake_open, raising=False)


def _fill_up_event_files(monkeypatch, n: int) -> None:
    """TensorBoard's writer threads fill the disk at their n-th record (counted over all of them)."""
    from tensorboard.summary.writer.record_writer import RecordWriter

    real, records = RecordWriter.write, []

    def write(self, data):
        records.append(len(data))
        if len(records) >= n:
            raise _enospc()
        return real(self, data)

    monkeypatch.setattr(RecordWriter, "write", write)


def _fill_up_checkpoints(monkeypatch, n: int) -> None:
    """The n-th checkpoint fills the disk part of the way through (some bytes reach the file, then ENOSPC)."""
    import torch

    real, saves = torch.save, []

    def save(obj, f, *args, **kwargs):
        saves.append(1)
        if len(saves) < n:
            return real(obj, f, *args, **kwargs)
        f.write(b"PK\x03\x04 part of a checkpoint")
        raise _enospc()

    monkeypatch.setattr(torch, "save", save)


def _fill_up_figure(monkeypatch, n: int) -> None:
    """plots/loss_history.png cannot be written (the run's last figure, at its end): its temporary file, opened by
    the real writer (a3c.record.files.atomic_write), fills the disk at its first write."""
    import builtins

    from a3c.record import files

    def fake_open(path, *args, **kwargs):
        file = builtins.open(path, *args, **kwargs)
        if Path(path).name != "loss_history.png.tmp":
            return file
        return _FillsUpFile(file, lambda f: True)

    monkeypatch.setattr(files, "open", fake_open, raising=False)


FULL_DISK = {  # the writer that fills the disk -> (how, what the last line names, extra flags)
    "episodes.csv": (lambda mp: _fill_up_file(mp, "episodes.csv", 2), "episodes.csv", []),
    "events": (lambda mp: _fill_up_event_files(mp, 6), "its TensorBoard event files", []),
    "checkpoint": (lambda mp: _fill_up_checkpoints(mp, 3), "checkpoints/step-", []),
    "eval.csv": (
        lambda mp: _fill_up_file(mp, "eval.csv", 3),
        "eval.csv",
        ["--eval-every", "20", "--eval-episodes", "1"],
    ),
    "figure": (lambda mp: _fill_up_figure(mp, 1), "plots/loss_history.png", ["--total-steps", "300"]),
}


@pytest.mark.parametrize("writer", FULL_DISK)
def test_a_full_disk_ends_the_run_with_one_line(tmp_path, monkeypatch, capfd, writer):
    """Bug (issue 22, item 7): the run directory's disk filling up mid-run ended in a chained OSError traceback.
    Now every writer of the main process (episodes.csv, TensorBoard, checkpoints, eval.csv, the figure) ends the
    run through the one shutdown: exit code 1, no traceback, a last line naming the disk, the file and the fix,
    summary.json written, and checkpoints/latest.pt loadable (the last one the disk took). The command line, in
    this process (serial backend), with one writer made to fail with ENOSPC from its n-th write on."""
    fill_up, what, flags = FULL_DISK[writer]
    fill_up(monkeypatch)
    run_dir = tmp_path / "run"
    argv = ["--backend", "serial", "--workers", "1", "--envs-per-worker", "2", "--total-steps", "50000"]
    argv += ["--checkpoint-every", "10", "--checkpoint-every-s", "0", "--eval-every", "0", "--run-dir", str(run_dir)]
    code = run_cli(train_main, [*argv, *flags], prog="a3c.train")
    err = capfd.readouterr().err
    assert code == 1, err
    assert "Traceback" not in err and "Exception in thread" not in err, err
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"a3c: error: the disk of {run_dir} is full (No space left on device) while writing {what}")
    assert last.endswith(f"; free space, then --resume {run_dir}"), last
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["total_steps"] < 50000
    if writer != "figure":  # (the figure fails at the end of a finished run)
        assert summary["stop_reason"].startswith(f"cannot write {what}")
        assert summary["stop_reason"].endswith("(No space left on device)")
    agent = a3c.load(run_dir)  # the last checkpoint written stays loadable ...
    assert 0 < agent.global_step <= summary["total_steps"]
    # ... and a failed write leaves no temporary file behind: a checkpoint's, the figure's, or the run directory's own
    for folder in (run_dir, run_dir / "checkpoints", run_dir / "plots"):
        assert not [p.name for p in folder.iterdir() if ".tmp" in p.name], folder


def test_a_full_disk_makes_a3c_train_raise_runtime_error(tmp_path, monkeypatch):
    """a3c.train's documented failure: RuntimeError naming the stop reason (the run directory keeps what was done)."""
    _fill_up_checkpoints(monkeypatch, 3)  # the second checkpoint's step-N.pt (each writes step-N.pt and latest.pt)
    with pytest.raises(RuntimeError, match=r"training failed \(cannot write checkpoints/step-\d+\.pt \(No space"):
        a3c.train(
            backend="serial",
            workers=1,
            envs_per_worker=2,
            total_steps=50_000,
            checkpoint_every=10,
            checkpoint_every_s=0,
            eval_every=0,
            run_dir=str(tmp_path / "run"),
        )
    assert a3c.load(tmp_path / "run").global_step > 0


def test_a_resume_onto_a_full_disk_ends_in_one_line_and_keeps_the_record(tmp_path, monkeypatch, capfd):
    """A resume rewrites episodes.csv (the rows its checkpoint counts) before any process starts: on a full disk that
    ended in an OSError traceback. Now one line, exit 1, and episodes.csv as it was (the rewrite is atomic)."""
    run_dir = tmp_path / "run"
    argv = ["--backend", "serial", "--workers", "1", "--envs-per-worker", "2", "--eval-every", "0"]
    assert run_cli(train_main, [*argv, "--total-steps", "2000", "--run-dir", str(run_dir)], prog="a3c.train") == 0
    before = (run_dir / "episodes.csv").read_bytes()
    capfd.readouterr()
    import a3c.record.resume as resume

    def full(path, write, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(resume, "atomic_write", full)
    code = run_cli(train_main, [*argv, "--resume", str(run_dir), "--total-steps", "4000"], prog="a3c.train")
    err = capfd.readouterr().err
    assert code == 1, err
    assert "Traceback" not in err, err
    assert err.strip().splitlines()[-1] == (
        f"a3c: error: the disk of {run_dir} is full (No space left on device) while writing episodes.csv; free "
        f"space, then --resume {run_dir}"
    )
    assert (run_dir / "episodes.csv").read_bytes() == before


def test_a_run_off_the_fast_paths_says_so_in_one_line_and_names_its_update_path(tmp_path, capfd):
    """--lstm: no fast path covers an LSTM core, so the run takes the reference (autograd) and says so, once, before
    training; summary.json's update_path names it. CartPole without a core takes a fast path and says nothing."""
    settings = dict(env="CartPole-v1", backend="serial", workers=1, envs_per_worker=2, total_steps=200, eval_every=0)
    lstm = a3c.train(**settings, lstm=4, run_dir=str(tmp_path / "lstm"))
    err = capfd.readouterr().err
    notices = [line for line in err.splitlines() if "update path" in line]
    assert notices == [
        "a3c: update path reference (autograd through the model and the loss, slower): no fast path covers an LSTM "
        "core (--lstm)"
    ]
    assert lstm.summary["update_path"] == "reference"
    plain = a3c.train(**settings, run_dir=str(tmp_path / "plain"))
    assert "update path" not in capfd.readouterr().err
    assert plain.summary["update_path"] == ("mlp+kernel" if kernel_available() else "mlp+closed-form")


def test_a_ppo_run_records_its_objective_and_learns_cartpole(tmp_path):
    """--algo ppo end to end (two workers, the shared optimizer): config.json and summary.json name the objective and
    its path, and CartPole's 100-episode mean rises well above a random policy's ~22 in 30k steps. The serial backend
    (the workers taking turns in this process) makes the run reproducible: with worker processes the mean was 117 to
    174 over five runs of the same seed, with the machine's load; serially seed 3 ends at 98 (seeds 1, 2, 4-6: 107 to
    186)."""
    run = a3c.train(
        env="CartPole-v1",
        algo="ppo",
        preset="none",
        backend="serial",
        workers=2,
        envs_per_worker=4,
        n_steps=64,
        minibatch_size=64,
        n_epochs=4,
        normalize_advantage=True,
        total_steps=30_000,
        eval_every=0,
        seed=3,
        run_dir=str(tmp_path / "ppo"),
    )
    assert run.summary["algo"] == "ppo" and run.summary["update_path"] == "mlp+closed-form"
    assert json.loads((tmp_path / "ppo" / "config.json").read_text())["algo"] == "ppo"
    assert run.summary["updates"] > 0 and run.summary["mean_return_100"] > 60


def test_a_model_too_big_for_memory_is_one_line_and_leaves_the_run_directory_as_it_was(tmp_path, monkeypatch, capfd):
    """Bug (found combining flags): --hidden-sizes 1000000 1000000 ended in torch's allocator traceback, and the
    config.json, checkpoints/ and plots/ it left made the mended command fail ("--run-dir is not empty") and its
    advice (--resume) fail too ("no checkpoint"). Now one line naming the memory and the fix, exit code 2, and the run
    directory as it was. (The allocator's failure is stood in for: a real one would depend on the machine's overcommit
    policy.)"""
    from a3c.run.backends import shared_memory

    real = shared_memory.build_model

    def too_big(spec, config):
        raise RuntimeError(
            "[enforce fail at alloc_cpu.cpp:121] data. DefaultCPUAllocator: can't allocate memory: you tried to "
            "allocate 4000004000000 bytes. Error code 12 (Cannot allocate memory)"
        )

    monkeypatch.setattr(shared_memory, "build_model", too_big)
    run_dir = tmp_path / "run"
    argv = ["--backend", "serial", "--workers", "1", "--total-steps", "300", "--eval-every", "0"]
    argv += ["--run-dir", str(run_dir)]
    code = run_cli(train_main, [*argv, "--hidden-sizes", "1000000", "1000000"], prog="a3c.train")
    err = capfd.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("a3c.train: error: ") and "4,000,004,000,000 bytes" in last and "--hidden-sizes" in last
    assert not run_dir.exists()
    monkeypatch.setattr(shared_memory, "build_model", real)
    assert run_cli(train_main, argv, prog="a3c.train") == 0, capfd.readouterr().err
