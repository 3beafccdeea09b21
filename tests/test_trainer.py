"""End to end: a real training run in a subprocess, its run directory, its episodes and its TensorBoard tags."""

import json
import shutil
import subprocess

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
from a3c.backends.shared_memory import SharedMemoryCoordinator
from a3c.checkpoint import load_checkpoint, step_checkpoints

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
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
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
    """Oversubscribed (16 processes, however many cores): finishes, counts steps exactly, every worker reports."""
    run_dir = tmp_path / "w16"
    cmd = train_cmd(
        run_dir,
        "--env",
        "CartPole-v1",
        "--envs-per-worker",
        "1",
        "--n-steps",
        "5",
        "--total-steps",
        "4000",
        start_method="forkserver",
        workers=16,
    )
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert 4000 <= summary["total_steps"] <= 4000 + 16 * 5
    rows = episode_rows(run_dir)
    assert sorted(indexes_by_worker(rows)) == list(range(16))
    assert indexes_contiguous(rows)


@pytest.mark.timeout(150)
def test_a_checkpoint_that_cannot_be_written_is_reported_and_training_goes_on(tmp_path):
    """Risk closed (f374bab): a failed mid-run checkpoint (a full disk) raised out of the main loop, killed the run
    and left no summary.json. Here the checkpoints directory turns into a file mid-run: every write fails."""
    run_dir = tmp_path / "run"
    run = Run(train_cmd(run_dir, "--total-steps", "60000", "--checkpoint-every", "2000"), tmp_path / "log.txt")
    try:
        assert wait_for(lambda: episodes_started(run_dir), timeout=60), run.output()
        shutil.rmtree(run_dir / "checkpoints")
        (run_dir / "checkpoints").write_text("not a directory")
        code = run.wait(timeout=120)
    finally:
        run.cleanup()
    output = run.output()
    assert code == 0, output
    assert "could not write checkpoint" in output and "training goes on" in output
    assert "Traceback" not in output
    s = json.loads((run_dir / "summary.json").read_text())
    assert s["total_steps"] >= 60000 and s["stop_reason"] == "total_steps"


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
    assert len(files) >= 4
    for step, path in files:
        assert load_checkpoint(path)["global_step"] == step, path.name
