"""a3c.train and the package's Python API: from a script (under the __main__ guard, spawn), from a Jupyter notebook
(nbclient + ipykernel), bad settings as ValueError with the CLI's message, and the README's "Use a trained agent"
example, run."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import a3c
from a3c.api import api_settings
from a3c.run.resolve import resolve_settings
from a3c.spec.errors import run_cli
from a3c.train import main as train_main

ROOT = Path(__file__).resolve().parent.parent


def test_import_a3c_stays_light():
    """`import a3c` must not import torch: the command line checks its input before torch loads."""
    code = "import sys, a3c; assert 'torch' not in sys.modules; a3c.train; a3c.load; assert 'torch' in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize(
    "settings, argv",
    [
        ({"workers": 0}, ["--workers", "0"]),
        ({"gamma": 1.5}, ["--gamma", "1.5"]),
        ({"eval_every": -1}, ["--eval-every", "-1"]),
        ({"eval_episodes": -2}, ["--eval-episodes", "-2"]),
        ({"env": "CartPol-v1"}, ["--env", "CartPol-v1"]),
        ({"env": "CartPole-v1", "env_kwargs": {"nope": 1}}, ["--env", "CartPole-v1", "--env-kwargs", "nope=1"]),
    ],
)
def test_bad_settings_raise_value_error_with_the_cli_message(settings, argv, capsys):
    with pytest.raises(ValueError) as err:
        a3c.train(**settings)
    assert run_cli(train_main, argv, prog="a3c.train") == 2
    printed = capsys.readouterr().err.strip()
    assert printed == f"a3c.train: error: {' '.join(str(err.value).split())}"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"total_steps": "2000"}, "total_steps must be an integer (got str '2000')"),
        ({"total_steps": 2000.5}, "total_steps must be an integer (got float 2000.5)"),
        ({"gamma": "0.9"}, "gamma must be a number (got str '0.9')"),
        ({"workers": "2"}, "workers must be an integer or 'auto' (got str '2')"),
        ({"workers": True}, "workers must be an integer or 'auto' (got bool True)"),
        ({"hidden_sizes": 64}, "hidden_sizes must be a list of integers (got int 64)"),
        ({"env": None}, "env must be a string (got NoneType None)"),
        ({"env_kwargs": "x=1"}, "env_kwargs must be a dict with string keys (got str 'x=1')"),
        ({"stop_at": "high"}, "stop_at must be a number or None (got str 'high')"),
    ],
)
def test_a_setting_of_the_wrong_type_is_named_with_the_type_it_takes(settings, message):
    """Found by probing: a string where a number belongs failed in a comparison that named no setting ("'>=' not
    supported between 'str' and 'int'"), "2" workers said "--workers must be at least 1 (got 2)", True was a count."""
    with pytest.raises(ValueError) as err:
        a3c.train(**settings)
    assert str(err.value) == message


def test_a_positional_argument_that_is_no_config_and_the_values_a_caller_may_pass(tmp_path):
    with pytest.raises(ValueError, match=r"one positional argument is an a3c.Config \(got str 'CartPole-v1'\)"):
        a3c.train("CartPole-v1")
    np = pytest.importorskip("numpy")
    values, given = api_settings(
        env="CartPole-v1",
        lr=np.float32(1e-3),
        total_steps=np.int64(5000),
        seed=np.int64(3),
        workers=np.int64(2),
        hidden_sizes=[np.int64(32), 32],
        normalize_obs=np.bool_(True),
        run_dir=tmp_path / "r",
    )
    assert {"lr", "total_steps", "hidden_sizes", "run_dir", "workers", "seed"} <= given
    # numpy's scalars become Python's: a run's config.json is JSON (np.int64 failed there, after the run directory
    # was made), and the range checks print them as the flags would ("--workers must be at least 1 (got 2)" for 2)
    config = resolve_settings(values, given).config
    assert json.loads(json.dumps(config.to_dict()))["total_steps"] == 5000
    assert (config.workers, config.seed, config.hidden_sizes, config.run_dir) == (2, 3, (32, 32), str(tmp_path / "r"))
    assert type(config.lr) is float and config.normalize_obs is True
    # a Config built by hand with a pathlib.Path
    values, _ = api_settings(a3c.Config(env="CartPole-v1", run_dir=tmp_path / "r"))
    assert values["run_dir"] == str(tmp_path / "r")


def test_unknown_setting_and_existing_run_dir(tmp_path):
    with pytest.raises(ValueError, match="unknown setting 'worker'; did you mean 'workers'"):
        a3c.train(worker=2)
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "x").write_text("")
    with pytest.raises(ValueError, match="is not empty; choose a new directory"):
        a3c.train(a3c.Config(run_dir=str(tmp_path / "used")))


def test_train_an_lstm_under_workers_auto(tmp_path):
    """a3c.train with an LSTM and the default --workers auto (the measurement used to call the LSTM without a
    state); in this process (serial backend) to stay cheap."""
    result = a3c.train(
        env="envs/Memory-v0",
        lstm=16,
        hidden_sizes=[16],
        n_steps=24,
        envs_per_worker=2,
        total_steps=300,
        eval_every=0,
        backend="serial",
        run_dir=str(tmp_path / "run"),
    )
    assert result.summary["total_steps"] >= 300 and result.agent.config.lstm == 16
    assert json.loads((tmp_path / "run" / "config.json").read_text())["workers_auto"] is not None


SCRIPT = """
import json, sys
import a3c

if __name__ == "__main__":
    result = a3c.train(env="CartPole-v1", workers=2, envs_per_worker=2, total_steps=3000, run_dir=sys.argv[1],
                       checkpoint_every=0, start_method="spawn")
    action = result.agent.act([0.0, 0.0, 0.0, 0.0])
    print(json.dumps({"run_dir": str(result.run_dir), "steps": result.summary["total_steps"], "action": action}))
"""


def test_train_from_a_script_under_spawn(tmp_path):
    script = tmp_path / "train_me.py"
    script.write_text(SCRIPT)
    proc = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "run")], capture_output=True, text=True, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["run_dir"] == str(tmp_path / "run") and out["steps"] >= 3000 and out["action"] in (0, 1)


def test_train_from_a_notebook(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    cells = [
        "import a3c",
        f"result = a3c.train(env='CartPole-v1', workers=2, envs_per_worker=2, total_steps=3000, "
        f"run_dir={str(tmp_path / 'run')!r}, checkpoint_every=0)",
        "print('steps', result.summary['total_steps'], 'action', result.agent.act([0.0, 0.0, 0.0, 0.0]))",
        "try:\n    a3c.train(workers=0)\nexcept ValueError as err:\n    print('ValueError:', err)",
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nbclient.NotebookClient(
        nb, timeout=None, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    text = "".join(o.get("text", "") for o in nb.cells[2].outputs)
    steps, action = re.fullmatch(r"steps (\d+) action (\d+)\n", text).groups()
    assert int(steps) >= 3000 and int(action) in (0, 1)
    assert "".join(o.get("text", "") for o in nb.cells[3].outputs) == (
        "ValueError: --workers must be at least 1 (got 0), or auto\n"
    )
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["total_steps"] == int(steps)


def test_the_docs_example_runs(tmp_path):
    """The README's "Use a trained agent" example, run as written but with a budget a test can afford."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Use a trained agent") :]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    budget = "eval_every=50_000"  # (the preset's --total-steps)
    assert budget in code
    code = code.replace(budget, "total_steps=4000, eval_every=2000, envs_per_worker=2, eval_episodes=2")
    (tmp_path / "example.py").write_text(code)
    proc = subprocess.run([sys.executable, "example.py"], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert "best evaluation:" in lines[0] and re.fullmatch(r"return \d+; value of the start state -?[\d.]+", lines[1])
    assert len(list((tmp_path / "runs").glob("CartPole-v1__a3c__1__*/checkpoints/best.pt"))) == 1
