"""ALE/Pong-v5 end to end (the [atari] extra): a short training run under each objective's table (PPO's, with and
without --lstm, and A3C's), with an evaluation during training (the frames' background level measured and recorded),
then `python -m a3c.evaluate` and `a3c.load(...).act` on the game's own observations."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from procs import episode_rows, summary

pytest.importorskip("ale_py", reason="Atari needs the [atari] extra (.ci/run installs it)")

import a3c  # noqa: E402
from a3c.spec.environment import make_env  # noqa: E402

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


@pytest.mark.parametrize(
    "flags",
    [
        ["--envs-per-worker", "2"],
        ["--envs-per-worker", "2", "--lstm", "32"],
        ["--envs-per-worker", "1", "--algo", "a3c"],
    ],
    ids=["ppo-cnn", "ppo-cnn-lstm", "a3c-cnn"],
)
def test_pong_trains_evaluates_and_loads(tmp_path, flags):
    """The atari preset as a user runs it (PPO's table: 128-step rollouts, minibatches of 256, so 2 envs here), with
    a recurrent core, and A3C's table (--algo a3c)."""
    run_dir = tmp_path / "run"
    cmd = [sys.executable, "-m", "a3c.train", "--env", "ALE/Pong-v5", "--workers", "1", *flags]
    cmd += ["--total-steps", "600", "--eval-every", "300", "--eval-episodes", "1", "--run-dir", str(run_dir)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    config = json.loads((run_dir / "config.json").read_text())
    lstm = "--lstm" in flags
    if "a3c" in flags:
        assert config["preset"] == "atari@a3c" and config["optimizer"] == "rmsprop" and config["n_steps"] == 20
    else:
        assert config["preset"] == "atari" and config["algo"] == "ppo" and config["n_steps"] == 128
    assert config["lstm"] == (32 if lstm else config["lstm"])
    assert config["input_shift"] == 87 / 255  # Pong's grey background, taken off the CNN's input (a3c.spec.background)
    assert "background level (87 of 255)" in done.stderr
    s = summary(run_dir)
    assert s["total_steps"] >= 600 and s["updates"] > 0 and s["skipped_updates"] == 0
    assert s["evaluations"] >= 1 and s["eval_last_mean_return"] is not None  # a whole game, greedy, on its own env
    assert -21 <= s["eval_last_mean_return"] <= 21
    assert len(episode_rows(run_dir)) == s["episodes"]

    evaluated = subprocess.run(
        [sys.executable, "-m", "a3c.evaluate", str(run_dir), "--episodes", "1", "--json", str(tmp_path / "e.json")],
        capture_output=True,
        text=True,
    )
    assert evaluated.returncode == 0, evaluated.stderr
    result = json.loads((tmp_path / "e.json").read_text())
    assert len(result["returns"]) == 1 and -21 <= result["returns"][0] <= 21

    dead = subprocess.run(  # scripts/dead_units.py on the run: a share per ReLU layer (3 convolutions, dense)
        [sys.executable, str(SCRIPTS / "dead_units.py"), str(run_dir), "--steps", "30", "--json", tmp_path / "d.json"],
        capture_output=True,
        text=True,
    )
    assert dead.returncode == 0, dead.stderr
    (row,) = json.loads((tmp_path / "d.json").read_text())
    assert len(row["dead"]) == 4 and all(0.0 <= share <= 1.0 for share in row["dead"])

    sharpness = subprocess.run(  # scripts/policy_entropy.py: where the sampled policy is decisive, Pong's moves merged
        [sys.executable, str(SCRIPTS / "policy_entropy.py"), str(run_dir), "--steps", "40", "--merge-fire"]
        + ["--json", tmp_path / "p.json"],
        capture_output=True,
        text=True,
    )
    assert sharpness.returncode == 0, sharpness.stderr
    (row,) = json.loads((tmp_path / "p.json").read_text())
    assert row["steps"] == 40 and row["groups"] == [[0, 1], [2, 4], [3, 5]]  # NOOP/FIRE, RIGHT(FIRE), LEFT(FIRE)
    assert 0.0 <= row["mean_entropy"] <= np.log(6) + 1e-9
    assert row["between_moves_entropy"] + row["inside_groups_entropy"] == pytest.approx(row["mean_entropy"])

    agent = a3c.load(run_dir)
    assert agent.model.actor.shift == 87 / 255  # the level the run trained with
    env = make_env("ALE/Pong-v5", {}, training=False)  # what a user plays: the same preprocessing, whole games
    obs, _ = env.reset(seed=3)
    assert obs.shape == (4, 84, 84) and obs.dtype == np.uint8
    agent.reset()
    for _ in range(20):
        action = agent.act(obs)
        assert env.action_space.contains(action)
        obs, *_ = env.step(action)
    env.close()


def test_the_emulators_own_observations_change_nothing_the_learner_sees():
    """make_env asks ALE for its RAM as the env's observation (the preprocessing reads the screen itself and drops the
    env's own): the same stacked frames, rewards and flags as with ALE's RGB and grey screens, step for step, over
    resets."""
    for screen in ("rgb", "grayscale"):
        _same_steps(make_env("ALE/Pong-v5", {}), make_env("ALE/Pong-v5", {"obs_type": screen}), screen)


def _same_steps(ram: gym.Env, screen_env: gym.Env, screen: str) -> None:
    assert ram.unwrapped._obs_type == "ram" and screen_env.unwrapped._obs_type == screen
    a, _ = ram.reset(seed=3)
    b, _ = screen_env.reset(seed=3)
    assert np.array_equal(a, b)
    rng = np.random.default_rng(1)
    ends = 0
    for _ in range(1500):
        action = int(rng.integers(ram.action_space.n))
        got, want = ram.step(action), screen_env.step(action)
        assert np.array_equal(got[0], want[0]) and got[1:4] == want[1:4]
        if got[2] or got[3]:
            ends += 1
            a, _ = ram.reset()
            b, _ = screen_env.reset()
            assert np.array_equal(a, b)
    assert ends > 0  # (a game ended: the reset path was compared too)
    ram.close()
    screen_env.close()
