"""Config and CLI parsing: typed env kwargs, validation, one-line user errors."""

import subprocess
import sys

import pytest

from a3c.spec.config import Config, parse_env_kwargs
from a3c.spec.errors import UserError
from a3c.train import parse_config


def test_env_kwargs_are_typed():
    assert parse_env_kwargs(["a=1", "b=0.5", "c=true", "d=False", "e=text", "f=none"]) == {
        "a": 1,
        "b": 0.5,
        "c": True,
        "d": False,
        "e": "text",
        "f": None,
    }
    with pytest.raises(UserError, match="key=value"):
        parse_env_kwargs(["novalue"])


def test_flags_reach_the_config():
    cfg = parse_config(
        [
            "--env",
            "CartPole-v1",
            "--workers",
            "3",
            "--n-steps",
            "7",
            "--hidden-sizes",
            "32",
            "16",
            "--env-kwargs",
            "max_episode_steps=50",
            "--stop-when-solved",
            "--optimizer",
            "rmsprop",
        ]
    )
    assert (cfg.workers, cfg.n_steps, cfg.hidden_sizes, cfg.optimizer) == (3, 7, (32, 16), "rmsprop")
    assert cfg.env_kwargs == {"max_episode_steps": 50} and cfg.stop_when_solved


def test_env_kwargs_given_twice_are_both_taken():
    """Found by probing: --env-kwargs a=1 --env-kwargs b=2 kept b=2 alone, without a word (argparse's default for a
    list flag given twice); both sets count now, and a bare one is still reported."""
    cfg = parse_config(
        ["--env", "CartPole-v1", "--env-kwargs", "max_episode_steps=50", "--env-kwargs", "render_mode=x"]
    )
    assert cfg.env_kwargs == {"max_episode_steps": 50, "render_mode": "x"}
    with pytest.raises(UserError):
        parse_config(["--env", "CartPole-v1", "--env-kwargs"])
    with pytest.raises(UserError, match="--env-kwargs gives max_episode_steps twice"):
        parse_config(
            ["--env", "CartPole-v1", "--env-kwargs", "max_episode_steps=50", "--env-kwargs", "max_episode_steps=9"]
        )


def test_config_round_trips_through_a_dict():
    cfg = Config(workers=3, hidden_sizes=(5, 6), env_kwargs={"x": 1})
    assert Config.from_dict(cfg.to_dict()) == cfg


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["--workers", "0"], "--workers must be at least 1"),
        (["--lr", "0"], "--lr must be a positive number"),
        (["--gamma", "1.5"], "--gamma must be in (0, 1]"),
        (["--n-steps", "0"], "--n-steps must be at least 1"),
        (["--total-steps", "0"], "--total-steps must be at least 1"),
        (["--workers", "two"], "takes a number of workers or auto"),
        # (found by probing: an empty --run-dir, a variable that was not set, ran into runs/... unsaid)
        (["--run-dir", ""], "--run-dir is empty; give a directory"),
        (["--run-dir", "  "], "--run-dir is empty; give a directory"),
    ],
)
def test_bad_values_are_user_errors(argv, needle):
    with pytest.raises(UserError, match=None) as err:
        parse_config(argv)
    assert needle in str(err.value)


def test_cli_user_error_is_one_line_exit_2(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "a3c.train", "--gamma", "0", "--run-dir", str(tmp_path / "r")],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "--gamma must be in (0, 1]" in lines[0] and "Traceback" not in proc.stderr
    assert not (tmp_path / "r").exists()  # nothing started, nothing written


# -- issue 55: flags that belong to one objective, the targets, value clipping's help, clearing a number -------------
PPO_ONLY = [
    ("--n-epochs", "10"),
    ("--clip-range", "0.1"),
    ("--clip-range-vf", "0.2"),
    ("--minibatch-size", "16"),
    ("--max-policy-lag", "4"),
    ("--n-epochs", "4"),  # typed at its default: still PPO's flag, still refused under A3C
]


@pytest.mark.parametrize(("flag", "value"), PPO_ONLY)
def test_a_ppo_flag_under_a3c_is_refused(flag, value):
    """Before: ``--env CartPole-v1 --n-epochs 10 --clip-range 0.1 --minibatch-size 16`` trained A3C and ignored all
    three."""
    with pytest.raises(UserError) as err:
        parse_config(["--env", "CartPole-v1", flag, value])
    assert f"{flag} {value} is for --algo ppo" in str(err.value) and "add --algo ppo" in str(err.value)
    assert parse_config(["--env", "CartPole-v1", "--algo", "ppo", flag, value]).algo == "ppo"


def test_a_ppo_flag_under_a3c_is_one_line_exit_2(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "a3c.train", "--env", "CartPole-v1", "--n-epochs", "10", "--total-steps", "500"]
        + ["--workers", "1", "--run-dir", str(tmp_path / "run")],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "--n-epochs 10 is for --algo ppo" in proc.stderr


def test_targets_and_the_vtrace_clips_are_flags_of_both_objectives():
    config = parse_config(["--targets", "vtrace", "--vtrace-rho-bar", "2", "--vtrace-c-bar", "0.5"])
    assert (config.targets, config.vtrace_rho_bar, config.vtrace_c_bar) == ("vtrace", 2.0, 0.5)
    assert parse_config(["--algo", "ppo", "--targets", "vtrace"]).targets == "vtrace"
    assert (Config().targets, Config().vtrace_rho_bar, Config().vtrace_c_bar) == ("gae", 1.0, 1.0)
    for argv, needle in [
        (["--targets", "vtrace", "--vtrace-rho-bar", "0"], "--vtrace-rho-bar must be a positive number"),
        (["--targets", "vtrace", "--vtrace-c-bar", "-1"], "--vtrace-c-bar must be a positive number"),
        (["--targets", "vtrace", "--vtrace-c-bar", "nan"], "--vtrace-c-bar must be a positive number"),
        (["--vtrace-rho-bar", "2"], "--vtrace-rho-bar 2.0 is for --targets vtrace"),
        (["--targets", "td"], "invalid choice: 'td'"),
    ]:
        with pytest.raises(UserError) as err:
            parse_config(argv)
        assert needle in str(err.value)


def test_the_optimizer_eps_is_a_flag():
    assert Config().optimizer_eps is None  # the optimizer's own (Adam 1e-8, RMSprop 1e-5)
    assert parse_config(["--optimizer-eps", "1e-5"]).optimizer_eps == 1e-5
    with pytest.raises(UserError, match="--optimizer-eps must be a positive number"):
        parse_config(["--optimizer-eps", "0"])


def test_the_help_of_value_clipping_says_what_the_loss_does():
    """a3c takes the larger of the clipped and unclipped value errors (CleanRL's); SB3's clip_range_vf uses the
    clipped prediction alone, which the help used to name."""
    from a3c.train import build_parser

    help_text = next(a.help for a in build_parser()._actions if "--clip-range-vf" in a.option_strings)
    assert "larger of" in help_text and "as SB3's clip_range_vf" not in help_text


@pytest.mark.parametrize(
    ("flag", "value", "field"),
    [
        ("--stop-at", "30", "stop_at"),
        ("--clip-range-vf", "0.2", "clip_range_vf"),
        ("--tensorboard", "0", "tensorboard"),
    ],
)
def test_an_optional_number_is_cleared_by_none_on_resume(tmp_path, flag, value, field):
    """Before: a run started with --stop-at 30 kept it on every resume (--stop-at none: "invalid float value")."""
    from procs import train_cmd

    from a3c.train import parse_cli

    run = tmp_path / "run"
    algo = ["--algo", "ppo", "--n-steps", "32", "--minibatch-size", "32"] if field == "clip_range_vf" else []
    cmd = train_cmd(run, "--env", "CartPole-v1", "--total-steps", "300", "--workers", "1", *algo, flag, value)
    if field == "tensorboard":  # not served: the flag is only recorded (the run would start a server)
        cmd = train_cmd(run, "--env", "CartPole-v1", "--total-steps", "300", "--workers", "1")
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    if field == "tensorboard":
        _set_saved(run, field, 6006)
    config, sources, _ = parse_cli(["--resume", str(run), "--total-steps", "600"])
    assert getattr(config, field) is not None
    config, sources, _ = parse_cli(["--resume", str(run), "--total-steps", "600", flag, "none"])
    assert getattr(config, field) is None and sources[field] == "flag"


def _set_saved(run, field, value):
    import torch

    path = run / "checkpoints" / "latest.pt"
    ckpt = torch.load(path, weights_only=True)
    ckpt["config"] = {**ckpt["config"], field: value}
    torch.save(ckpt, path)


def test_the_optimizer_eps_reaches_the_shared_optimizer():
    from a3c.run.backends.shared_memory import create_shared_run
    from a3c.spec.environment import describe_env

    spec = describe_env("CartPole-v1")
    for eps, expected in ((1e-5, 1e-5), (None, 1e-8)):  # (None: Adam's own)
        run, _, _ = create_shared_run(spec, Config(workers=1, optimizer_eps=eps))
        assert run.optimizer.eps == expected
    run, _, _ = create_shared_run(spec, Config(workers=1, optimizer="rmsprop", optimizer_eps=1e-3))
    assert run.optimizer.eps == 1e-3


def test_the_optional_settings_a_resumed_run_inherits_take_none():
    """Every ``X | None`` flag a resumed run inherits from its checkpoint can be unset by a flag: numbers, and the Ray
    and W&B names (run directories and --preset keep their own meaning of a value)."""
    config = parse_config(["--backend", "ray", "--ray-address", "none", "--track", "--wandb-entity", "NONE"])
    assert config.ray_address is None and config.wandb_entity is None
    for flag in ("--stop-at", "--clip-range-vf", "--optimizer-eps", "--tensorboard", "--wandb-group"):
        assert getattr(parse_config(["--algo", "ppo", "--track", flag, "none"]), flag[2:].replace("-", "_")) is None
