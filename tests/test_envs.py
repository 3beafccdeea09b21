"""Tests of the `envs` package: gymnasium's env checker on every env of the `envs/` namespace, the SlowEnv delays
(sleep and cpu), the Classify-v0 bandit and its data set, env kwargs reaching the env, and an env defined in this
module trained end to end through a `module:Name-v0` id. Latencies are kept to a millisecond or two."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from procs import wait_for

import envs  # noqa: F401  (registers the namespace)
from a3c.spec.config import parse_env_kwargs
from a3c.spec.environment import describe_env, make_env
from a3c.spec.errors import UserError
from envs.classify import ClassifyEnv, make_classification_data
from envs.slow import SlowEnv

REPO = Path(__file__).resolve().parents[1]
TINY = {"latency": 0.0005}  # for envs of this package that take a latency; others are made with their defaults
TAKES_LATENCY = {"envs/SlowCartPole-v1", "envs/Classify-v0"}


class TinyEnv(gym.Env):
    """A two-armed contextual bandit small enough to train in a second: reward 1 when the action equals the sign
    bit of the observation; truncated after ``length`` steps (a kwarg, so the test can see kwargs arrive)."""

    def __init__(self, length: int = 5) -> None:
        self.length = length
        self.observation_space = gym.spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self._t = 0
        self._obs = np.zeros(2, dtype=np.float32)

    def _draw(self) -> np.ndarray:
        self._obs = self.np_random.uniform(-1.0, 1.0, size=2).astype(np.float32)
        return self._obs.copy()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self._t = 0
        return self._draw(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        reward = float(int(action) == int(self._obs[0] > 0))
        self._t += 1
        return self._draw(), reward, False, self._t >= self.length, {}


gym.register(id="TinyEnv-v0", entry_point=TinyEnv)  # what `test_envs:TinyEnv-v0` finds after importing this module


def namespace_ids() -> list[str]:
    return sorted(str(k) for k in gym.registry if str(k).startswith("envs/"))


def test_namespace_registers_the_slow_and_classify_envs() -> None:
    assert {"envs/SlowCartPole-v1", "envs/Classify-v0"} <= set(namespace_ids())


@pytest.mark.parametrize("env_id", namespace_ids())
@pytest.mark.parametrize("mode", ["sleep", "cpu"])
def test_check_env_passes_on_every_namespace_env(env_id: str, mode: str) -> None:
    kwargs = {**TINY, "mode": mode} if env_id in TAKES_LATENCY else {}
    if not kwargs and mode == "cpu":
        pytest.skip("no latency kwargs: one check is enough")
    env = gym.make(env_id, disable_env_checker=True, **kwargs)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env, skip_render_check=True)  # rendering needs pygame, which is not a dependency
    inner_space = env.unwrapped.observation_space
    inherited_unbounded = isinstance(inner_space, gym.spaces.Box) and not np.isfinite(inner_space.high).all()
    problems = [
        str(w.message)
        for w in caught
        if "different from the unwrapped version" not in str(w.message)  # gym.make's wrappers and SlowEnv
        and not (inherited_unbounded and "infinity" in str(w.message))  # e.g. CartPole's own velocity bounds
    ]
    assert problems == []
    env.close()


def test_sleep_mode_adds_the_latency_to_steps_and_resets() -> None:
    env = SlowEnv(ClassifyEnv(episode_length=50), latency=0.02, reset_latency=0.04, mode="sleep")
    t0 = time.perf_counter()
    _, info = env.reset(seed=0)
    reset_s = time.perf_counter() - t0
    assert info["latency_s"] == 0.04 and reset_s >= 0.04
    t0 = time.perf_counter()
    for _ in range(3):
        *_, info = env.step(0)
    assert info["latency_s"] == 0.02
    assert time.perf_counter() - t0 >= 3 * 0.02


def test_cpu_mode_burns_cpu_time_not_just_wall_time() -> None:
    env = SlowEnv(ClassifyEnv(), latency=0.02, reset_latency=0.0, mode="cpu")
    env.reset(seed=0)
    cpu0 = time.thread_time()
    for _ in range(3):
        env.step(1)
    assert time.thread_time() - cpu0 >= 3 * 0.02  # a sleep would use almost no CPU time


def test_jitter_varies_delays_within_bounds_and_is_seeded() -> None:
    def delays(seed: int) -> list[float]:
        env = SlowEnv(ClassifyEnv(episode_length=1000), latency=0.001, jitter=0.001, reset_latency=0.0)
        env.reset(seed=seed)
        return [env.step(0)[4]["latency_s"] for _ in range(20)]

    first = delays(3)
    assert all(0.0 <= d <= 0.002 for d in first)
    assert len(set(first)) > 10
    assert delays(3) == first and delays(4) != first


@pytest.mark.parametrize(
    "kwargs, fragment",
    [({"mode": "gpu"}, "mode"), ({"latency": -1.0}, "latency"), ({"jitter": "x"}, "jitter")],
)
def test_bad_slow_kwargs_are_user_errors(kwargs: dict[str, Any], fragment: str) -> None:
    with pytest.raises(UserError, match=fragment):
        make_env("envs/SlowCartPole-v1", kwargs)


def test_unknown_kwarg_is_a_user_error() -> None:
    with pytest.raises(UserError, match="rejects --env-kwargs"):
        make_env("envs/Classify-v0", {"latncy": 0.01})


def test_classification_data_is_seeded_balanced_and_learnable() -> None:
    X, y = make_classification_data(seed=5)
    assert X.shape == (10_000, 8) and X.dtype == np.float32 and y.shape == (10_000,)
    assert set(np.unique(y)) == {0, 1} and abs(y.mean() - 0.5) < 0.02
    X2, y2 = make_classification_data(seed=5)
    assert np.array_equal(X, X2) and np.array_equal(y, y2)
    assert not np.array_equal(X, make_classification_data(seed=6)[0])
    # the classes are separable to a good degree: 1-nearest-neighbour on a held-out slice beats chance by far
    train, test = slice(0, 4000), slice(4000, 4500)
    d = ((X[test, None, :] - X[None, train, :]) ** 2).sum(-1)
    assert (y[train][d.argmin(1)] == y[test]).mean() > 0.8


def test_classify_rewards_the_right_class_and_truncates() -> None:
    env = gym.make("envs/Classify-v0", episode_length=4)
    env.reset(seed=1)
    rewards, labels = [], []
    for t in range(4):
        _, reward, terminated, truncated, info = env.step(t % 2)
        rewards.append(reward)
        labels.append(info["label"])
        assert not terminated and truncated == (t == 3)
    assert rewards == [float(t % 2 == label) for t, label in enumerate(labels)]


def test_env_kwargs_from_the_command_line_reach_the_env() -> None:
    kwargs = parse_env_kwargs(["latency=0.001", "mode=cpu", "jitter=0", "reset_latency=0.002"])
    env = make_env("envs/SlowCartPole-v1", kwargs)
    slow = env
    while not isinstance(slow, SlowEnv):
        slow = slow.env
    assert (slow.latency, slow.mode, slow.jitter, slow.reset_latency) == (0.001, "cpu", 0.0, 0.002)
    env = make_env("envs/Classify-v0", parse_env_kwargs(["episode_length=7", "n_features=10"]))
    assert env.unwrapped.episode_length == 7
    assert describe_env("envs/Classify-v0", {"n_features": 10}).obs_dim == 10


def test_env_defined_in_a_test_module_trains_through_a_module_id(tmp_path: Path) -> None:
    # trained until both workers have written episodes, then stopped by Ctrl-C: a finite budget (400 steps, then
    # 2,000) could be taken whole by one worker while a busy machine ran the other late, which then ended none
    run_dir = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), str(REPO)])}
    cmd = [
        sys.executable,
        "-m",
        "a3c.train",
        "--env",
        "test_envs:TinyEnv-v0",
        "--env-kwargs",
        "length=7",
        "--workers",
        "2",
        "--envs-per-worker",
        "2",
        "--total-steps",
        "100000000",
        "--checkpoint-every",
        "0",
        "--run-dir",
        str(run_dir),
    ]

    def workers_with_episodes() -> set[int]:
        try:
            with open(run_dir / "episodes.csv") as f:
                return {int(r["worker"]) for r in csv.DictReader(f)}
        except (FileNotFoundError, KeyError, ValueError):  # (not written yet, or a row being written)
            return set()

    proc = subprocess.Popen(cmd, env=env, cwd=tmp_path, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: workers_with_episodes() == {0, 1} or proc.poll() is not None, timeout=120)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 130, err[-2000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["env"] == "test_envs:TinyEnv-v0"
    with open(run_dir / "episodes.csv") as f:
        rows = list(csv.DictReader(f))
    assert {int(r["length"]) for r in rows} == {7}  # the kwarg reached the env in the worker processes
    assert {int(r["worker"]) for r in rows} == {0, 1}
