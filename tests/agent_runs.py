"""Agents for the tests of a3c.record.agent and a3c.record.policy_export: a run directory holding an untrained model
(``untrained_run``), or a short serial training run (``trained``); and observations to compare them on, the same on
every run (``sampled``)."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import torch

import a3c
from a3c.learn.model import build_model, flatten_parameters
from a3c.record.checkpoint import save_checkpoint
from a3c.spec.config import Config
from a3c.spec.environment import describe_env


def untrained_run(run_dir, config: Config, seed: int = 0, scale: float | None = None):
    """A run directory whose latest.pt holds a freshly built model (``scale``: every weight drawn ~ N(0, scale), a
    policy that reacts strongly to its inputs and state); returns the path."""
    spec = describe_env(config.env, config.env_kwargs)
    torch.manual_seed(seed)
    model, _ = build_model(spec, config)
    params, _ = flatten_parameters(model)
    if scale is not None:
        params.normal_(0.0, scale)
    (run_dir / "checkpoints").mkdir(parents=True, exist_ok=True)
    (run_dir / "config.json").write_text(json.dumps(config.to_dict()))
    payload = {"model": params.clone(), "config": config.to_dict(), "spaces": spec.describe(), "global_step": 1}
    save_checkpoint(run_dir / "checkpoints" / "latest.pt", {**payload, "env_spec": spec.to_data()})
    return run_dir


def trained(tmp_path_factory, name: str, **settings) -> a3c.Agent:
    """A short serial run (a few thousand steps) of a3c.train; its run directory is the agent's path's."""
    run_dir = tmp_path_factory.mktemp(name) / "run"
    settings = {"workers": 1, "envs_per_worker": 4, "checkpoint_every": 0, "eval_every": 0, **settings}
    return a3c.train(backend="serial", run_dir=str(run_dir), **settings).agent


def sampled(space: gym.Space, count: int) -> np.ndarray:
    """``count`` observations drawn from ``space``, stacked: the same ones on every run (its sampler seeded with 0), so
    that a test that compares two paths on them is not a draw."""
    space.seed(0)
    return np.stack([space.sample() for _ in range(count)])
