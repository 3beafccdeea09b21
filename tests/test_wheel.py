"""The release's contents: the wheel ``python -m build`` makes from the tracked files holds the package data
(a3c/spec/presets.toml, a3c/tune/space.toml), the envs package and, where a C compiler is found, the worker's update
kernel, and builds without it where none is (the kernel is optional: setup.py); the sdist holds what a build from it
needs. .ci/wheel_check then installs the wheel into a fresh venv and trains, shows a preset and evaluates with it
from outside the clone; these tests check what goes in, fast enough to run with the others."""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("build") is None, reason="needs the build package (the dev extra)"),
    pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="needs the git checkout"),
]


def _tracked_tree(dest: Path) -> Path:
    """A copy of the tracked files (what a fresh clone has): no build/ or egg-info of an editable install."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    for name in filter(None, files.split("\0")):
        if (ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)
    return dest


def _build(src: Path, out: Path, kind: str, env: dict[str, str] | None = None) -> Path:
    proc = subprocess.run(
        [sys.executable, "-m", "build", f"--{kind}", "--no-isolation", "--outdir", str(out), str(src)],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (built,) = out.glob("a3c-*.whl" if kind == "wheel" else "a3c-*.tar.gz")
    return built


def _kernel(names: list[str]) -> list[str]:
    return [n for n in names if n.startswith("a3c/learn/update/_update_kernel") and n.endswith((".so", ".pyd"))]


def test_the_wheel_holds_the_data_files_the_envs_and_the_kernel(tmp_path):
    src = _tracked_tree(tmp_path / "src")
    names = zipfile.ZipFile(_build(src, tmp_path / "dist", "wheel")).namelist()
    assert {"a3c/spec/presets.toml", "a3c/tune/space.toml", "a3c/__init__.py", "envs/__init__.py"} <= set(names)
    shipped_envs = {f"envs/{p.name}" for p in (ROOT / "envs").glob("*.py")}
    assert shipped_envs <= set(names)
    assert not any(n.startswith(("tests/", "scripts/", "docs/", "docsgen/")) for n in names)
    if shutil.which("cc") or shutil.which("gcc"):
        assert len(_kernel(names)) == 1, names


def test_without_a_compiler_the_wheel_builds_without_the_kernel_and_runs_the_numpy_update(tmp_path):
    src = _tracked_tree(tmp_path / "src")
    wheel = _build(src, tmp_path / "dist", "wheel", env={"CC": "false", "LDSHARED": "false"})
    names = zipfile.ZipFile(wheel).namelist()
    assert _kernel(names) == [] and "a3c/spec/presets.toml" in names
    # installed (its files only: this environment has torch and the rest), it trains with the numpy update and its
    # summary.json says so
    target, outside = tmp_path / "installed", tmp_path / "outside"
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)]
    subprocess.run(pip, check=True, capture_output=True)
    outside.mkdir()
    env = {**os.environ, "PYTHONPATH": str(target)}
    where = subprocess.run(
        [sys.executable, "-c", "import a3c, envs; print(a3c.__file__); print(envs.__file__)"],
        cwd=outside,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert all(Path(f).is_relative_to(target) for f in where), where
    train = [sys.executable, "-m", "a3c.train", "--env", "envs/SlowCartPole-v1", "--env-kwargs", "latency=0.0"]
    train += ["--workers", "2", "--total-steps", "2000", "--eval-every", "0", "--checkpoint-every", "0"]
    proc = subprocess.run([*train, "--run-dir", "run"], cwd=outside, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads((outside / "run" / "summary.json").read_text())
    assert summary["update_path"] == "mlp+closed-form"  # (the numpy closed form: no kernel in this wheel)


def test_the_sdist_holds_what_a_build_from_it_needs(tmp_path):
    src = _tracked_tree(tmp_path / "src")
    with tarfile.open(_build(src, tmp_path / "dist", "sdist")) as sdist:
        names = {n.split("/", 1)[1] for n in sdist.getnames() if "/" in n}
    needed = {"setup.py", "pyproject.toml", "README.md", "LICENSE", "a3c/learn/update/_update_kernel.c"}
    assert needed | {"a3c/spec/presets.toml", "a3c/tune/space.toml", "envs/__init__.py"} <= names
