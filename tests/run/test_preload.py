"""a3c.run.preload: what the fork server imports before it forks the workers. It is on start-up's critical path, so
it holds only what a worker needs; these tests check that it holds everything a worker imports (each module left
out is imported again in every worker after the fork: 0.2 s of CPU each for 16 workers, before it was complete)
and that a worker's updates import nothing big (sympy, which torch.autograd.backward imports when it is handed
explicit gradient tensors)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

# Each model family the worker updates differently: the MLP by hand (a3c.learn.update.mlp) with a Linear head, the
# MLP by hand with the Gaussian head under autograd (and gSDE's), the shared torso, and autograd through the whole
# model (the LSTM core, the CNN torso, in float32 and bfloat16).
MODELS = {
    "mlp-categorical": dict(env="CartPole-v1"),
    "mlp-shared-torso": dict(env="CartPole-v1", shared_torso=True),
    "mlp-gaussian": dict(env="Pendulum-v1"),
    "mlp-gsde": dict(env="Pendulum-v1", gsde=True),
    "lstm": dict(env="CartPole-v1", lstm=16),
    "cnn": dict(env="envs/Catch-v0"),
    "cnn-bf16": dict(env="envs/Catch-v0", bf16=True),
}

# The main process: makes the env (its spec) and names the fork server's preload list.
MAIN = """
import base64, json, pickle
from a3c.run.resolve import preload_modules
from a3c.spec.config import Config
from a3c.spec.environment import describe_env
cfg = Config(**SETTINGS)
spec = describe_env(cfg.env, cfg.env_kwargs)
print(json.dumps({"preload": preload_modules(cfg), "spec": base64.b64encode(pickle.dumps(spec)).decode()}))
"""

# A worker, as the fork server's child: the preload list imported (with the main module of python -m a3c.train,
# which every child runs again), then the spec unpickled, its channel made and three iterations run.
CHILD = """
import base64, importlib, json, pickle, sys, time
given = json.loads(sys.stdin.read())
for module in [*given["preload"], "a3c.train"]:
    importlib.import_module(module)
preloaded = set(sys.modules)
spec = pickle.loads(base64.b64decode(given["spec"]))
from a3c.learn.model import build_model, flatten_parameters
from a3c.learn.optim import make_optimizer
from a3c.run.backends.shared_memory import SharedMemoryCoordinator, SharedRun
from a3c.run.board import EpisodeBoard
from a3c.run.worker import Worker
from a3c.spec.config import Config
from a3c.spec.seeding import WorkerSeeds

cfg = Config(workers=1, envs_per_worker=2, n_steps=5, total_steps=10**6, **SETTINGS)
params, _ = flatten_parameters(build_model(spec, cfg)[0], shared=True)
run = SharedRun(params, make_optimizer(cfg.optimizer, params, cfg.lr, slots=1), EpisodeBoard(1), cfg.total_steps)
coordinator = SharedMemoryCoordinator(run)
worker = Worker(0, coordinator.channel(0), cfg, spec, time.time(), WorkerSeeds(cfg.seed, 0, 0, 0))
for _ in range(3):
    worker.step()  # pull, roll out, update (backward, clip, the shared optimizer's step), publish
assert run.optimizer.step_count() == 3
print("sympy" in sys.modules)
print(sorted(set(sys.modules) - preloaded))
"""


def python(script: str, settings: dict, stdin: str = "") -> str:
    code = textwrap.dedent(script).replace("**SETTINGS", ", ".join(f"{k}={v!r}" for k, v in settings.items()))
    out = subprocess.run([sys.executable, "-c", code], input=stdin, capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_preload_holds_what_a_worker_imports_and_its_updates_import_no_sympy(name):
    """torch.autograd.backward(outputs, grad_tensors) imports torch.fx.experimental.symbolic_shapes (and sympy,
    mpmath: ~500 modules, 0.5 s, 40 MB); the worker's updates go through a3c.learn.update.protocol.backward_from, a
    scalar
    root, so no worker imports it and the fork server need not preload it."""
    given = python(MAIN, MODELS[name]).strip().splitlines()[-1]
    out = python(CHILD, MODELS[name], stdin=given)
    sympy_loaded, imported_after = out.strip().splitlines()[-2:]
    assert sympy_loaded == "False", f"{name}: a worker's update imported sympy"
    # nothing that making the worker's channel and the worker, and its updates, import is left out of the preload:
    # each such module would be imported (from source: the server runs with -B) in every worker, after the fork
    assert imported_after == "[]", f"{name}: imported after the preload: {imported_after}"


def test_a_run_from_the_command_line_prints_no_warning_from_its_children(tmp_path):
    """The fork server preloads the main module of ``python -m a3c.train``; every child then runs it again as
    __mp_main__, and runpy warned that it was imported already (once a run, from the first child) until
    a3c.run.preload filtered that warning: a user's terminal shows a3c's own lines only."""
    flags = "--env CartPole-v1 --workers 2 --total-steps 3000 --preset none --start-method forkserver".split()
    command = [sys.executable, "-m", "a3c.train", *flags, "--run-dir", str(tmp_path / "run")]
    proc = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Warning" not in proc.stderr, proc.stderr
    assert "reached --total-steps" in proc.stderr
