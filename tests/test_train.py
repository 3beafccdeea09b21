"""`python -m a3c.train --help`: every flag with one default shown (never two), RUN_DIR where a run directory is
meant, examples at the end."""

import re
import subprocess
import sys

import pytest

from a3c.train import build_parser


@pytest.fixture(autouse=True)
def _wide_terminal(monkeypatch):
    monkeypatch.setenv("COLUMNS", "300")  # no wrapped help lines (argparse breaks at hyphens too)


def _help() -> str:
    return build_parser().format_help()


def test_no_flag_shows_its_default_twice():
    # one entry per option: from its flag at the start of a line to the next option
    entries = re.split(r"\n  (?=-)", _help().split("examples:")[0])
    doubled = [e.split()[0] for e in entries if e.count("(default") > 1]
    assert doubled == []
    flat = " ".join(_help().split())
    assert "(default: None)" not in flat and "(default: False)" not in flat and "(default: [])" not in flat
    assert "--run-dir RUN_DIR run directory (default: runs/<env>__<exp-name>__<seed>__<unix-time>)" in flat
    assert "(default: forkserver on Linux, spawn elsewhere; none under --backend serial)" in flat


def test_run_directories_are_called_run_dir():
    usage = " ".join(build_parser().format_usage().split())
    assert "[--resume RUN_DIR]" in usage and "RESUME" not in _help()
    assert "--run-dir RUN_DIR " in _help() and "--resume RUN_DIR " in _help()


def _groups(text: str) -> dict[str, list[str]]:
    """--help's groups: {title: the flags listed under it}, in order."""
    groups: dict[str, list[str]] = {}
    title = None
    for line in text.split("examples:")[0].splitlines():
        if line and not line.startswith(" ") and line.endswith(":") and not line.startswith("usage"):
            title = line[:-1]
            groups[title] = []
        elif title is not None and line.startswith("  -"):
            groups[title].append(line.split()[0].rstrip(","))
    return groups


def test_help_lists_the_flags_in_groups():
    """Issue 27: --help was 196 lines in one group, the Ray flags in the middle."""
    groups = _groups(_help())
    assert list(groups) == [
        "options",
        "run",
        "env",
        "algorithm",
        "model",
        "evaluation",
        "logging and checkpoints",
        "faults",
        "backend and Ray",
    ]
    assert groups["options"] == ["-h"]
    assert {"--env", "--env-kwargs", "--envs-per-worker", "--normalize-obs"} <= set(groups["env"])
    assert {"--total-steps", "--seed", "--resume", "--run-dir", "--preset", "--show-config"} <= set(groups["run"])
    assert {"--lr", "--gamma", "--n-steps", "--optimizer"} <= set(groups["algorithm"])
    assert {"--hidden-sizes", "--lstm"} <= set(groups["model"])
    assert {"--eval-every", "--eval-episodes", "--eval-stochastic"} == set(groups["evaluation"])
    assert {"--tensorboard", "--checkpoint-every"} <= set(groups["logging and checkpoints"])
    assert {"--max-restarts", "--worker-timeout", "--max-skipped-in-row"} == set(groups["faults"])
    ray = {"--backend", "--start-method", "--ray-address", "--ray-node-ip", "--push-every"}
    assert ray <= set(groups["backend and Ray"])
    assert all(f.startswith("--ray") is False for g, fs in groups.items() if g != "backend and Ray" for f in fs)
    listed = [f for fs in groups.values() for f in fs]
    options = {a.option_strings[0] for a in build_parser()._actions}
    assert sorted(listed) == sorted(options)  # every flag once


def test_a_flag_without_a_group_is_still_listed(monkeypatch):
    """A Config field that names no group (or an unknown one) is shown under "other options", last: flags added
    without a group still reach --help."""
    import dataclasses

    import a3c.train
    from a3c.spec.config import Config, flag

    @dataclasses.dataclass
    class WithMore(Config):
        track: bool = flag(False, help="a flag that names no group")
        wandb_project: str = flag("a3c", group="no such group", help="one that names an unknown group")

    monkeypatch.setattr(a3c.train, "Config", WithMore)
    groups = _groups(build_parser().format_help())
    assert list(groups)[-1] == "other options" and groups["other options"] == ["--track", "--wandb-project"]


def test_workers_default_is_auto():
    flat = " ".join(_help().split())
    assert "--workers N|auto" in flat and "(default: auto)" in flat


def test_examples_close_the_help():
    text = _help()
    examples = text.split("examples:")[1]
    commands = [line.strip() for line in examples.splitlines() if line.strip().startswith("python -m a3c.train")]
    assert len(commands) >= 4
    assert any("--resume" in c for c in commands) and any(":" in c.split("--env ")[-1] for c in commands)
    parser = build_parser()
    for command in commands:  # every example parses (as flags; envs are checked later)
        parser.parse_args(command.split()[3:])


def test_the_real_help_exits_0():
    proc = subprocess.run([sys.executable, "-m", "a3c.train", "--help"], capture_output=True, text=True)
    assert proc.returncode == 0 and "examples:" in proc.stdout and proc.stderr == ""


def test_help_after_a_bare_env_kwargs_prints_the_help(capsys):
    """Found by review: a bare --env-kwargs was refused while argparse parsed, so a --help later on the line gave
    the refusal, not the help; the refusal comes after the parse now (tests/test_cli_errors.py holds it)."""
    from a3c.train import parse_flags

    with pytest.raises(SystemExit) as exited:
        parse_flags(["--env-kwargs", "--help"])
    assert exited.value.code == 0 and "--env-kwargs" in capsys.readouterr().out
