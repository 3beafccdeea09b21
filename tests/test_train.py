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
    assert "(default: forkserver on Linux, spawn elsewhere)" in flat


def test_run_directories_are_called_run_dir():
    usage = " ".join(build_parser().format_usage().split())
    assert "[--resume RUN_DIR]" in usage and "[--run-dir RUN_DIR]" in usage and "RESUME" not in usage


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


@pytest.mark.timeout(60)
def test_the_real_help_exits_0():
    proc = subprocess.run([sys.executable, "-m", "a3c.train", "--help"], capture_output=True, text=True, timeout=50)
    assert proc.returncode == 0 and "examples:" in proc.stdout and proc.stderr == ""
