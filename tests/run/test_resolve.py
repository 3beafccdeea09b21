"""preflight: the input checks that run before torch is imported and before any process starts."""

import subprocess
import sys

import pytest

from a3c.run.resolve import preflight
from a3c.spec.config import Config
from a3c.spec.errors import UserError


def test_preflight_returns_the_env_spec():
    spec = preflight(Config(env="CartPole-v1"))
    assert (spec.obs_dim, spec.action_space.n, spec.reward_threshold) == (4, 2, 475.0)


def test_non_empty_run_dir_is_refused(tmp_path):
    (tmp_path / "something").write_text("x")
    with pytest.raises(UserError, match="is not empty"):
        preflight(Config(run_dir=str(tmp_path)))
    preflight(Config(run_dir=str(tmp_path / "new")))  # missing: fine
    with pytest.raises(UserError, match="not a directory"):
        preflight(Config(run_dir=str(tmp_path / "something")))


def test_preflight_needs_no_torch():
    code = (
        "import sys, a3c.run.resolve as p, a3c.spec.config as c; p.preflight(c.Config()); print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
