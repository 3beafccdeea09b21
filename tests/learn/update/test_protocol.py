"""a3c.learn.update.protocol: the rollout buffers as a path reads them (tensors and numpy views of one memory), and a
path covering a model exactly when both its parts do, with the reason of the part that does not."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch

from a3c.learn.distributions import Categorical
from a3c.learn.model import build_model
from a3c.learn.objectives.a3c import A3C
from a3c.learn.update.closed_form import ClosedFormLoss
from a3c.learn.update.kernel import KERNEL_ENV, KernelLoss
from a3c.learn.update.mlp import MlpByHand
from a3c.learn.update.protocol import Rollout, UpdatePath
from a3c.spec.config import Config
from a3c.spec.environment import EnvSpec


def test_the_rollout_s_arrays_are_views_of_its_tensors():
    rollout = Rollout.allocate(5, 3, (4, 4), np.uint8, Categorical(2))
    assert rollout.obs.shape == (6, 3, 4, 4) and rollout.obs.dtype == torch.uint8
    assert rollout.final_obs.shape == (5, 3, 4, 4) and rollout.actions.dtype == torch.int64
    assert (rollout.steps, rollout.envs) == (5, 3) and not rollout.any_truncated()
    rollout.truncated_np[2, 1] = 1.0
    rollout.obs_np[5, 0] = 7
    assert rollout.any_truncated() and rollout.truncated[2, 1] == 1.0 and int(rollout.obs[5, 0, 3, 3]) == 7


def model_of(action_space, **settings):
    config = Config(**settings)
    obs = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    return (config, *build_model(EnvSpec("T-v0", obs, action_space, None, None), config))


def test_a_path_covers_a_model_where_both_its_parts_do(monkeypatch):
    monkeypatch.delenv(KERNEL_ENV, raising=False)
    path = UpdatePath("mlp+kernel", MlpByHand, KernelLoss, A3C)
    closed = UpdatePath("mlp+closed-form", MlpByHand, ClosedFormLoss, A3C)
    discrete = model_of(gym.spaces.Discrete(3))
    box = model_of(gym.spaces.Box(-1.0, 1.0, (2,), np.float32))
    lstm = model_of(gym.spaces.Discrete(3), lstm=4)
    assert closed.supports(*discrete) is None and closed.supports(*box) is None
    assert "DiagGaussian" in path.supports(*box)  # the loss gradient's reason
    assert closed.supports(*lstm) == "an LSTM core (--lstm)"  # the network pass's reason
    config, model, dist = discrete
    assert "float64" in path.supports(config, model.double(), dist)
