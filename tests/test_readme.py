"""The README's commands, run as written (with small step counts and a temporary run directory added): the
Quickstart's and the tour's train commands, the resume, the own-env example (its Python file written out as shown),
the evaluate commands of "Use a trained agent" (its Python example: tests/test_api.py), and the test command agreeing
with .ci/run. Also: the README fits on a page, the flags and extras it and the docs it moved to name exist, its
links and theirs point to files, and no doc is named after an issue."""

import ast
import importlib.util
import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

from procs import Run, wait_for

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
# the docs that hold what the README used to (flags named there must exist too)
MOVED_DOCS = (
    "get-started.md",
    "guides/train-and-watch.md",
    "guides/own-env.md",
    "guides/trained-agent.md",
    "guides/spaces.md",
    "guides/workers.md",
    "reference/run-directory.md",
    "guides/stop-and-resume.md",
    "guides/seeds.md",
    "guides/slow-data.md",
    "guides/ray.md",
)
SMALL = ["--total-steps", "3000", "--envs-per-worker", "2", "--checkpoint-every", "0"]


def _section(title: str) -> str:
    return README.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def _blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)


def _fenced(text: str) -> list[tuple[str, str]]:
    """The fenced blocks of ``text`` as (language, body), fences paired in order."""
    blocks, lang, body = [], None, []
    for line in text.splitlines():
        if line.startswith("```"):
            if lang is None:
                lang, body = line[3:].strip(), []
            else:
                blocks.append((lang, "\n".join(body)))
                lang = None
        elif lang is not None:
            body.append(line)
    return blocks


def _train_commands(text: str) -> list[list[str]]:
    """The train commands of ``text``: inline ones (--help aside), then those in bash blocks."""
    commands = [shlex.split(c) for c in re.findall(r"`python -m a3c\.train ([^`]*)`", text) if c != "--help"]
    for block in _blocks(text, "bash"):
        for line in block.splitlines():
            part = line.split("&&")[-1].strip()
            if part.startswith("python -m a3c.train"):
                commands.append(shlex.split(part)[3:])
    return commands


def _train(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "a3c.train", *args], cwd=cwd, capture_output=True, text=True)
    assert proc.returncode == 0, f"{args}\n{proc.stderr[-3000:]}"
    return proc


def _train_until_tensorboard_is_announced(args: list[str], run_dir: Path, cwd: Path) -> str:
    """A --tensorboard command trained until it says where its server listens, then ended by Ctrl-C; its output.
    TensorBoard starts beside the run and says so once it listens: SMALL's budget could end the run first (the server
    stopped before that line) where the server's imports crawl on a busy machine."""
    unbounded = [*args, "--total-steps", "100000000", "--envs-per-worker", "2", "--checkpoint-every", "0"]
    run = Run([sys.executable, "-m", "a3c.train", *unbounded, "--run-dir", str(run_dir)], cwd / "tb.log", cwd=cwd)
    try:
        assert wait_for(lambda: "TensorBoard at http://127.0.0.1:" in run.output(), timeout=120), run.output()
        run.proc.send_signal(signal.SIGINT)  # (to the main process alone: the run stops its server itself)
        assert run.wait(timeout=60) == 128 + signal.SIGINT, run.output()
    finally:
        run.cleanup()
    return run.output()


def _ci_lines() -> list[str]:
    """.ci/run's commands, comments dropped."""
    text = (ROOT / ".ci" / "run").read_text()
    return [line.split("  #")[0].strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]


def test_the_test_command_is_what_ci_runs():
    quickstart = _blocks(_section("Quickstart"), "bash")
    test_line = next(b for b in quickstart if "pytest" in b).strip()
    assert "(what `.ci/run` runs)" in _section("Quickstart")
    ci = _ci_lines()
    # what comes after the install is .ci/run's own checks, in its order: lint, the import layers, mypy, the tests
    checks = test_line.split('pip install -e ".[dev,atari,mujoco,ray,video,tune,wandb,onnx,bench]" && ')[1].split(
        " && "
    )
    assert checks == ["ruff check .", "lint-imports", "mypy", "python -m pytest -q -x tests"]
    assert [line for line in ci if line in checks] == checks
    # the extras every test needs (video: test_evaluate_records_videos; mujoco: tests/test_mujoco.py; tune, wandb:
    # tests/tune, tests/record's --track; onnx: tests/test_export.py; bench: SB3's evaluate_policy in
    # tests/record/test_agent_predict.py), which .ci/run then checks are importable
    assert (
        'pip install torch==2.13.0 && pip install -e ".[dev,atari,mujoco,ray,video,tune,wandb,onnx,bench]"' in test_line
    )
    extras = 'pip install -q -e ".[dev,atari,mujoco,ray,video,tune,wandb,onnx,bench]"'
    assert "pip install -q torch==2.13.0" in ci and extras in ci
    modules = "ray, ale_py, mujoco, moviepy, pygame, optuna, wandb, onnxruntime, onnxscript, stable_baselines3"
    assert f'python -c "import {modules}"' in ci
    train_line = next(b for b in quickstart if "a3c.train" in b).strip()
    assert train_line.index("pip install torch==2.13.0") < train_line.index("pip install -e .")
    assert "--index-url https://download.pytorch.org/whl/cpu" in _section("Quickstart")
    assert len(quickstart) == 3  # the two commands, and the CPU build's install line


def test_the_readme_fits_on_a_page_and_no_doc_is_named_after_an_issue():
    assert len(README.splitlines()) <= 250
    assert README.index("## Quickstart") < README.index("## A short tour") < README.index("## Use a trained agent")
    assert README.index("## Use a trained agent") < README.index("## How well it learns")
    assert README.count("\n| env ") == 1  # one results table
    named = [p.name for p in (ROOT / "docs").iterdir() if re.search(r"issue_?\d", p.name)]
    assert named == []


def test_every_extra_the_readme_names_exists_and_is_spelled_one_way():
    import tomllib

    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    texts = [README] + [(ROOT / "docs" / name).read_text() for name in MOVED_DOCS]
    named = {
        e
        for text in texts
        for group in re.findall(r'pip install -e "\.\[([a-z0-9,]+)\]"', text)
        for e in group.split(",")
    }
    assert {"box2d", "mujoco", "atari", "ray", "video", "dev"} <= named <= extras, named - extras
    for text in texts:  # the one spelling: from the clone, -e ".[extra]" (a3c is not on PyPI)
        assert "a3c[" not in text and "'.[" not in text


def test_the_tour_runs_as_written(tmp_path):
    tour = _section("A short tour")
    commands = _train_commands(_section("Quickstart")) + _train_commands(tour)
    assert len(commands) >= 5, commands  # the Quickstart's; the tour's train, watch, resume, own env
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
        if "--tensorboard" in args:
            err = _train_until_tensorboard_is_announced(args, run_dir, tmp_path)
        else:
            err = _train([*args, *SMALL, "--run-dir", str(run_dir)], tmp_path).stderr
        assert (run_dir / "summary.json").exists() and err.strip().splitlines()[-1].startswith("a3c: ")
        first_run = first_run or run_dir


def test_following_the_readme_draws_no_warning(tmp_path, monkeypatch):
    """The README's train commands and its Python example, resolved as written: none is shorter than its preset's
    budget (the short-run warning), so following the docs does not look like a mistake. (The tour's own env module
    is written out where the commands resolve: an env without a preset is made, to read its action space.)"""
    (module,) = _blocks(_section("A short tour"), "python")
    (tmp_path / "my_envs.py").write_text(module)
    monkeypatch.syspath_prepend(str(tmp_path))
    from a3c.api import api_settings
    from a3c.run.resolve import resolve_settings
    from a3c.spec.config_text import short_run_warning
    from a3c.train import parse_flags

    commands = [args for args in _train_commands(README) if "--resume" not in args]
    assert len(commands) >= 4, commands
    for args in commands:
        values, given, _ = parse_flags(args)
        settings = resolve_settings(values, given)
        assert short_run_warning(settings.config, settings.sources) is None, args
    calls = re.findall(r"a3c\.train\((.*?)\)\n", README)
    assert calls, "the README's Python example"
    for call in calls:
        call_node = ast.parse(f"f({call})").body[0].value  # type: ignore[attr-defined]
        kwargs = {kw.arg: ast.literal_eval(kw.value) for kw in call_node.keywords}
        settings = resolve_settings(*api_settings(**kwargs))
        assert short_run_warning(settings.config, settings.sources) is None, call


def test_the_evaluate_commands_run_as_written(tmp_path):
    """The bash block of "Use a trained agent": train, then python -m a3c.evaluate three ways; each evaluate prints
    one line on stdout, as the README says (and as its sample shows)."""
    section = _section("Use a trained agent")
    (block,) = _blocks(section, "bash")
    lines = [line.split("  #")[0].strip() for line in block.splitlines() if line.strip()]
    train, evaluations = shlex.split(lines[0]), [shlex.split(line) for line in lines[1:]]
    assert train[:3] == ["python", "-m", "a3c.train"] and len(evaluations) == 3
    _train([*train[3:], *SMALL, "--eval-every", "1500", "--eval-episodes", "2"], tmp_path)
    for args in evaluations:
        assert args[:3] == ["python", "-m", "a3c.evaluate"]
        if "--video" in args and importlib.util.find_spec("moviepy") is None:
            continue  # the video extra (.ci/run installs it)
        proc = subprocess.run([sys.executable, *args[1:]], cwd=tmp_path, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        (line,) = proc.stdout.strip().splitlines()
        assert re.fullmatch(
            r"runs/cartpole/checkpoints/(latest|best)\.pt \(step [\d,]+\): return [\d.]+ ± [\d.]+, .*", line
        )
        wrote = proc.stderr.strip().splitlines()[-2:]  # the result's JSON, then the run's model card
        assert wrote[0].startswith("a3c: wrote runs/cartpole/evaluate-"), proc.stderr
        assert wrote[1] == "a3c: wrote runs/cartpole/README.md (the model card, with this evaluation)", proc.stderr
    (sample,) = [body.splitlines() for lang, body in _fenced(section) if lang == ""]  # the sample output
    assert re.fullmatch(
        r"runs/cartpole/checkpoints/best\.pt \(step [\d,]+\): return .* episodes \(deterministic, seed 1\)", sample[0]
    )


def test_every_flag_the_readme_names_exists():
    from a3c.evaluate import build_parser as evaluate_parser
    from a3c.train import build_parser

    parsers = (build_parser(), evaluate_parser())  # the README names python -m a3c.evaluate's flags too
    known = {option for parser in parsers for action in parser._actions for option in action.option_strings}
    known |= {"--out", "--window"}  # python -m a3c.plot's (docs/reference/run-directory.md)
    texts = [README] + [(ROOT / "docs" / name).read_text() for name in MOVED_DOCS]
    # (the benchmark scripts' own flags aside: python -m scripts.NAME commands, and docs' python scripts/NAME.py)
    text = re.sub(r"`python\s+(-m\s+)?scripts[./][^`]*`", "", "".join(texts))
    named = set(re.findall(r"`(--[a-z][a-z0-9-]*)", text))
    assert len(named) > 40
    assert named <= known, named - known


def test_links_point_to_files():
    for target in re.findall(r"\]\(((?:docs/|LICENSE)[^)#]*)", README):
        assert (ROOT / target).exists(), target
    for doc in (ROOT / "docs").rglob("*.md"):  # the docs' relative links too
        for target in re.findall(r"\]\((?![a-z]+:)([^)#]+)", doc.read_text()):
            assert (doc.parent / target).exists(), f"{doc.relative_to(ROOT)}: {target}"
    assert os.path.exists(ROOT / "LICENSE")
