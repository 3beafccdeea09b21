"""A long PPO update inside the worker's life cycle, through real processes: Ctrl-C (SIGINT) or SIGTERM to the main
process while a worker is in the middle of its first update stops it within the worker's grace period (the stop is
looked at between minibatches: no "did not stop" or "killing it"), and the final checkpoint counts what the shared
model kept (its global step past 0, the workers' updates equal to the optimizer's steps). A 300-epoch update that
lasts longer than --worker-timeout is not taken for a hang (the heartbeat between minibatches)."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
import torch
from procs import Run, summary, train_cmd, wait_for

from a3c.record.rows import Stat

# one update of 256 x 8 = 2,048 samples in minibatches of 4 for 400 epochs: 204,800 minibatches (the brief of issue
# 55's defect 1); --total-steps that only a signal reaches. The stop must land inside the first update, and it lands
# up to a second after the update began (the first checkpoint inside it, every 0.5 s; the test's look at it; the
# main loop's next tick, 0.25 s). 40 epochs (20,480 minibatches) took about a second where the 300-epoch update below
# (76,800) fits in the 4 s its test skips at: the stop could come after the update. The test is no longer for it:
# the signal ends the update.
EPOCHS = 400
LONG_UPDATE = (
    "--env", "CartPole-v1", "--preset", "none", "--algo", "ppo", "--n-steps", "256", "--envs-per-worker", "8",
    "--minibatch-size", "4", "--n-epochs", str(EPOCHS), "--eval-every", "0",
)  # fmt: skip
MINIBATCHES = EPOCHS * 256 * 8 // 4
FAILED_TO_STOP = ("did not stop", "terminating it", "killing it", "hung", "restarting")


def latest(run_dir: Path) -> dict | None:
    try:
        return torch.load(run_dir / "checkpoints" / "latest.pt", weights_only=True)  # (written atomically)
    except (OSError, EOFError, RuntimeError):
        return None


def optimizer_steps(checkpoint: dict) -> int:
    return int(checkpoint["optimizer"]["steps"].sum())


def first_update_under_way(run_dir: Path) -> bool:
    """A checkpoint (every half second) taken while the first rollout's update runs: the shared optimizer has taken
    steps, and no rollout's steps are counted yet (a rollout counts once its update is done)."""
    checkpoint = latest(run_dir)
    return checkpoint is not None and optimizer_steps(checkpoint) > 0 and checkpoint["global_step"] == 0


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["sigint", "sigterm"])
def test_a_signal_mid_update_stops_the_worker_in_its_grace_and_the_checkpoint_counts_what_it_kept(tmp_path, sig, code):
    run_dir = tmp_path / "run"
    cmd = train_cmd(run_dir, *LONG_UPDATE, "--total-steps", "100000000", "--checkpoint-every-s", "0.5", workers=1)
    run = Run(cmd, tmp_path / "log.txt")
    try:
        assert wait_for(lambda: first_update_under_way(run_dir), timeout=60, interval=0.1), run.output()
        run.proc.send_signal(sig)  # the main process only (a worker ignores SIGINT: the main process decides)
        assert run.wait(timeout=30) == code, run.output()
        output = run.output()
        assert not [line for line in output.splitlines() if any(word in line for word in FAILED_TO_STOP)], output
        checkpoint = latest(run_dir)
        assert checkpoint is not None
        steps = optimizer_steps(checkpoint)
        assert 0 < steps < MINIBATCHES, steps  # stopped inside the first update, not after it
        assert checkpoint["global_step"] == 256 * 8  # the interrupted rollout, counted: its update was partly applied
        assert int(checkpoint["worker_stats"][:, Stat.UPDATES].sum()) == steps  # every step the model took, recorded
        assert summary(run_dir)["total_steps"] == checkpoint["global_step"]
    finally:
        run.cleanup()


def test_a_300_epoch_update_longer_than_the_worker_timeout_is_not_a_hang(tmp_path):
    """One rollout of 128 x 8 samples, 300 epochs of minibatches of 4 (76,800 minibatches: several times
    --worker-timeout 3): the run ends on its own, exit 0, no worker taken for hung or restarted, every step counted.
    The test can fail: the worker's only other heartbeat is at the start line, just before its first env step, so
    without those between minibatches it would be silent for the whole training window (summary.json's
    training_time_s: from the first env step to the update's last heartbeat), which must outlast the timeout and the
    supervisor's check (every TICK_S, 0.25 s). Before, wall_time_s > 6 (startup included) failed on a fast machine,
    where 150 epochs took a few seconds."""
    run_dir = tmp_path / "run"
    flags = [*LONG_UPDATE, "--n-steps", "128", "--n-epochs", "300", "--total-steps", "1024", "--worker-timeout", "3"]
    run = Run(train_cmd(run_dir, *flags, workers=1), tmp_path / "log.txt")
    try:
        assert run.wait(timeout=120) == 0, run.output()
        output = run.output()
        assert not [line for line in output.splitlines() if any(word in line for word in FAILED_TO_STOP)], output
        s = summary(run_dir)
        assert s["restarts"] == 0 and s["total_steps"] == 1024
        checkpoint = latest(run_dir)
        assert checkpoint is not None and checkpoint["global_step"] == 1024
        steps = optimizer_steps(checkpoint)
        assert steps == 300 * 128 * 8 // 4 == int(checkpoint["worker_stats"][:, Stat.UPDATES].sum())
        # (silent that long without the heartbeats between minibatches: what makes the test able to fail)
        if s["training_time_s"] <= 3 + 1:  # a machine fast enough to finish the update within the timeout
            pytest.skip(f"the update took {s['training_time_s']:.1f} s, within --worker-timeout 3: nothing shown")
    finally:
        run.cleanup()
