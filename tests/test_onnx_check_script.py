"""scripts/onnx_check.py: export saves observations with the agent's actions beside the ONNX file and says how many
each file reproduces; compare runs the file on them importing neither torch nor a3c, and fails on a wrong action."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from agent_runs import untrained_run

from a3c.spec.config import Config
from scripts import onnx_check

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "onnx_check.py"


def test_export_then_compare_without_torch_or_a3c(tmp_path, capsys):
    pytest.importorskip("onnxruntime", reason="ONNX needs the [onnx] extra (.ci/run installs it)")
    run = untrained_run(tmp_path / "cartpole", Config(env="CartPole-v1"), scale=0.5)
    out = tmp_path / "check"
    assert onnx_check.main(["export", str(run), "--out", str(out), "--observations", "200"]) == 0
    printed = capsys.readouterr().out
    assert "cartpole                 onnx           200 of 200 actions as Agent.act's" in printed
    assert "cartpole                 torchscript    200 of 200 actions" in printed
    saved = np.load(out / "cartpole.npz")
    assert saved["obs"].shape == (200, 4) and saved["actions"].shape == (200,)

    # compare in a process where an import of torch or a3c fails, the script's folder first on sys.path as when it
    # runs as a file
    code = "import runpy, sys; sys.modules['torch'] = sys.modules['a3c'] = None; sys.argv = sys.argv[1:]; "
    code += "sys.path.insert(0, str(__import__('pathlib').Path(sys.argv[0]).parent)); "
    code += "runpy.run_path(sys.argv[0], run_name='__main__')"
    done = subprocess.run(
        [sys.executable, "-c", code, str(SCRIPT), "compare", str(out)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "200 of 200 actions as Agent.act's" in done.stdout and "torch and a3c imported: neither" in done.stdout
    assert json.loads((out / "compare.json").read_text())["rows"][0]["same"] == 200

    np.savez(out / "cartpole.npz", obs=saved["obs"], actions=1 - saved["actions"])  # every action the other one
    assert onnx_check.main(["compare", str(out)]) == 1
    assert "0 of 200 actions" in capsys.readouterr().out


def test_a_recurrent_policy_is_refused_in_one_line(tmp_path, capsys):
    """Found by a probing review: an --lstm run went through export to onnxruntime's traceback (its 'state' input
    missing): the check feeds observations as one batch, which is not a recurrent policy's episodes."""
    run = untrained_run(tmp_path / "memory", Config(env="envs/Memory-v0", lstm=8, hidden_sizes=(16,)))
    out = tmp_path / "check"
    assert onnx_check.main(["export", str(run), "--out", str(out), "--observations", "20"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("onnx_check: error: ") and "is a recurrent policy (--lstm)" in err
    assert not out.exists()


def test_a_bf16_policy_is_refused_in_one_line_by_a3c_export_s_rule(tmp_path, capsys):
    """A --bf16 run has no ONNX export (a3c.export's rule, record.policy_export.onnx_refusal): the check says so in
    one line before it plays anything or writes a file."""
    run = untrained_run(tmp_path / "catch", Config(env="envs/Catch-v0", bf16=True))
    out = tmp_path / "check"
    assert onnx_check.main(["export", str(run), "--out", str(out), "--observations", "20"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("onnx_check: error: ") and "a --bf16 agent computes its CNN" in err
    assert "leave it out" in err and not out.exists()
