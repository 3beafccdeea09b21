"""python -m a3c.export: a run directory's policy written where it says (by default beside the run's files), loadable
without a3c; what it cannot export, and bad input, one line on stderr and exit code 2."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch
from agent_runs import untrained_run

import a3c
from a3c.export import default_out, main
from a3c.spec.config import Config
from a3c.spec.errors import run_cli


def export_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "a3c.export", *map(str, args)], capture_output=True, text=True)


def test_a_run_directory_exports_beside_its_files_and_loads_without_a3c(tmp_path):
    run = untrained_run(tmp_path / "run", Config(env="CartPole-v1"), scale=0.5)
    done = export_cli(run, "--format", "torchscript")
    assert done.returncode == 0, done.stderr
    path = run / "policy-latest.torchscript.pt"
    assert done.stdout.strip() == str(path) and path.is_file()
    assert f"a3c: wrote the torchscript policy of {run / 'checkpoints' / 'latest.pt'} (step 1) to {path}" in done.stderr
    obs = np.random.default_rng(0).normal(size=(50, 4)).astype(np.float32)
    np.save(tmp_path / "obs.npy", obs)
    code = (
        "import sys; sys.modules['a3c'] = None\n"  # (an import of a3c fails)
        "import numpy as np, torch\n"
        f"module = torch.jit.load({str(path)!r})\n"
        f"print(' '.join(map(str, module(torch.from_numpy(np.load({str(tmp_path / 'obs.npy')!r})))[0].tolist())))\n"
    )
    loaded = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True)
    assert loaded.returncode == 0, loaded.stderr
    assert np.array_equal(np.array(loaded.stdout.split(), dtype=np.int64), a3c.load(run).act(obs))


def test_out_best_and_the_distribution_parameters(tmp_path, capsys):
    run = untrained_run(tmp_path / "run", Config(env="CartPole-v1"))
    (run / "checkpoints" / "latest.pt").rename(run / "checkpoints" / "best.pt")
    assert (
        main([str(run), "--format", "torchscript", "--best", "--with-dist-params", "--out", str(tmp_path / "x.pt")])
        == 0
    )
    assert capsys.readouterr().out.strip() == str(tmp_path / "x.pt")
    outputs = torch.jit.load(str(tmp_path / "x.pt"))(torch.zeros(3, 4))
    assert [tuple(o.shape) for o in outputs] == [(3,), (3, 2)]  # action, logits
    assert default_out(run / "checkpoints" / "best.pt", "onnx") == run / "policy-best.onnx"
    assert default_out(tmp_path / "elsewhere" / "step-5.pt", "torchscript") == tmp_path / "elsewhere" / (
        "policy-step-5.torchscript.pt"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["{run}"], "the following arguments are required: --format; see python -m a3c.export --help"),
        (["{run}", "--format", "tflite"], "argument --format: invalid choice: 'tflite'"),
        (["{tmp}/nothing", "--format", "onnx"], "no such run directory or checkpoint file"),
        (["{bf16}", "--format", "onnx"], "a --bf16 agent computes its CNN in bfloat16 under torch.autocast"),
        (["{run}", "--format", "torchscript", "--out", "{run}/config.json/x.pt"], "cannot write"),
        (["{run}", "--format", "torchscript", "--out", "/proc/x.pt"], "cannot write /proc/x.pt"),
        (["{run}", "--format", "torchscript", "--out", "{tmp}/p.onnx"], "give a file name ending in .pt"),
        (["{run}", "--format", "onnx", "--out", "{tmp}/p.pt"], "ends in .pt, the suffix of torchscript"),
    ],
    ids=["no-format", "bad-format", "no-run", "bf16-onnx", "unwritable", "unwritable-open", "onnx-name", "pt-name"],
)
def test_what_cannot_be_exported_is_one_line_and_exit_code_2(tmp_path, args, message, capsys):
    if "{bf16}" in args:
        pytest.importorskip("onnxscript", reason="ONNX needs the [onnx] extra (.ci/run installs it)")
    run = untrained_run(tmp_path / "run", Config(env="CartPole-v1"))
    bf16 = untrained_run(tmp_path / "bf16", Config(env="envs/Catch-v0", bf16=True))
    assert run_cli(main, [a.format(run=run, tmp=tmp_path, bf16=bf16) for a in args], prog="a3c.export") == 2
    err = capsys.readouterr().err
    assert err.startswith("a3c.export: error: ") and err.count("\n") == 1 and message in err, err
    assert not list(run.glob("policy-*")) and not list(bf16.glob("policy-*"))


def test_an_onnx_export_prints_its_one_line_and_no_log_of_torch_onnx(tmp_path):
    pytest.importorskip("onnxscript", reason="ONNX needs the [onnx] extra (.ci/run installs it)")
    run = untrained_run(tmp_path / "run", Config(env="CartPole-v1"))
    done = export_cli(run, "--format", "onnx")
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("\n") == 1 and "a3c: wrote the onnx policy" in done.stderr, done.stderr


def test_the_command_exits_2_with_one_line(tmp_path):
    done = export_cli(tmp_path / "nothing", "--format", "torchscript")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("a3c.export: error: ") and "no such run directory" in done.stderr


@pytest.mark.parametrize("latest", ["missing", "damaged"])
def test_the_default_file_is_named_after_the_checkpoint_exported(tmp_path, latest, capsys):
    """Found by probing: the checkpoint exported is a3c.load's (the newest intact one), but the default file was named
    from latest.pt alone: without latest.pt the export failed ("has no checkpoints/latest.pt") after loading a
    step-N.pt, and with a damaged latest.pt it wrote step-N.pt's policy as policy-latest.*."""
    run = untrained_run(tmp_path / "run", Config(env="CartPole-v1"))
    checkpoints = run / "checkpoints"
    (checkpoints / "latest.pt").rename(checkpoints / "step-1.pt")
    if latest == "damaged":
        (checkpoints / "latest.pt").write_bytes(b"not a checkpoint")
    assert main([str(run), "--format", "torchscript"]) == 0
    assert capsys.readouterr().out.strip() == str(run / "policy-step-1.torchscript.pt")
    assert [p.name for p in run.glob("policy-*")] == ["policy-step-1.torchscript.pt"]
