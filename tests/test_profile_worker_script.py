"""scripts/profile_worker.py's --breakdown (``time_parts``): every part of the loop is timed and the shares cover the
loop; an Atari worker on the gymnasium backend has its env split into the emulator, the screen reads, the resize and
the rest, and the loop still trains (the wrappers pass every call through)."""

from __future__ import annotations

import time

import pytest
import torch
from worker_rig import make_worker

import scripts.profile_worker as profile_worker


@pytest.fixture
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_the_parts_cover_the_loop_and_the_loop_still_trains(capsys):
    worker, store = make_worker(env="CartPole-v1", envs_per_worker=2, n_steps=5)
    shares = profile_worker.time_parts(worker, iterations=20, warm_up=2)
    assert set(shares) == {
        "env",
        "acting forward",
        "sampling",
        "update forward",
        "loss gradient",
        "update backward",
        "optimizer step (push)",
        "pull",
        "rest of the loop",
    }
    assert sum(shares.values()) == pytest.approx(1.0)
    assert all(share > 0 for name, share in shares.items() if name != "rest of the loop")
    assert store.optimizer.step_count() == 22  # every update pushed through the timed push
    assert "| env |" in capsys.readouterr().out


def test_parts_are_timed_where_the_process_clock_advances_by_the_tick(monkeypatch, capsys):
    """Under a CPU-time limit (ulimit -t; SLURM sets one) Linux accounts the process's CPU clock on the scheduler's
    tick (4 ms here): a part of a few microseconds read 0 and the table said the loop was all "rest". The script times
    with this thread's clock there, and says so."""
    real = time.process_time
    monkeypatch.setattr(profile_worker.time, "process_time", lambda: real() // 0.004 * 0.004)
    worker, _ = make_worker(env="CartPole-v1", envs_per_worker=2, n_steps=5)
    shares = profile_worker.time_parts(worker, iterations=20, warm_up=2)
    assert all(share > 0 for name, share in shares.items() if name != "rest of the loop")
    assert "this thread's CPU clock" in capsys.readouterr().out


def test_an_atari_envs_time_is_split_into_the_emulator_screens_resize_and_rest(one_thread):
    pytest.importorskip("ale_py")
    worker, _ = make_worker(env="ALE/Pong-v5", envs_per_worker=1, n_steps=5)
    shares = profile_worker.time_parts(worker, iterations=6, warm_up=1)
    assert "env" not in shares
    for part in ("emulator (ALE's act)", "screens (ALE's getScreenGrayscale)", "resize (OpenCV)"):
        assert shares[part] > 0
    assert sum(shares.values()) == pytest.approx(1.0)


def test_the_script_s_breakdown_times_whole_updates_with_a3c_train_s_settings(monkeypatch, capsys):
    """main() builds a3c.train's config (--preset none: the objective's plain defaults, PPO's here) and times its
    iterations after the warm-up ones: every timed rollout's update runs whole (the budget used to end with the
    warm-up, after which the learn loop took one minibatch a rollout and the update's parts read ~0)."""
    argv = ["profile_worker", "--env", "CartPole-v1", "--algo", "ppo", "--n-steps", "16", "--envs-per-worker", "2"]
    argv += ["--minibatch-size", "8", "--n-epochs", "2", "--steps", "640", "--breakdown"]
    monkeypatch.setattr("sys.argv", argv)
    profile_worker.main()
    rows = {
        line.split("|")[1].strip(): float(line.split("|")[2].replace(",", ""))
        for line in capsys.readouterr().out.splitlines()
        if line.startswith("| ") and not line.startswith("| part")
    }
    # 2 epochs x 4 minibatches a 32-sample rollout: the update's forward costs more than acting's per agent step
    assert rows["update forward"] > 0.5 * rows["acting forward"] and rows["loss gradient"] > 0
