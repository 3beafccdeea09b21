"""Bad input ends in one line on stderr that names the problem and the fix, exit code 2, no traceback, and no process
started (no run directory either). Most cases run in-process through the CLI's own wrapper (fast); a few run the real
command to check the whole path."""

import importlib.util
import multiprocessing
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import a3c
from a3c.evaluate import main as evaluate_main
from a3c.learn.model import parameter_count
from a3c.record.checkpoint import rng_state, save_checkpoint
from a3c.spec import cpu, environment
from a3c.spec.config import Config
from a3c.spec.environment import describe_env, make_env
from a3c.spec.errors import UserError, run_cli
from a3c.train import main

REPO = Path(__file__).resolve().parents[1]

SPACES_MODULE = textwrap.dedent(
    '''
    """Envs with spaces a3c does not support, for tests/test_cli_errors.py."""
    import gymnasium as gym
    import numpy as np
    from gymnasium import spaces


    class _Env(gym.Env):
        observation_space = spaces.Box(-1.0, 1.0, (3,), np.float32)
        action_space = spaces.Discrete(2)

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            return self.observation_space.sample(), {}

        def step(self, action):
            return self.observation_space.sample(), 0.0, False, False, {}


    class DictObs(_Env):  # Dict/Tuple spaces of Boxes (and discrete spaces) are flattened; a Text leaf is not
        observation_space = spaces.Dict({"a": spaces.Box(-1.0, 1.0, (2,)), "b": spaces.Text(4)})


    class TupleObs(_Env):
        observation_space = spaces.Tuple((spaces.Discrete(2), spaces.Text(3)))


    class MultiBinaryObs(_Env):
        observation_space = spaces.MultiBinary(4)


    class BoxActions(_Env):  # float Box actions are supported (a Gaussian); integer ones are not
        action_space = spaces.Box(0, 3, (2,), np.int64)


    class MultiBinaryActions(_Env):
        action_space = spaces.MultiBinary(3)


    class Buggy(_Env):  # raises ValueError whatever its kwargs: a bug, not the user's input
        def __init__(self, size=1):
            raise ValueError("a bug in the env")


    class BuggyStep(_Env):  # steps into a ValueError whatever its kwargs
        def __init__(self, size=1):
            self.size = size

        def step(self, action):
            raise ValueError("a bug in the step")


    for name in ("DictObs", "TupleObs", "MultiBinaryObs", "BoxActions", "MultiBinaryActions", "Buggy", "BuggyStep"):
        gym.register(f"{name}-v0", entry_point=f"{__name__}:{name}")
    '''
)


@pytest.fixture
def spaces_module(tmp_path, monkeypatch):
    (tmp_path / "a3c_test_spaces.py").write_text(SPACES_MODULE)
    (tmp_path / "a3c_test_broken.py").write_text("def oops(:\n")
    (tmp_path / "a3c_test_raises.py").write_text("raise RuntimeError('no GPU here')\n")
    monkeypatch.syspath_prepend(str(tmp_path))


def _cli(argv, capsys, run_dir):
    """Run the CLI in-process with a run directory that must not come into being."""
    code = run_cli(main, ["--workers", "1", *argv, "--run-dir", str(run_dir)], prog="a3c.train")
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("a3c.train: error: "), err
    assert "Traceback" not in err
    assert not run_dir.exists()  # nothing created ...
    assert not multiprocessing.active_children()  # ... and nothing started
    return lines[0]


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["--env", "CartPol-v1"], "did you mean CartPole-v1"),
        (["--env", "envs/SlowCartPol-v1"], "did you mean envs/SlowCartPole-v1"),
        (["--env", "a3c_no_such_module:Foo-v0"], "env module 'a3c_no_such_module' does not import"),
        (["--env", "a3c_test_broken:Foo-v0"], "env module 'a3c_test_broken' fails on import (SyntaxError"),
        (["--env", "a3c_test_raises:Foo-v0"], "fails on import (RuntimeError: no GPU here)"),
        (["--env", "a3c_test_spaces:DictObs-v0"], "observation space Dict("),
        (["--env", "a3c_test_spaces:TupleObs-v0"], "observation space Tuple("),
        (["--env", "a3c_test_spaces:MultiBinaryObs-v0"], "observation space MultiBinary("),
        (["--env", "a3c_test_spaces:BoxActions-v0"], "supports Discrete, MultiDiscrete and float Box actions"),
        (["--env", "a3c_test_spaces:MultiBinaryActions-v0"], "action space MultiBinary("),
        (["--env", "CartPole-v1", "--env-kwargs", "nonsense=1"], "rejects --env-kwargs"),
        # gymnasium.make's TypeError and ValueError for a kwarg of the wrong type or range, naming the kwarg to blame
        (
            ["--env", "CartPole-v1", "--env-kwargs", "max_episode_steps=abc"],
            "rejects --env-kwargs max_episode_steps='abc' (TypeError: Expect the `max_episode_steps` to be an integer",
        ),
        (
            ["--env", "envs/SlowCartPole-v1", "--env-kwargs", "latency=0.001", "max_episode_steps=0"],
            "rejects --env-kwargs max_episode_steps=0 (ValueError: Expect the `max_episode_steps` to be positive",
        ),
        # gymnasium's Box2D envs check their kwargs with assert (found by probing: a traceback, exit 1)
        pytest.param(
            ["--env", "LunarLander-v3", "--env-kwargs", "gravity=5"],
            "rejects --env-kwargs gravity=5 (AssertionError: gravity (current value: 5) must be between -12 and 0",
            marks=pytest.mark.skipif(importlib.util.find_spec("Box2D") is None, reason="needs gymnasium[box2d]"),
        ),
    ],
)
def test_env_errors(argv, expected, spaces_module, capsys, tmp_path):
    line = _cli(argv, capsys, tmp_path / "run")
    assert expected in line


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["--env", "CartPole-v1", "--gsde"], "actions; drop --gsde"),
        (
            ["--env", "CartPole-v1", "--preset", "Pendulum-v1"],
            "--gsde and --log-std-init are for continuous (Box) actions, but CartPole-v1 has Discrete(2) actions; the "
            "preset Pendulum-v1 sets --gsde and --log-std-init; give --no-gsde --log-std-init 0.0, or another --preset",
        ),
        (
            ["--env", "CartPole-v1", "--preset", "Pendulum-v1", "--no-gsde", "--log-std-init", "-3"],
            "--log-std-init is for continuous (Box) actions, but CartPole-v1 has Discrete(2) actions; drop "
            "--log-std-init",
        ),
        (
            ["--env", "MountainCar-v0", "--preset", "MountainCarContinuous-v0"],
            "sets --gsde and --clipped-log-prob; give --no-gsde --no-clipped-log-prob, or another --preset",
        ),
        (["--env", "CartPole-v1", "--preset", "atari"], "the preset atari sets --bf16; give --no-bf16"),
        (
            ["--env", "envs/Catch-v0", "--hidden-sizes", "256"],
            "--hidden-sizes [256] is for the MLP torso of vector observations, but envs/Catch-v0 observes images "
            "(Box(False, True, (10, 10, 2), bool)), which a3c's CNN torso takes; drop --hidden-sizes",
        ),
        (
            ["--env", "CartPole-v1", "--preset", "mujoco", "--log-std-init", "-3"],
            "drop --log-std-init; the preset mujoco sets --gsde and --clipped-log-prob; give --no-gsde "
            "--no-clipped-log-prob, or another --preset",
        ),
        (
            ["--env", "envs/Catch-v0", "--preset", "envs/Memory-v0"],
            "the preset envs/Memory-v0 sets --hidden-sizes; give --hidden-sizes 64 64, or another --preset",
        ),
    ],
)
def test_a_setting_the_env_cannot_take_is_taken_off_where_it_came_from(argv, expected, capsys, tmp_path, monkeypatch):
    """Bug (found combining flags): a preset's --gsde or --bf16 under an env that cannot take it was answered "drop
    --gsde", a flag the user never typed. The CPU is pinned to one with bfloat16 instructions: elsewhere the atari
    preset's --bf16 is dropped (a3c.spec.preset_choice), the command is accepted and would train (the test below)."""
    from a3c.spec import cpu

    monkeypatch.setattr(cpu, "native_bf16", lambda: True)
    assert expected in _cli(argv, capsys, tmp_path / "run")


def test_a_presets_bf16_the_env_cannot_take_is_not_refused_on_a_cpu_without_bfloat16(monkeypatch):
    """The other side of the atari case above: on a CPU without bfloat16 instructions the preset's --bf16 is dropped
    before the env is checked, so the command is not refused for it. Resolved only (parse_cli), not run: it would
    train."""
    from a3c.spec import cpu
    from a3c.spec.preset_choice import CPU
    from a3c.train import parse_cli

    monkeypatch.setattr(cpu, "native_bf16", lambda: False)
    config, sources, _ = parse_cli(["--workers", "1", "--env", "CartPole-v1", "--preset", "atari"])
    assert config.preset == "atari" and config.bf16 is False and sources["bf16"] == CPU


def test_an_env_file_that_does_not_register_the_id_says_what_it_registers(capsys, tmp_path):
    """Bug (found combining flags): a file that ran but registered no such id got gymnasium's registry's closest ids
    ("did you mean Acrobot-v1?", "Pusher-v5?"), none of them the file's."""
    good = tmp_path / "good_envs_here.py"
    good.write_text(
        "import gymnasium\n"
        "gymnasium.register(id='GoodHere-v0', entry_point='gymnasium.envs.classic_control:CartPoleEnv')\n"
    )
    line = _cli(["--env", f"{good}:OtherHere-v0"], capsys, tmp_path / "run")
    assert f"env file {good} registers no OtherHere-v0 (it registers GoodHere-v0)" in line
    assert f"--env {good}:GoodHere-v0" in line and "did you mean" not in line
    none = tmp_path / "registers_nothing_here.py"
    none.write_text("X = 1\n")
    line = _cli(["--env", f"{none}:Foo-v0"], capsys, tmp_path / "run")
    assert f"env file {none} registers no env id" in line and "gymnasium.register(id='Foo-v0'" in line


def test_a_module_imported_before_that_registers_no_such_id_says_so(capsys, tmp_path):
    """Found by probing: --env json:Foo-v0 (a module a3c had imported already, so what it registers is not known)
    got the registry's closest ids alone ("did you mean Acrobot-v1?"), not that the module registers no Foo-v0."""
    line = _cli(["--env", "json:Foo-v0"], capsys, tmp_path / "run")
    assert "unknown env id 'json:Foo-v0': module json registered no Foo-v0" in line, line
    assert "gymnasium.register(id='Foo-v0', entry_point=...)" in line


@pytest.mark.parametrize("space", ["observation", "action"])
def test_an_env_class_that_sets_no_space_is_one_line(space, capsys, tmp_path):
    """An env class whose __init__ never sets a space: gymnasium's env checker raises AttributeError inside
    gymnasium.make, which ended in its traceback; it is the env author's to fix, in one line."""
    spaces = {
        "observation": "self.observation_space = gymnasium.spaces.Box(-1, 1, (3,))",
        "action": "self.action_space = gymnasium.spaces.Discrete(2)",
    }
    env_file = tmp_path / f"no_{space}_space_here.py"
    env_file.write_text(
        "import gymnasium\n"
        "class NoSpace(gymnasium.Env):\n"
        "    def __init__(self):\n"
        f"        {spaces['action' if space == 'observation' else 'observation']}\n"
        f"gymnasium.register(id='No{space.title()}Space-v0', entry_point=NoSpace)\n"
    )
    line = _cli(["--env", f"{env_file}:No{space.title()}Space-v0"], capsys, tmp_path / "run")
    assert f"The environment must specify an {space} space" in line and "set self." in line


def test_an_env_path_that_is_a_directory_or_names_no_module_says_so(capsys, tmp_path):
    (tmp_path / "envdir").mkdir()
    line = _cli(["--env", f"{tmp_path / 'envdir'}:Foo-v0"], capsys, tmp_path / "run")
    assert "is a directory; give the Python file in it that registers the id" in line
    line = _cli(["--env", ":Foo-v0"], capsys, tmp_path / "run")
    assert "names no module before its colon" in line and "Empty module name" not in line


def test_an_env_that_fails_without_the_kwargs_still_raises(spaces_module):
    """Only the user's kwargs are blamed: an env whose constructor raises ValueError without them is a bug."""
    with pytest.raises(ValueError, match="a bug in the env") as err:
        make_env("a3c_test_spaces:Buggy-v0", {"size": 3})
    assert not isinstance(err.value, UserError)


def test_an_env_whose_first_step_fails_without_the_kwargs_still_raises(spaces_module):
    """The first-step check blames only the user's kwargs: an env that fails its step without them is a bug."""
    with pytest.raises(ValueError, match="a bug in the step") as err:
        describe_env("a3c_test_spaces:BuggyStep-v0", {"size": 3}, first_step=True)
    assert not isinstance(err.value, UserError)
    describe_env("a3c_test_spaces:BuggyStep-v0", {}, first_step=True)  # no kwargs: nothing to check, not stepped


@pytest.mark.parametrize(
    "env, kwargs",
    [("Pendulum-v1", "g=9.81"), ("envs/Spaces-v0", "obs=box action=discrete")],  # (a preset; the family's table)
)
def test_a_new_run_with_env_kwargs_makes_its_env_once_before_the_workers(env, kwargs, monkeypatch, capsys):
    """The read-back found preflight making the env to read its spaces, closing it, then making it again to take its
    first step, on every new run with --env-kwargs; both now happen in the one make (where the preset choice made it
    for the family's table, or in preflight)."""
    made = []

    def counted(*args, **kwargs):
        made.append(args)
        return make_env(*args, **kwargs)

    monkeypatch.setattr(environment, "make_env", counted)
    argv = ["--env", env, "--env-kwargs", *kwargs.split(), "--workers", "1", "--show-config"]
    assert run_cli(main, argv, prog="a3c.train") == 0, capsys.readouterr().err
    assert len(made) == 1, made


def test_a_negative_seed_is_refused_before_anything_is_created(tmp_path, capsys):
    """--seed -1 used to fail in numpy's SeedSequence after the run directory existed; a3c.train and
    python -m a3c.evaluate (of a real run) refuse it the same way."""
    assert (
        _cli(["--seed", "-1"], capsys, tmp_path / "cli") == "a3c.train: error: --seed must be an integer >= 0 (got -1)"
    )
    with pytest.raises(ValueError, match=r"--seed must be an integer >= 0 \(got -3\)"):
        a3c.train(seed=-3, workers=1, run_dir=str(tmp_path / "api"))
    assert not (tmp_path / "api").exists()
    run = a3c.train(
        backend="serial", workers=1, envs_per_worker=2, total_steps=50, eval_every=0, run_dir=str(tmp_path / "run")
    ).run_dir
    capsys.readouterr()  # the training's own lines
    assert run_cli(evaluate_main, [str(run), "--seed", "-1"], prog="a3c.evaluate") == 2
    err = capsys.readouterr().err
    assert err == "a3c.evaluate: error: --seed must be an integer >= 0 (got -1)\n"
    assert not (run / "evaluate-latest.json").exists()


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["--workers", "0"], "--workers must be at least 1 (got 0)"),
        (["--lr", "0"], "--lr must be a positive number"),
        (["--lr=-1e-3"], "--lr must be a positive number"),
        (["--lr", "nan"], "--lr must be a positive number"),
        (["--gamma", "0"], "--gamma must be in (0, 1]"),
        (["--gamma", "1.5"], "--gamma must be in (0, 1]"),
        (["--n-steps", "0"], "--n-steps must be at least 1"),
        (["--total-steps", "0"], "--total-steps must be at least 1"),
        (["--worker-timeout", "0"], "--worker-timeout must be a positive number"),
        (["--max-restarts", "-1"], "--max-restarts must be >= 0"),
        (["--max-skipped-in-row", "0"], "--max-skipped-in-row must be at least 1"),
        (["--push-every", "0", "--backend", "ray"], "--push-every must be at least 1 (got 0)"),
        (["--push-every", "4"], "--push-every 4 is for --backend ray"),
        (["--ray-same-node", "ray"], "--ray-same-node ray is for --backend ray"),
        # settings that do nothing where two others meet (found combining flags: both were taken without a word)
        (
            ["--backend", "serial", "--start-method", "spawn"],
            "--start-method spawn is how worker processes start, and --backend serial starts none",
        ),
        (
            ["--backend", "ray", "--push-every", "4"],
            "--push-every 4 is for workers that reach the server by actor calls, and a local Ray's",
        ),
        (["--exp-name", "mine"], "--exp-name names the default run directory, and --run-dir names another"),
        (["--ray-address", "auto"], "--ray-address auto is for --backend ray; drop it, or add --backend ray"),
        (["--ray-node-ip", "10.0.0.2"], "--ray-node-ip 10.0.0.2 is for --backend ray"),
        (["--ray-cpus-per-worker", "0.5"], "--ray-cpus-per-worker 0.5 is for --backend ray"),
        (["--clip-obs", "5"], "--clip-obs 5.0 is for --normalize-obs; drop it, or add --normalize-obs"),
        (["--clip-reward", "1"], "--clip-reward 1.0 is for --normalize-reward; drop it, or add --normalize-reward"),
        (["--log-std-init", "-1"], "--log-std-init is for continuous (Box) actions, but CartPole-v1 has Discrete(2)"),
        (["--clipped-log-prob"], "--clipped-log-prob is for continuous (Box) actions, but CartPole-v1 has Discrete"),
        (["--backend", "ray", "--ray-cpus-per-worker", "-1"], "--ray-cpus-per-worker must be a number >= 0"),
        (["--workers", "two"], "argument --workers: takes a number of workers or auto (got 'two')"),
        (["--env-kwargs"], "--env-kwargs needs key=value pairs (e.g. --env-kwargs latency=0.01), or leave it out"),
        (["--env-kwargs", "--seed", "2"], "--env-kwargs needs key=value pairs"),
        # a bare second one was taken as nothing, without a word (the first's pairs alone counted)
        (["--env-kwargs", "latency=0.01", "--env-kwargs"], "--env-kwargs needs key=value pairs"),
        (["--lr", "fast"], "argument --lr: invalid float value: 'fast'"),
        (["--optimizer", "sgd"], "argument --optimizer: invalid choice"),
        (["--no-such-flag"], "unrecognized arguments: --no-such-flag"),
        (["--bf16"], "--bf16 is for image observations (the CNN torso), but CartPole-v1 observes Box("),
        (["--algo", "sac"], "argument --algo: invalid choice: 'sac'"),
        (["--n-epochs", "10", "--clip-range", "0.1"], "--n-epochs 10 is for --algo ppo"),
        (["--vtrace-c-bar", "2"], "--vtrace-c-bar 2.0 is for --targets vtrace"),
        (["--targets", "vtrace", "--vtrace-rho-bar", "0"], "--vtrace-rho-bar must be a positive number (got 0.0)"),
        (["--optimizer-eps", "-1"], "--optimizer-eps must be a positive number, or none"),
        (["--stop-at", "high"], "argument --stop-at: invalid float value: 'high' (or none: not set)"),
        (
            ["--algo", "ppo", "--n-steps", "5", "--envs-per-worker", "8", "--minibatch-size", "64"],
            "--minibatch-size 64 is more than a worker's rollout (--n-steps 5 x --envs-per-worker 8 = 40 samples) "
            "with --algo ppo; give a longer --n-steps or a smaller --minibatch-size",
        ),
        (
            ["--algo", "ppo", "--lstm", "--n-steps", "5", "--envs-per-worker", "8", "--minibatch-size", "64"],
            "--minibatch-size 64 is more than a worker's rollout (--n-steps 5 x --envs-per-worker 8 = 40 samples) "
            "with --algo ppo",
        ),
        (["--algo", "ppo", "--n-steps", "64", "--n-epochs", "0"], "--n-epochs must be at least 1 (got 0)"),
        (["--algo", "ppo", "--clip-range", "0"], "--clip-range must be a positive number (got 0.0)"),
        (["--algo", "ppo", "--clip-range-vf", "-1"], "--clip-range-vf must be a positive number, or none"),
        (["--algo", "ppo", "--max-policy-lag", "-1"], "--max-policy-lag must be >= 0"),
    ],
)
def test_value_errors(argv, expected, capsys, tmp_path):
    line = _cli(argv, capsys, tmp_path / "run")
    assert expected in line


def _a_run(tmp_path):
    run = tmp_path / "old"
    (run / "checkpoints").mkdir(parents=True)
    (run / "config.json").write_text("{}")
    return run


def _resume_error(argv, capsys):
    code = run_cli(main, argv, prog="a3c.train")
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert not multiprocessing.active_children()
    return err


def test_resume_path_missing_or_not_a_run(tmp_path, capsys):
    assert "no such directory" in _resume_error(["--resume", str(tmp_path / "nope")], capsys)
    (tmp_path / "file").write_text("x")
    assert "is not an a3c run directory" in _resume_error(["--resume", str(tmp_path / "file")], capsys)
    assert "is not an a3c run directory" in _resume_error(["--resume", str(tmp_path)], capsys)
    run = _a_run(tmp_path)
    assert "has no checkpoints/latest.pt" in _resume_error(["--resume", str(run)], capsys)


def test_resume_corrupt_checkpoint(tmp_path, capsys):
    run = _a_run(tmp_path)
    (run / "checkpoints" / "latest.pt").write_bytes(b"\x89not a checkpoint at all")
    assert "is corrupt or not a torch file" in _resume_error(["--resume", str(run)], capsys)


def _checkpointed_run(tmp_path, **changes):
    """A run directory with a well-formed CartPole checkpoint at step 500 (``changes`` replace entries)."""
    run = _a_run(tmp_path)
    config = Config(workers=1, total_steps=1000, run_dir=str(run))
    params = torch.zeros(parameter_count(describe_env("CartPole-v1"), config))
    payload = {
        "model": params,
        "optimizer": {"lr": 1e-3, "steps": torch.tensor([50]), "exp_avg": params.clone(), "exp_avg_sq": params.clone()},
        "global_step": 500,
        "worker_steps": torch.tensor([500]),
        "episodes_written": torch.tensor([20]),
        "worker_stats": torch.zeros(1, 13, dtype=torch.float64),
        "incarnations": torch.tensor([1]),
        "restarts": 0,
        "obs_dim": 4,
        "n_actions": 2,
        "config": config.to_dict(),
        "rng": rng_state(),
        **changes,
    }
    save_checkpoint(run / "checkpoints" / "latest.pt", payload)
    return run


MOMENTS_OF_3 = {"exp_avg": torch.zeros(3), "exp_avg_sq": torch.zeros(3)}  # (Adam's, for a model of 3 parameters)


@pytest.mark.parametrize(
    "changes, flags, expected",
    [
        ({"obs_dim": 6}, [], "trained with observations of size 6 and 2 actions, but the env now has 4 and 2"),
        ({"model": torch.zeros(7)}, [], "holds 7 parameters but the model has"),
        ({}, ["--env", "Acrobot-v1"], "--env 'Acrobot-v1' differs from the resumed run's 'CartPole-v1'"),
        ({}, ["--hidden-sizes", "32"], "--hidden-sizes [32] differs"),
        ({}, ["--shared-torso"], "--shared-torso differs from the resumed run's --no-shared-torso"),
        (
            {"spaces": {"observation_space": "Box(-1.0, 1.0, (6,), float32)", "action_space": "Discrete(3)"}},
            [],
            "was trained on Box(-1.0, 1.0, (6,), float32) observations and Discrete(3) actions, but env "
            "'CartPole-v1' now has",
        ),
        ({"global_step": 1000}, [], "already at step 1,000, not below --total-steps 1,000"),
        ({}, ["--total-steps", "400"], "give a larger --total-steps"),
        ({"optimizer": "not a dict"}, [], "no valid 'optimizer' entry"),
        # --gsde changes the policy head: named as the flag, not as "the env now has 3 and 129 actions"
        ({}, ["--gsde"], "--gsde differs from the resumed run's --no-gsde"),
        # the evaluations' way of choosing actions: a checkpoint from before the setting evaluated the most likely
        (
            {},
            ["--eval-stochastic"],
            "--eval-stochastic differs from the resumed run's --no-eval-stochastic; its evaluations (eval.csv, "
            "checkpoints/best.pt) compare one way of choosing actions: drop --eval-stochastic, or start a new run",
        ),
        ({}, ["--exp-name", "mine"], "--exp-name does not apply to --resume"),
        # files that unpickle but do not fit: refused before config.json or episodes.csv is touched
        ({"optimizer": {"lr": 1e-3, "steps": torch.tensor([50])}}, [], "state does not fit its model (no 'exp_avg')"),
        ({"optimizer": {"lr": 1e-3, "steps": torch.tensor([50]), **MOMENTS_OF_3}}, [], "adam state does not fit"),
        ({"worker_stats": torch.zeros(13, dtype=torch.float64)}, [], "worker stats are shaped (13,)"),
        # a setting of a newer a3c: resumed without it, the run would go on otherwise than it was trained (found in
        # review: it was dropped unsaid)
        (
            {"config": {**Config(workers=1, total_steps=1000).to_dict(), "future_setting": 3, "other_new": "x"}},
            [],
            "holds settings this a3c does not know (future_setting, other_new): it was written by a newer a3c; "
            "upgrade a3c to resume it",
        ),
    ],
)
@pytest.mark.parametrize("show", [[], ["--show-config"]])
def test_resume_incompatible_checkpoint(tmp_path, capsys, changes, flags, expected, show):
    """Each refused resume, in one line, nothing touched; --show-config beside it gives the error the resume would
    (found by a probing review: it printed the settings, exit 0, for resumes the run refuses)."""
    run = _checkpointed_run(tmp_path, **changes)
    assert expected in _resume_error(["--resume", str(run), *flags, *show], capsys)
    assert not (run / "episodes.csv").exists()  # refused before anything was touched
    assert (run / "config.json").read_text() == "{}"  # (as _a_run wrote it: not rewritten)


class _CreatesFile:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_malicious_resume_checkpoint_is_refused_end_to_end(tmp_path):
    run = _a_run(tmp_path)
    target = tmp_path / "created-by-the-checkpoint"
    torch.save({"format": 1, "model": _CreatesFile(str(target))}, run / "checkpoints" / "latest.pt")
    proc = subprocess.run([sys.executable, "-m", "a3c.train", "--resume", str(run)], capture_output=True, text=True)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "refused by the safe loader" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not target.exists()


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["--workers", "two"], "takes a number of workers or auto (got 'two')"),
        (["--env-kwargs"], "--env-kwargs needs key=value pairs"),
        (["--env", "CartPol-v1"], "did you mean CartPole-v1"),
        (["--seed", "-1"], "--seed must be an integer >= 0 (got -1)"),
        (["--wokers", "2"], "unrecognized arguments: --wokers 2 (did you mean --workers for --wokers?)"),
        # no prefix matching: a typo is an error, not another flag
        (["--total-step", "1000"], "unrecognized arguments: --total-step 1000 (did you mean --total-steps for"),
    ],
)
def test_the_real_command_prints_one_line_and_exits_2(tmp_path, argv, expected):
    run_dir = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "a3c.train", *argv, "--run-dir", str(run_dir)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and expected in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stdout == "" and not run_dir.exists()


# -- issue 27: each message names the fix ----------------------------------------------------------------------------
def _one_line_error(argv, capsys):
    code = run_cli(main, argv, prog="a3c.train")
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    return err


def test_a_discrete_observation_points_to_the_one_hot_recipe(tmp_path, capsys):
    err = _one_line_error(["--env", "FrozenLake-v1", "--run-dir", str(tmp_path / "run")], capsys)
    assert "observation space Discrete(16), which is not supported" in err
    assert "FlattenObservation (one-hot)" in err and "'Your own environment'" in err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "env_id, library, extra",
    [
        ("LunarLander-v3", "Box2D", "box2d"),
        ("LunarLanderContinuous-v3", "Box2D", "box2d"),
        ("Hopper-v5", "MuJoCo", "mujoco"),
    ],
)
def test_an_env_whose_library_is_missing_names_the_extra(env_id, library, extra, capsys, monkeypatch):
    """gymnasium's own message (for Box2D: 'pip install swig' first) replaced by the project's extra."""
    import gymnasium as gym

    def make(name, **kwargs):
        raise gym.error.DependencyNotInstalled(
            "Box2D is not installed, you can install it by run `pip install swig` followed by "
            '`pip install "gymnasium[box2d]"`'
        )

    monkeypatch.setattr(gym, "make", make)
    err = _one_line_error(["--env", env_id], capsys)
    assert f'{env_id} needs {library}, which is not installed; install the extra: pip install -e ".[{extra}]"' in err
    assert "swig" not in err


def test_backend_ray_without_ray_names_the_extra(capsys, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a))
    err = _one_line_error(["--backend", "ray", "--workers", "1"], capsys)
    assert 'needs Ray, which is not installed; pip install -e ".[ray]" in the a3c clone' in err


def test_atari_without_ale_py_or_opencv_names_the_extra(capsys, monkeypatch):
    import gymnasium as gym

    from a3c.spec import environment

    monkeypatch.setitem(sys.modules, "ale_py", None)  # import ale_py raises ImportError
    assert 'ALE/Pong-v5 needs ale-py; install the extra: pip install -e ".[atari]"' in _one_line_error(
        ["--env", "ALE/Pong-v5"], capsys
    )
    monkeypatch.delitem(sys.modules, "ale_py")
    pytest.importorskip("ale_py")

    def no_opencv(env, training=True):
        raise gym.error.DependencyNotInstalled("opencv-python is not installed")

    monkeypatch.setattr(environment, "atari_wrappers", no_opencv)
    assert 'ALE/Pong-v5 needs OpenCV; install the extra: pip install -e ".[atari]"' in _one_line_error(
        ["--env", "ALE/Pong-v5"], capsys
    )


def test_resume_of_a_missing_path_answers_before_torch_is_imported(tmp_path):
    """Issue 27: it took 5 s (torch imported first); now the path is checked first (< 1 s on an idle machine)."""
    probe = (
        "import sys; from a3c.spec.errors import run_cli; from a3c.train import main; "
        f"code = run_cli(main, ['--resume', {str(tmp_path / 'nope')!r}], prog='a3c.train'); "
        "print(code, 'torch' in sys.modules)"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert proc.stdout.split() == ["2", "False"], proc.stdout + proc.stderr
    assert proc.stderr.count("\n") == 1 and "no such directory" in proc.stderr


# -- issue 55: a newcomer's walls --------------------------------------------------------------------------------------
GO_RIGHT = textwrap.dedent(
    '''
    """A user's env in a file of its own, registered when the file runs."""
    import gymnasium as gym
    import numpy as np


    class GoRight(gym.Env):
        observation_space = gym.spaces.Box(0.0, 1.0, (1,), np.float32)
        action_space = gym.spaces.Discrete(2)

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            self.x = 0
            return np.zeros(1, np.float32), {}

        def step(self, action):
            self.x += 1 if action == 1 else 0
            return np.full(1, self.x / 10, np.float32), float(action), self.x >= 10, False, {}


    gym.register("GoRight-v0", entry_point=f"{__name__}:GoRight", max_episode_steps=20)
    '''
)


def test_an_env_in_a_file_is_made_from_its_path(tmp_path, monkeypatch):
    """Before: ``--env ./my_env.py:GoRight-v0`` ended in "fails on import (TypeError: the 'package' argument is
    required to perform a relative import for './my_env.py')"."""
    (tmp_path / "a3c_my_env.py").write_text(GO_RIGHT)
    monkeypatch.chdir(tmp_path)
    env = make_env("./a3c_my_env.py:GoRight-v0")
    assert env.action_space.n == 2 and env.spec.id == "GoRight-v0"
    env.close()
    spec = describe_env(f"{tmp_path / 'a3c_my_env.py'}:GoRight-v0")  # an absolute path too
    assert spec.max_episode_steps == 20


def test_an_env_file_that_is_missing_says_the_two_forms(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line = _cli(["--env", "./nowhere.py:GoRight-v0"], capsys, tmp_path / "run")
    assert "env file ./nowhere.py: no such file" in line
    assert "path/to/file.py:Name-v0" in line and "module:Name-v0 with the module on sys.path" in line


def test_an_env_file_under_an_unknown_home_directory_is_one_line_not_a_traceback(tmp_path, capsys, monkeypatch):
    """Before: ``~nosuchuser/my_env.py:Id`` ended in Path.expanduser's RuntimeError, a traceback."""
    monkeypatch.chdir(tmp_path)
    line = _cli(["--env", "~a3c_no_such_user/my_env.py:GoRight-v0"], capsys, tmp_path / "run")
    assert "env file ~a3c_no_such_user/my_env.py: no such file" in line


def test_a_resumed_run_s_env_file_missing_here_says_to_resume_from_where_it_started(tmp_path, capsys, monkeypatch):
    """Before: a run started as ``--env ./my_env.py:Id`` and resumed from another directory was told "give --env
    path/to/file.py:Name-v0", which a resume then refuses (a resumed run keeps its env)."""
    env = "./a3c_my_env.py:GoRight-v0"
    run = _checkpointed_run(tmp_path, config=Config(env=env, workers=1, total_steps=1000).to_dict())
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    err = _resume_error(["--resume", str(run)], capsys)
    assert f"the resumed run's env file ./a3c_my_env.py is not in {elsewhere}" in err
    assert "resume from there, or put the file back there" in err and "give --env" not in err
    # --show-config gives the error the resume would (it showed the settings of a resume refused here; its
    # config.json holds them)
    assert err == _resume_error(["--resume", str(run), "--show-config"], capsys)


def test_an_evaluated_run_s_env_file_gone_says_to_put_it_back(tmp_path, capsys):
    gone = tmp_path / "a3c_gone_env.py"
    run = _checkpointed_run(tmp_path, config=Config(env=f"{gone}:GoRight-v0", workers=1, total_steps=1000).to_dict())
    assert run_cli(evaluate_main, [str(run)], prog="a3c.evaluate") == 2
    err = capsys.readouterr().err
    assert f"the evaluated run's env file {gone}: no such file; the run keeps its env: put the file back" in err, err
    assert len(err.strip().splitlines()) == 1 and "give --env" not in err


def test_a_resumed_run_s_env_file_under_an_unknown_home_directory_says_to_put_it_back(tmp_path, capsys):
    """``~nosuchuser/...`` is not relative to a directory: "resume from there" would not help."""
    env = "~a3c_no_such_user/my_env.py:GoRight-v0"
    run = _checkpointed_run(tmp_path, config=Config(env=env, workers=1, total_steps=1000).to_dict())
    err = _resume_error(["--resume", str(run)], capsys)
    assert "the resumed run's env file ~a3c_no_such_user/my_env.py: no such file; the run keeps its env" in err, err


def test_a_forgotten_module_prefix_is_suggested_from_the_files_here(tmp_path, capsys, monkeypatch):
    (tmp_path / "a3c_my_env.py").write_text(GO_RIGHT.replace("GoRight-v0", "GoRightAlone-v0"))
    monkeypatch.chdir(tmp_path)
    line = _cli(["--env", "GoRightAlone-v0"], capsys, tmp_path / "run")
    assert "unknown env id 'GoRightAlone-v0'" in line and "did you mean a3c_my_env:GoRightAlone-v0?" in line


@pytest.mark.parametrize(
    ("install", "expected"),
    [
        ("clone", 'pip install -e ".[box2d]" in the a3c clone'),
        ("site", 'pip install "gymnasium[box2d]"'),
    ],
)
def test_a_missing_extra_names_the_install_that_fits_how_a3c_was_installed(install, expected, monkeypatch):
    """Before: a wheel's user was told to run ``pip install -e ".[box2d]"`` in an a3c clone they do not have."""
    from a3c.spec import errors

    monkeypatch.setattr(errors, "installed_from_clone", lambda: install == "clone")
    assert expected in errors.install_extra("box2d")
    assert "clone" not in errors.install_extra("atari") or install == "clone"
    if install == "site":  # the extra's own requirements, from a3c's metadata: what pip can install without a clone
        assert errors.install_extra("atari").startswith('pip install "ale-py>=0.9" "opencv-python-headless"')


def test_ctrl_c_before_the_run_starts_is_one_line_and_exit_130(monkeypatch, capsys, tmp_path):
    """Found stopping the learning queue: a Ctrl-C while a3c.train checked its input (reading the presets, making the
    env, measuring --workers auto), before the Trainer's own handling was in place, ended in a KeyboardInterrupt
    traceback of 30 lines. Now one line and 128 + SIGINT, as an interrupted run exits, and nothing made."""
    import a3c.train

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(a3c.train, "resolve_run", interrupted)
    code = run_cli(main, ["--run-dir", str(tmp_path / "run")], prog="a3c.train")
    err = capsys.readouterr().err
    assert code == 130 and err == "a3c.train: interrupted (Ctrl-C) before the run started; nothing was written\n", err
    assert not (tmp_path / "run").exists()


def test_a_ctrl_c_no_command_handles_is_one_line_and_exit_130(capsys):
    """Every command runs through run_cli: a Ctrl-C that reaches it (a3c.evaluate between episodes, a3c.export as it
    traces) ends in one line and 130, not Python's traceback."""

    def main(argv):
        raise KeyboardInterrupt

    assert run_cli(main, [], prog="a3c.evaluate") == 130
    assert capsys.readouterr().err == "a3c.evaluate: interrupted (Ctrl-C)\n"


@pytest.mark.parametrize("backend", [[], ["--env-backend", "ale-vector"]])
@pytest.mark.parametrize("kwarg, raised", [("mode=99", "Invalid game mode"), ("difficulty=99", "Invalid difficulty")])
def test_an_atari_mode_the_game_lacks_is_one_line(kwarg, raised, backend, capsys, tmp_path):
    """Found by probing: ale-py raises RuntimeError for a game mode or difficulty the game does not have, and
    make_env turned only TypeError and ValueError into the one line: a traceback, exit 1."""
    pytest.importorskip("ale_py", reason="Atari needs the [atari] extra (.ci/run installs it)")
    line = _cli(["--env", "ALE/Breakout-v5", *backend, "--env-kwargs", kwarg], capsys, tmp_path / "run")
    assert f"rejects --env-kwargs {kwarg} (RuntimeError: {raised}" in line


def test_a_new_atari_run_refuses_obs_type_and_a_resumed_one_keeps_it(capsys, tmp_path):
    """obs_type changes nothing the learner sees: a new run refuses it in one line; a run made with it before (its
    config's env kwargs, fixed on resume) still passes the checks."""
    pytest.importorskip("ale_py", reason="Atari needs the [atari] extra (.ci/run installs it)")
    from a3c.run.resolve import preflight
    from a3c.spec.config import Config
    from a3c.spec.preset_choice import CHECKPOINT

    line = _cli(["--env", "ALE/Breakout-v5", "--env-kwargs", "obs_type=ram"], capsys, tmp_path / "run")
    assert "--env-kwargs obs_type=ram: a3c's Atari preprocessing learns from 84x84 grey frames" in line
    config = Config(env="ALE/Breakout-v5", env_kwargs={"obs_type": "ram"}, workers=1)
    preflight(config, sources={"env_kwargs": CHECKPOINT})  # (raises UserError if refused)


@pytest.mark.parametrize(
    "command",
    [
        ["scripts.bench", "table", "--store", str(REPO / "docs/data/results.jsonl")],
        # (it caught its own BrokenPipeError and exited 0, unlike every other command: found in review)
        ["a3c.train", "--env", "CartPole-v1", "--show-config"],
    ],
)
def test_output_piped_into_a_reader_that_stopped_ends_quietly(command):
    """``python -m scripts.bench table | head -3``: the reader closes the pipe before the command has written all;
    the command ends quietly with 141 (128 + SIGPIPE, what a shell shows for a writer stopped so), no traceback and
    no "Exception ignored" at exit. The read end is closed before the command starts, so its first write meets it."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            [sys.executable, "-m", *command],
            cwd=REPO,
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write_end)
    assert done.returncode == 141, done.stderr
    assert done.stderr == ""


def test_run_cli_lets_other_broken_pipes_through():
    """A BrokenPipeError that is not stdout's (a pipe to a child process) is a bug to see, not hidden."""

    def main(argv):
        raise BrokenPipeError(32, "Broken pipe")

    with pytest.raises(BrokenPipeError):
        run_cli(main, [])


def test_stdout_s_own_flush_meeting_a_gone_reader_is_141_where_poll_cannot_tell(monkeypatch):
    """Noted in an earlier review: where select has no poll (Windows), run_cli could not tell stdout's broken pipe
    from another's, so `--show-config | head` re-raised. The output a command prints into a pipe waits in stdout's
    buffer until run_cli's own flush: a BrokenPipeError there is stdout's by where it came from, poll or none."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone
    monkeypatch.delattr("select.poll", raising=False)
    pipe = open(write_end, "w", buffering=1 << 16)  # noqa: SIM115  (closed below)
    monkeypatch.setattr(sys, "stdout", pipe)

    def main(argv):
        print("the settings")  # (buffered: a pipe's stdout is not line-buffered)
        return 0

    try:
        assert run_cli(main, []) == 141
    finally:
        pipe.close()


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["--env", "CartPole-v1", "--gsde"], "actions; drop --gsde"),
        (["--env", "CartPole-v1", "--stop-when-solved", "--env-kwargs", "max_episode_steps=0"], "rejects --env-kwargs"),
        (["--env", "Pendulum-v1", "--env-kwargs", "g=abc", "--workers", "1"], "fails its first step with --env-kwargs"),
    ],
)
def test_show_config_of_a_new_run_gives_the_error_the_run_would(argv, expected, capsys):
    """Found by probing: --show-config printed (exit 0) the settings of runs that the same command without it refused
    (--gsde on a Discrete env, ...): it resolved the settings but skipped the checks that make the env."""
    assert run_cli(main, [*argv, "--show-config"], prog="a3c.train") == 2
    captured = capsys.readouterr()
    assert expected in captured.err and captured.out == ""


@pytest.mark.parametrize("workers", ["auto", "1"])
def test_env_kwargs_that_fail_at_the_first_step_are_one_line_naming_them(workers, tmp_path):
    """Found by probing: Pendulum-v1 with --env-kwargs g=abc is made, then fails at its first step (a TypeError in
    the physics), which --workers auto's timing of the env met first: a traceback. With a fixed --workers the
    workers met it, and the run went through its restarts to exit 1 with the env's traceback."""
    cmd = [sys.executable, "-m", "a3c.train", "--env", "Pendulum-v1", "--env-kwargs", "g=abc", "--workers", workers]
    done = subprocess.run([*cmd, "--run-dir", str(tmp_path / "run")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    line = done.stderr.strip().splitlines()[-1]
    assert "env 'Pendulum-v1' fails its first step with --env-kwargs g='abc' (TypeError" in line, done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "run").exists()


@pytest.mark.parametrize("native", [True, False])
def test_a_presets_bf16_on_a_vector_env_is_refused_whatever_the_cpu(native, monkeypatch, capsys):
    """Noted in an earlier review: --preset atari on CartPole-v1 was refused on a CPU with bfloat16 instructions (its
    --bf16 is for the CNN torso) and ran on one without (the preset's --bf16 dropped for the CPU, the rest of the
    image preset kept): one command, two outcomes by machine. Refused on both, with the same fix."""
    monkeypatch.setattr(cpu, "native_bf16", lambda: native)
    argv = ["--env", "CartPole-v1", "--preset", "atari", "--workers", "1", "--show-config"]
    assert run_cli(main, argv, prog="a3c.train") == 2
    err = capsys.readouterr().err
    assert "--bf16 is for image observations" in err and "the preset atari sets --bf16; give --no-bf16" in err, err
