"""--resume RUN_DIR: the global step, the optimizer state and the episode indexes go on; episodes.csv is appended;
TensorBoard shows no step twice, even after a crash between the last checkpoint and the end (kill -9)."""

import json
import signal
import subprocess

import pytest
import torch
from procs import Run, alive, descendants, episode_rows, indexes_contiguous, summary, train_cmd, wait_for
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator


def _scalar_steps(run_dir, tag):
    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})  # purge_orphaned_data=True, as TensorBoard
    acc.Reload()
    return [e.step for e in acc.Scalars(tag)]


@pytest.mark.timeout(120)
def test_resume_continues_the_step_count(tmp_path):
    run_dir = tmp_path / "run"
    first = subprocess.run(train_cmd(run_dir, "--total-steps", "2000"), capture_output=True, text=True, timeout=100)
    assert first.returncode == 0, first.stderr
    s1 = summary(run_dir)
    ckpt1 = torch.load(run_dir / "checkpoints" / "latest.pt", weights_only=True)
    rows1 = episode_rows(run_dir)

    second = subprocess.run(
        train_cmd(run_dir, "--resume", str(run_dir), "--total-steps", "4000"),
        capture_output=True,
        text=True,
        timeout=100,
    )
    assert second.returncode == 0, second.stderr
    assert f"resuming {run_dir} at step {s1['total_steps']:,}" in second.stderr
    s2 = summary(run_dir)
    assert s2["resumed_from_step"] == s1["total_steps"]
    assert 4000 <= s2["total_steps"] <= 4000 + 2 * 2 * 5
    ckpt2 = torch.load(run_dir / "checkpoints" / "latest.pt", weights_only=True)
    # the optimizer's step counts (Adam's bias correction) went on from the checkpoint, not from zero
    assert ckpt2["optimizer"]["steps"].sum() > ckpt1["optimizer"]["steps"].sum()
    assert s2["updates"] == int(ckpt2["optimizer"]["steps"].sum())
    assert (ckpt1["session"], ckpt2["session"]) == (0, 1)  # the resumed session's workers draw fresh seeds
    rows2 = episode_rows(run_dir)
    assert rows2[: len(rows1)] == rows1  # appended, the first session's rows untouched
    assert indexes_contiguous(rows2)
    assert s2["episodes"] == len(rows2)
    assert all(int(r["global_step"]) > s1["total_steps"] - 20 for r in rows2[len(rows1) :])
    steps = _scalar_steps(run_dir, "charts/SPS")
    assert steps == sorted(set(steps)) and steps[-1] > s1["total_steps"]


# three-step episodes by the thousand: many end in the rollout during which a checkpoint is taken
# (every episode a TensorBoard point, to compare TensorBoard with episodes.csv one to one)
SHORT_EPISODES = ("--env", "envs/Classify-v0", "--env-kwargs", "episode_length=3", "--tb-episode-points-per-s", "0")


@pytest.mark.timeout(150)
def test_resume_after_kill_9_drops_what_came_after_the_checkpoint(tmp_path):
    run_dir = tmp_path / "run"
    # checkpoints far apart (several dashboard ticks), so that the kill lands between two of them
    run = Run(
        train_cmd(run_dir, *SHORT_EPISODES, "--total-steps", "100000000", "--checkpoint-every", "15000"),
        tmp_path / "log.txt",
    )
    latest = run_dir / "checkpoints" / "latest.pt"

    def orphans_logged() -> bool:
        """Episodes and TensorBoard points exist past the newest checkpoint (what the crash will orphan)."""
        ckpt = torch.load(latest, weights_only=True)
        return (
            len(episode_rows(run_dir)) > int(ckpt["episodes_written"].sum()) + 20
            and max(_scalar_steps(run_dir, "charts/SPS"), default=0) > ckpt["global_step"]
        )

    try:
        assert wait_for(latest.exists, timeout=60), run.output()
        assert wait_for(orphans_logged, timeout=60)
        children = descendants(run.pid)
        run.proc.send_signal(signal.SIGKILL)
        run.wait(timeout=10)
        assert wait_for(lambda: not alive(children), timeout=5)
    finally:
        run.cleanup()
    ckpt = torch.load(run_dir / "checkpoints" / "latest.pt", weights_only=True)  # maybe a later one by now
    step = ckpt["global_step"]
    # (orphaned points existed when the kill was sent: orphans_logged; a checkpoint may have landed since)
    resumed = subprocess.run(
        train_cmd(run_dir, "--resume", str(run_dir), "--total-steps", str(step + 3000)),
        capture_output=True,
        text=True,
        timeout=100,
    )
    assert resumed.returncode == 0, resumed.stderr
    s = summary(run_dir)
    assert s["resumed_from_step"] == step and s["total_steps"] >= step + 3000
    assert json.loads((run_dir / "config.json").read_text())["tb_episode_points_per_s"] == 0
    rows = episode_rows(run_dir)
    assert indexes_contiguous(rows)  # no (worker, index) twice, none missing
    steps = _scalar_steps(run_dir, "charts/SPS")
    assert steps == sorted(set(steps)), "TensorBoard would show a step twice"
    # Bug (f374bab): episodes were stamped with the step read at their rollout's start, so some logged after the
    # checkpoint carried steps below it and survived the purge: TensorBoard kept episodes that episodes.csv dropped
    # (16,670 points against 16,540 rows in the review's run). Now TensorBoard holds exactly the rows' episodes.
    episode_steps = _scalar_steps(run_dir, "charts/episodic_return")
    assert sorted(episode_steps) == sorted(int(r["global_step"]) for r in rows)
