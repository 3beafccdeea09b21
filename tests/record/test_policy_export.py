"""a3c.record.policy_export: the exported acting path (ONNX through onnxruntime, TorchScript through torch.jit.load)
gives Agent.act's deterministic actions on the same observations: 1,000 of a CartPole and of a Pendulum agent (its
frozen observation normalisation, clipping included), an LSTM's state in and out, uint8 and bool frames through a CNN;
the distribution's parameters on request; what is not exported is refused in one line."""

from __future__ import annotations

import json
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
import torch
from agent_runs import sampled, trained, untrained_run

import a3c
from a3c.record import policy_export
from a3c.record.agent import Agent
from a3c.spec.config import Config
from scripts.onnx_check import played as played_observations

N_OBS = 1000


def onnx_session(path):
    ort = pytest.importorskip("onnxruntime", reason="ONNX needs the [onnx] extra (.ci/run installs it)")
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def run_exported(path, fmt: str, obs: np.ndarray, state: np.ndarray | None = None) -> list[np.ndarray]:
    """The exported file's outputs for ``obs`` (and ``state``), as numpy arrays in the file's output order."""
    if fmt == "onnx":
        feeds = {"obs": obs} if state is None else {"obs": obs, "state": state}
        return onnx_session(path).run(None, feeds)
    module = torch.jit.load(str(path))
    args = (torch.from_numpy(obs),) + (() if state is None else (torch.from_numpy(state),))
    return [out.numpy() for out in module(*args)]


@pytest.fixture(scope="module")
def cartpole(tmp_path_factory):
    return trained(tmp_path_factory, "cartpole-export", env="CartPole-v1", total_steps=5000)


@pytest.fixture(scope="module")
def pendulum(tmp_path_factory):
    agent = trained(tmp_path_factory, "pendulum-export", env="Pendulum-v1", total_steps=4000)
    assert agent.config.normalize_obs  # (the preset's: the export must carry the frozen statistics)
    return agent


def observations(agent: Agent) -> np.ndarray:
    """1,000 observations: 900 played, and 100 of them pushed far out (x 40), where the normalisation clips."""
    played = played_observations(agent, N_OBS - 100)  # (scripts/onnx_check.py's: what it compares on)
    far = played[:100] * 40.0
    return np.concatenate([played, far]).astype(agent.observation_space.dtype)


@pytest.mark.parametrize("fmt", ["onnx", "torchscript"])
@pytest.mark.parametrize("which", ["cartpole", "pendulum"])
def test_the_exported_policy_acts_as_agent_act_on_1000_observations(which, fmt, request, tmp_path):
    if fmt == "onnx":
        pytest.importorskip("onnxruntime", reason="ONNX needs the [onnx] extra (.ci/run installs it)")
    agent = request.getfixturevalue(which)
    obs = observations(agent)
    expected = agent.act(obs)  # deterministic
    path = agent.export(tmp_path / f"policy.{fmt}", fmt)
    (actions,) = run_exported(path, fmt, obs)
    assert actions.shape == expected.shape and actions.dtype == expected.dtype
    if which == "cartpole":
        assert np.array_equal(actions, expected)
        assert 0.2 < expected.mean() < 0.8  # (a policy that does both: equality says something)
    elif fmt == "torchscript":
        assert np.array_equal(actions, expected)  # the same kernels: the same floats
    else:
        assert np.allclose(actions, expected, rtol=0, atol=1e-5)  # onnxruntime's own float kernels
    if which == "pendulum":
        normalized = agent.obs_transform(obs.astype(np.float32))
        assert (np.abs(normalized) == agent.config.clip_obs).any()  # (the clipping was exercised)
    same = int(np.isclose(actions, expected, rtol=0, atol=1e-5).reshape(len(obs), -1).all(axis=1).sum())
    print(
        f"\n{which} {fmt}: {same} of {len(obs)} actions as Agent.act's (max |difference| "
        f"{np.abs(actions.astype(np.float64) - expected).max():.2g})"
    )


@pytest.mark.parametrize("fmt", ["onnx", "torchscript"])
def test_the_distribution_parameters_come_out_on_request(cartpole, pendulum, fmt, tmp_path):
    if fmt == "onnx":
        pytest.importorskip("onnxruntime")
    obs = sampled(cartpole.observation_space, 32)
    action, logits = run_exported(cartpole.export(tmp_path / "c", fmt, with_dist_params=True), fmt, obs)
    with torch.no_grad():
        expected = cartpole.model.policy(torch.from_numpy(obs))[0].numpy()
    assert np.allclose(logits, expected, atol=1e-5) and np.array_equal(action, logits.argmax(-1))

    x = sampled(pendulum.observation_space, 32)
    action, mean, log_std = run_exported(pendulum.export(tmp_path / "p", fmt, with_dist_params=True), fmt, x)
    assert pendulum.config.gsde  # (the preset's: the std is a function of the state)
    with torch.no_grad():
        params = pendulum.model.policy(torch.from_numpy(pendulum.obs_transform(x)))[0]
        want_mean, want_log_std = (p.numpy() for p in pendulum.dist._mean_log_std(params))
    assert np.allclose(mean, want_mean, atol=1e-5) and np.allclose(log_std, want_log_std, atol=1e-5)
    assert np.ptp(log_std) > 0  # (a different std for different states)
    assert np.allclose(action, np.clip(mean, -2.0, 2.0), atol=1e-6)


@pytest.mark.parametrize("fmt", ["onnx", "torchscript"])
def test_a_recurrent_policy_takes_and_returns_its_state(fmt, tmp_path):
    """An LSTM (strong random weights, a separate critic: S = 4) over a sequence: the file's actions and state are
    predict's, step after step, from zeros; a batch of 3 envs."""
    if fmt == "onnx":
        pytest.importorskip("onnxruntime")
    config = Config(env="envs/Memory-v0", lstm=8, hidden_sizes=(16,))
    agent = a3c.load(untrained_run(tmp_path / "run", config, scale=1.5))
    path = agent.export(tmp_path / "lstm", fmt)
    obs = np.random.default_rng(0).uniform(-1, 1, (10, 3, 3)).astype(np.float32)
    state = np.zeros((4, 3, 8), dtype=np.float32)
    ours = None
    for t in range(10):
        expected, ours = agent.predict(obs[t], state=ours, deterministic=True)
        action, state = run_exported(path, fmt, obs[t], state)
        assert np.array_equal(action, expected)
        assert state.shape == (4, 3, 8) and np.allclose(state, ours, atol=1e-5)


@pytest.mark.parametrize("fmt", ["onnx", "torchscript"])
def test_box_actions_at_float64_bounds_stay_inside_the_space(fmt, tmp_path):
    """Found by a probing review: a float64 Box whose bounds float32 cannot hold (-0.1, 0.3): Agent.act clips the
    mean to the bounds themselves, the file clipped in float32 and gave 0.30000001, outside the space (an env that
    checks its actions raised)."""
    if fmt == "onnx":
        pytest.importorskip("onnxruntime")
    config = Config(env="envs/Spaces-v0", env_kwargs={"action": "box64"})
    agent = a3c.load(untrained_run(tmp_path / "run", config, scale=2.0))  # (strong weights: means past both bounds)
    obs = sampled(agent.observation_space, 256)
    (action,) = run_exported(agent.export(tmp_path / f"box64.{fmt}", fmt), fmt, obs)
    expected = agent.act(obs)
    assert action.dtype == np.float64
    at_bounds = (expected == 0.3) | (expected == -0.1)
    assert at_bounds.any() and (~at_bounds).any()  # (both kinds: clipped, and inside)
    assert np.array_equal(action[at_bounds], expected[at_bounds])  # the bounds themselves, exactly
    # inside: the same floats from TorchScript (the same kernels), onnxruntime's own float kernels near them. Weights
    # drawn ~ N(0, 2) make each mean a float32 sum of terms ~100 in size, where one rounding is ~1e-5 and onnxruntime
    # sums in its own order: 2.6e-5 at most over 3,000 draws of 256 observations (CI once drew one past 1e-5)
    assert np.allclose(action, expected, rtol=0, atol=0 if fmt == "torchscript" else 1e-4)
    assert all(agent.action_space.contains(row) for row in action)


@pytest.mark.parametrize("fmt", ["onnx", "torchscript"])
def test_frames_go_in_as_the_env_gives_them(fmt, tmp_path):
    """A CNN on envs/Catch-v0's bool frames and one on uint8 frames: the file takes the env's dtype, the Agent's
    actions come out."""
    if fmt == "onnx":
        pytest.importorskip("onnxruntime")
    for name, kwargs in (("bool", {}), ("uint8", {"dtype": "uint8"})):
        config = Config(env="envs/Catch-v0", env_kwargs=kwargs)
        agent = a3c.load(untrained_run(tmp_path / name, config, scale=0.3))
        obs = sampled(agent.observation_space, 64)
        assert obs.dtype == (np.bool_ if name == "bool" else np.uint8)
        (action,) = run_exported(agent.export(tmp_path / f"{name}.{fmt}", fmt), fmt, obs)
        assert np.array_equal(action, agent.act(obs))


def test_the_file_describes_what_it_takes_and_gives(pendulum, tmp_path):
    path = pendulum.export(tmp_path / "p.pt", "torchscript")
    files = {"a3c.json": ""}
    torch.jit.load(str(path), _extra_files=files)
    described = json.loads(files["a3c.json"])
    assert described["inputs"] == ["obs"] and described["outputs"] == ["action"]
    assert described["obs_shape"] == [3] and described["obs_dtype"] == "float32" and described["obs_normalization"]
    meta = onnx_session(pendulum.export(tmp_path / "p.onnx", "onnx")).get_modelmeta().custom_metadata_map
    assert json.loads(meta["a3c"])["env"] == "Pendulum-v1"


def test_the_onnx_file_runs_where_neither_torch_nor_a3c_can_be_imported(cartpole, tmp_path):
    pytest.importorskip("onnxruntime")
    obs = observations(cartpole)
    np.save(tmp_path / "obs.npy", obs)
    path = cartpole.export(tmp_path / "c.onnx", "onnx")
    code = (
        "import sys; sys.modules['torch'] = None; sys.modules['a3c'] = None\n"  # (an import of either fails)
        "import numpy as np, onnxruntime as ort\n"
        f"obs = np.load({str(tmp_path / 'obs.npy')!r})\n"
        f"print(' '.join(map(str, ort.InferenceSession({str(path)!r}).run(None, {{'obs': obs}})[0].tolist())))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert np.array_equal(np.array(done.stdout.split(), dtype=np.int64), cartpole.act(obs))


def test_what_is_not_exported_is_refused_in_one_line(tmp_path, monkeypatch):
    bf16 = a3c.load(untrained_run(tmp_path / "bf16", Config(env="envs/Catch-v0", bf16=True)))
    with pytest.raises(ValueError, match=r"a --bf16 agent .* export it with --format torchscript"):
        bf16.export(tmp_path / "x.onnx", "onnx")
    assert not (tmp_path / "x.onnx").exists()
    obs = sampled(bf16.observation_space, 8)
    (action,) = run_exported(bf16.export(tmp_path / "x.pt", "torchscript"), "torchscript", obs)
    assert np.array_equal(action, bf16.act(obs))  # (TorchScript records the bfloat16 casts)

    plain = a3c.load(untrained_run(tmp_path / "plain", Config(env="CartPole-v1")))
    by_hand = Agent(plain.model, plain.dist, plain.spec, plain.config, obs_transform=lambda x: x * 2)
    with pytest.raises(ValueError, match="observation transform is not a3c's observation normalisation"):
        by_hand.export(tmp_path / "y.pt", "torchscript")
    with pytest.raises(ValueError, match=r"--format 'tflite': a3c exports onnx or torchscript"):
        plain.export(tmp_path / "z", "tflite")
    assert plain.export(tmp_path / "w.pt", "TorchScript").is_file()  # (found by probing: refused in capitals)

    real = policy_export.importlib.util.find_spec
    monkeypatch.setattr(policy_export.importlib.util, "find_spec", lambda n: None if n == "onnxscript" else real(n))
    with pytest.raises(ValueError, match=r"--format onnx needs onnxscript, which is not installed; pip install"):
        plain.export(tmp_path / "z.onnx", "onnx")
    assert isinstance(plain.action_space, gym.spaces.Discrete)
