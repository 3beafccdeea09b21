"""MuJoCo end to end (the [mujoco] extra): a short HalfCheetah-v5 run with its preset, then `a3c.load(...).act` on the
env's own observations, `python -m a3c.evaluate`, and --video rendered headless (no display, MUJOCO_GL unset: the
evaluator asks for EGL)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
from procs import summary

pytest.importorskip("mujoco", reason="MuJoCo needs the [mujoco] extra (.ci/run installs it)")

import a3c  # noqa: E402
from a3c import evaluate as evaluate_cli  # noqa: E402

SHORT = ["--env-kwargs", "max_episode_steps=50"]  # gym.make's time limit: whole episodes in a short run


def _train(run_dir, *flags: str):
    cmd = [sys.executable, "-m", "a3c.train", "--env", "HalfCheetah-v5", "--workers", "1", "--total-steps", "2000"]
    cmd += ["--eval-every", "0", "--run-dir", str(run_dir), *SHORT, *flags]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return run_dir


@pytest.fixture(scope="module")
def cheetah(tmp_path_factory):
    return _train(tmp_path_factory.mktemp("mujoco") / "run")


@pytest.mark.parametrize("algo", ["preset", "a3c"])
def test_halfcheetah_trains_with_its_tables_and_loads(algo, cheetah, tmp_path):
    """Its preset (PPO, rl-zoo3's tuned settings) and its A3C table (gSDE, the clipped log-probability), each end
    to end: trained, loaded, acting within the bounds."""
    run = cheetah if algo == "preset" else _train(tmp_path / "run", "--algo", "a3c")
    config = json.loads((run / "config.json").read_text())
    assert config["normalize_obs"]
    if algo == "preset":
        assert (config["preset"], config["algo"], config["hidden_sizes"]) == ("HalfCheetah-v5", "ppo", [256, 256])
    else:
        assert config["preset"] == "HalfCheetah-v5@a3c" and config["gsde"] and config["clipped_log_prob"]
    s = summary(run)
    assert s["total_steps"] >= 2000 and s["updates"] > 0 and s["skipped_updates"] == 0 and s["episodes"] >= 10

    agent = a3c.load(run)
    env = gym.make("HalfCheetah-v5")
    obs, _ = env.reset(seed=3)
    action = agent.act(obs)
    assert action.shape == (6,) and action.dtype == np.float32
    assert np.all(action >= -1.0) and np.all(action <= 1.0)  # clipped to the env's bounds
    env.step(action)
    env.close()


def test_evaluate_records_halfcheetah_without_a_display(cheetah, tmp_path):
    pytest.importorskip("moviepy")
    environ = {k: v for k, v in os.environ.items() if k not in ("MUJOCO_GL", "PYOPENGL_PLATFORM", "DISPLAY")}
    videos, out = tmp_path / "videos", tmp_path / "e.json"
    cmd = [sys.executable, "-m", "a3c.evaluate", str(cheetah), "--episodes", "1", "--video", str(videos)]
    done = subprocess.run([*cmd, "--json", str(out)], capture_output=True, text=True, env=environ)
    if done.returncode == 2 and "found no OpenGL to render with" in done.stderr:
        pytest.skip(f"no EGL on this machine: {done.stderr.strip()}")  # the one-line refusal, checked below too
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    assert result["episodes"] == 1 and result["lengths"] == [50]
    assert [p.name for p in videos.glob("*.mp4")] == ["latest-episode-0.mp4"]
    assert (videos / "latest-episode-0.mp4").stat().st_size > 1000


def test_headless_rendering_asks_for_egl_only_where_nothing_else_is_set(monkeypatch):
    monkeypatch.setattr(evaluate_cli.sys, "platform", "linux")
    bare: dict[str, str] = {}
    evaluate_cli.headless_rendering(bare)
    # (SDL's dummy video driver for pygame's renderers: its display probe printed an error though nothing failed)
    assert bare == {"MUJOCO_GL": "egl", "PYOPENGL_PLATFORM": "egl", "SDL_VIDEODRIVER": "dummy"}
    for kept in ({"DISPLAY": ":0"}, {"WAYLAND_DISPLAY": "wayland-0"}):
        environ = dict(kept)
        evaluate_cli.headless_rendering(environ)
        assert environ == kept
    own = {"MUJOCO_GL": "osmesa", "SDL_VIDEODRIVER": "x11"}  # a user's own choices stay
    evaluate_cli.headless_rendering(own)
    assert own == {"MUJOCO_GL": "osmesa", "SDL_VIDEODRIVER": "x11"}
    monkeypatch.setattr(evaluate_cli.sys, "platform", "darwin")
    mac: dict[str, str] = {}
    evaluate_cli.headless_rendering(mac)
    assert mac == {}
