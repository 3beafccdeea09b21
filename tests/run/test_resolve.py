"""The start-up's one resolve step (a3c.run.resolve): the input checks that run before torch is imported and before
any process starts, presets applied alike to the command line's flags and a3c.train's settings, a resume's
checkpoint read and checked once, and the Trainer taking the resolved run as it is."""

import dataclasses
import subprocess
import sys

import pytest

import a3c
from a3c.api import api_settings
from a3c.run import resolve
from a3c.run.resolve import ResolvedRun, preflight, resolve_run, resolve_settings
from a3c.spec.config import Config
from a3c.spec.errors import UserError
from a3c.train import main as train_main
from a3c.train import parse_cli


def test_preflight_returns_the_env_spec():
    spec = preflight(Config(env="CartPole-v1"))
    assert (spec.obs_dim, spec.action_space.n, spec.reward_threshold) == (4, 2, 475.0)


def test_a_setting_a_resumed_checkpoint_carries_is_not_refused_by_the_env_checks():
    """A run started before a setting was refused on its env (--log-std-init on Discrete actions, --hidden-sizes on
    images, once silently ignored) resumes: the checks refuse what is typed or a preset sets, and a checkpoint's
    value cannot be dropped (the run's model was built with it)."""
    from a3c.spec.preset_choice import CHECKPOINT, FLAG

    carried = Config(env="CartPole-v1", log_std_init=-1.0)
    preflight(carried, sources={"log_std_init": CHECKPOINT})
    with pytest.raises(UserError, match="--log-std-init is for continuous"):
        preflight(carried, sources={"log_std_init": FLAG})
    preflight(Config(env="envs/Catch-v0", hidden_sizes=(32,)), sources={"hidden_sizes": CHECKPOINT})


def test_non_empty_run_dir_is_refused(tmp_path):
    (tmp_path / "something").write_text("x")
    with pytest.raises(UserError, match="is not empty"):
        preflight(Config(run_dir=str(tmp_path)))
    preflight(Config(run_dir=str(tmp_path / "new")))  # missing: fine
    with pytest.raises(UserError, match="not a directory"):
        preflight(Config(run_dir=str(tmp_path / "something")))


def test_a_new_runs_settings_and_checks_need_no_torch():
    code = (
        "import sys\n"
        "from a3c.train import parse_flags\n"
        "from a3c.run.resolve import preflight, resolve_settings\n"
        "values, given, _ = parse_flags(['--env', 'Acrobot-v1', '--workers', '2'])\n"
        "preflight(resolve_settings(values, given).config)\n"
        "print('torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_a3c_train_applies_the_envs_preset_as_the_command_line_does():
    """a3c.train(env=...) trained without the env's preset while python -m a3c.train applied it (envs/Memory-v0:
    without its LSTM); both go through resolve_settings now, keyword settings and a Config's changed fields counting
    as flags given, preset="none" giving the plain defaults."""
    cli = parse_cli(["--env", "envs/Memory-v0"])[0]
    by_keyword = resolve_settings(*api_settings(env="envs/Memory-v0")).config
    by_config = resolve_settings(*api_settings(Config(env="envs/Memory-v0"))).config
    assert cli == by_keyword == by_config
    assert (cli.preset, cli.lstm, cli.hidden_sizes, cli.n_steps) == ("envs/Memory-v0", 64, (64,), 24)
    given = resolve_settings(*api_settings(Config(env="envs/Memory-v0", n_steps=7), lstm=16)).config
    assert (given.lstm, given.hidden_sizes, given.n_steps) == (16, (64,), 7)  # what is given beats the preset
    plain = resolve_settings(*api_settings(env="envs/Memory-v0", preset="none")).config
    assert (plain.preset, plain.lstm, plain.n_steps) == ("discrete", 0, Config().n_steps)  # A3C's plain defaults


def test_a3c_train_refuses_what_is_not_a_setting():
    with pytest.raises(UserError, match="unknown setting 'worker'; did you mean 'workers'"):
        api_settings(worker=2)
    with pytest.raises(UserError, match="'workers_auto' is not a setting"):
        api_settings(workers_auto={"workers": 3})
    with pytest.raises(UserError, match=r"lr must be a number \(got str 'fast'\)"):  # (was "bad setting: ...")
        api_settings(lr="fast")


def test_resolve_run_gives_the_trainer_everything_resolved():
    run = resolve_run(*api_settings(env="CartPole-v1", workers=2, start_method="spawn"))
    assert run.config.workers == 2 and run.config.lr_schedule == "linear"  # CartPole's preset
    assert (run.spec.obs_dim, run.resume, run.session) == (4, None, 0)
    assert run.sources["workers"] == "flag" and run.sources["lr_schedule"] == "preset"
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.session = 1  # type: ignore[misc]


def test_the_trainer_takes_a_resolved_run_only():
    from a3c.run.trainer import Trainer

    run = resolve_run(*api_settings(workers=1, start_method="spawn"))
    unresolved = ResolvedRun(dataclasses.replace(run.config, workers="auto"), run.spec, {}, None, 0)
    with pytest.raises(TypeError, match="resolve --workers auto first"):
        Trainer(unresolved)


def test_a_resume_reads_its_checkpoint_once_and_runs_the_checks_once(tmp_path, monkeypatch):
    """Before: --resume read checkpoints/latest.pt twice (the command line or a3c.train's make_config, then the
    Trainer, which also checked it); now the resolve step reads it, checks it and runs preflight once each, and the
    Trainer takes what it found."""
    small = dict(backend="serial", workers=1, envs_per_worker=2, eval_every=0, checkpoint_every_s=0)
    first = a3c.train(**small, total_steps=200, run_dir=str(tmp_path / "run"))
    import a3c.record.resume as resume_module

    loads, checks, compat = [], [], []
    monkeypatch.setattr(
        resume_module,
        "load_checkpoint",
        lambda path, real=resume_module.load_checkpoint: loads.append(path) or real(path),
    )
    monkeypatch.setattr(resolve, "preflight", lambda *a, real=resolve.preflight: checks.append(1) or real(*a))
    monkeypatch.setattr(
        resolve, "check_resume_fits", lambda *a, real=resolve.check_resume_fits: compat.append(1) or real(*a)
    )
    argv = ["--resume", str(first.run_dir), "--total-steps", "400"]
    assert train_main(argv) == 0
    assert [p.name for p in loads] == ["latest.pt"] and checks == [1] and compat == [1]
    resumed = a3c.load(first.run_dir)
    assert resumed.global_step >= 400


@pytest.mark.parametrize(
    ("main_name", "preloaded"),
    [
        ("a3c.train", ["a3c.train"]),  # python -m a3c.train: every child runs it again, as __mp_main__
        ("a3c.tune.__main__", []),  # a package's __main__ is not run again; importing it would run the command
        ("my_training_script", []),  # a user's module: the server does not run its top-level code
        (None, []),  # python -c, a REPL, a script run by path
    ],
)
def test_the_fork_server_preloads_a3cs_main_module_and_the_envs_module(monkeypatch, main_name, preloaded):
    main = type(sys)("__main__")
    main.__spec__ = None if main_name is None else type("Spec", (), {"name": main_name})()
    monkeypatch.setitem(sys.modules, "__main__", main)
    preflight(Config(env="CartPole-v1"))  # (the env is made, and so registered, before the server starts)
    assert resolve.preload_modules(Config(env="CartPole-v1")) == [
        "a3c.run.preload",
        "envs",
        *preloaded,
        "gymnasium.envs.classic_control.cartpole",
    ]


def test_only_envs_of_known_packages_are_preloaded(tmp_path, monkeypatch):
    """A user's env module is imported by each worker itself: its import may start a thread or open a connection,
    which a fork must not share."""
    (tmp_path / "my_envs_for_preload.py").write_text(
        "import gymnasium as gym\n"
        "gym.register('MyPreloadEnv-v0', entry_point='my_envs_for_preload:Env')\n"
        "class Env(gym.Env):\n"
        "    pass\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    __import__("my_envs_for_preload")
    assert resolve._env_module_to_preload("MyPreloadEnv-v0") == []
    assert resolve._env_module_to_preload("envs/Catch-v0") == ["envs.catch"]
    assert resolve._env_module_to_preload("NotRegistered-v0") == []


def test_a_ppo_run_resumed_under_a3c_leaves_ppos_settings_and_a_typed_ppo_flag_is_refused(tmp_path, capsys):
    """A resumed run inherits its checkpoint's settings: PPO's (from its plain defaults, away from the flags'
    defaults) go back to the defaults when it goes on under --algo a3c, unless given again, which is refused."""
    from procs import train_cmd

    run = tmp_path / "run"
    ppo = ["--algo", "ppo", "--n-steps", "64", "--total-steps", "300", "--workers", "1"]
    done = subprocess.run(train_cmd(run, "--env", "envs/Classify-v0", *ppo), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    config, _, _ = parse_cli(["--resume", str(run), "--total-steps", "600"])
    assert config.algo == "ppo" and config.clip_range_vf == 0.2 and config.minibatch_size == 128
    config, sources, _ = parse_cli(["--resume", str(run), "--total-steps", "600", "--algo", "a3c"])
    assert config.algo == "a3c" and (config.clip_range_vf, config.minibatch_size) == (None, Config().minibatch_size)
    assert config.lr == 2.5e-4 and sources["lr"] == "checkpoint"  # (the rest stays the checkpoint's)
    # said, and --show-config names the defaults' as the defaults' (was "checkpoint")
    assert sources["clip_range_vf"] == sources["minibatch_size"] == "default"
    assert "a3c: note: the run's --minibatch-size 128 and --clip-range-vf 0.2 count only with --algo ppo" in (
        capsys.readouterr().err
    )
    with pytest.raises(UserError, match="--n-epochs 4 is for --algo ppo"):
        parse_cli(["--resume", str(run), "--total-steps", "600", "--algo", "a3c", "--n-epochs", "4"])
