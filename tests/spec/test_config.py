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
