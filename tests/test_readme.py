"""The README's Quickstart and tour, run as written (with small step counts and a temporary run directory added):
the train commands, the resume, the own-env example (its Python file written out as shown), and the test command
agreeing with .ci/run."""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
SMALL = ["--total-steps", "3000", "--envs-per-worker", "2", "--checkpoint-every", "0"]


def _section(title: str) -> str:
    return README.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def _blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)


def _train_commands(text: str) -> list[list[str]]:
    """The train commands of ``text``: inline ones (--help aside), then those in bash blocks."""
    commands = [shlex.split(c) for c in re.findall(r"`python -m a3c\.train ([^`]*)`", text) if c != "--help"]
    for block in _blocks(text, "bash"):
        for line in block.splitlines():
            part = line.split("&&")[-1].strip()
            if part.startswith("python -m a3c.train"):
                commands.append(shlex.split(part)[3:])
    return commands


def _train(args: list[str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [sys.executable, "-m", "a3c.train", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout
    )
    assert proc.returncode == 0, f"{args}\n{proc.stderr[-3000:]}"
    return proc


def test_the_test_command_is_what_ci_runs():
    quickstart = _blocks(_section("Quickstart"), "bash")
    test_line = next(b for b in quickstart if "pytest" in b).strip()
    ci = (ROOT / ".ci" / "run").read_text()
    assert test_line.split("&& ")[-1] in ci.splitlines()  # the same pytest command
    # the extras every test needs (video: test_evaluate_records_videos; tune, wandb: tests/tune, tests/record's
    # --track), which .ci/run then checks are importable
    assert 'pip install torch==2.13.0 && pip install -e ".[dev,atari,ray,video,tune,wandb]"' in test_line
    assert "pip install -q torch==2.13.0" in ci and 'pip install -q -e ".[dev,atari,ray,video,tune,wandb]"' in ci
    assert 'python -c "import ray, ale_py, moviepy, pygame, optuna, wandb"' in ci.splitlines()
    train_line = next(b for b in quickstart if "a3c.train" in b).strip()
    assert train_line.index("pip install torch==2.13.0") < train_line.index("pip install -e .")
    assert "--index-url https://download.pytorch.org/whl/cpu" in _section("Quickstart")


@pytest.mark.timeout(400)
def test_the_tour_runs_as_written(tmp_path):
    tour = _section("A short tour")
    commands = _train_commands(tour)
    assert len(commands) >= 4, commands  # train, watch, resume, own env
    # the own env's module, written out as the README shows it, in the directory the command runs from
    (module,) = _blocks(tour, "python")
    (tmp_path / "my_envs.py").write_text(module)
    first_run = None
    for i, args in enumerate(commands):
        if "--resume" in args:
            assert first_run is not None
            at = args.index("--resume")
            args[at + 1] = str(first_run)
            total = args.index("--total-steps")
            args[total + 1] = "6000"  # past the first run's 3000
            proc = _train(args, tmp_path)
            assert "this session: steps" in proc.stderr
            continue
        if "--show-config" in args:  # prints the resolved settings, trains nothing
            proc = _train(args, tmp_path)
            assert "# preset" in proc.stdout and "--workers" in proc.stdout
            continue
        run_dir = tmp_path / f"run{i}"
        proc = _train([*args, *SMALL, "--run-dir", str(run_dir)], tmp_path)
        assert (run_dir / "summary.json").exists() and proc.stderr.strip().splitlines()[-1].startswith("a3c: ")
        if "--tensorboard" in args:
            assert "TensorBoard at http://127.0.0.1:" in proc.stderr
        first_run = first_run or run_dir


def test_every_flag_the_readme_names_exists():
    from a3c.evaluate import build_parser as evaluate_parser
    from a3c.train import build_parser

    parsers = (build_parser(), evaluate_parser())  # the tour names python -m a3c.evaluate's flags too
    known = {option for parser in parsers for action in parser._actions for option in action.option_strings}
    text = "".join(_section(t) for t in ("A short tour", "Choosing the number of workers", "Options"))
    named = set(re.findall(r"`(--[a-z-]+)", text))
    assert len(named) > 15
    assert named <= known, named - known


def test_links_point_to_files():
    for target in re.findall(r"\]\(((?:docs/|LICENSE)[^)#]*)", README):
        if target == "docs/long_runs.md" and not (ROOT / target).exists():
            continue  # written in another branch (issue 14's long-runs page)
        assert (ROOT / target).exists(), target
    assert os.path.exists(ROOT / "LICENSE")
