"""a3c.spec.environment: the env description as plain data (EnvSpec.to_data / from_data), which checkpoints store so
that a3c.load needs no env: a round trip through torch.save and torch.load(weights_only=True) for every kind of space an
EnvSpec holds, and malformed descriptions as one-line user errors."""

import io

import gymnasium as gym
import numpy as np
import pytest
import torch

from a3c.spec.environment import EnvSpec, describe_env
from a3c.spec.errors import UserError

SPACES = {
    "cartpole": (describe_env("CartPole-v1").observation_space, gym.spaces.Discrete(2)),
    "frames": (gym.spaces.Box(0, 255, (4, 84, 84), np.uint8), gym.spaces.Discrete(6, start=1)),
    "bounds": (
        gym.spaces.Box(np.array([-1.5, 0.0, -np.inf]), np.array([2.25, 1e-7, np.inf]), dtype=np.float64),
        gym.spaces.Box(np.array([-2.0, -0.5], dtype=np.float32), np.array([2.0, 0.5], dtype=np.float32)),
    ),
    "multi": (gym.spaces.Box(-1.0, 1.0, (3, 2), np.float32), gym.spaces.MultiDiscrete([3, 4], start=[1, 0])),
    "bool grid": (gym.spaces.Box(0, 1, (10, 10, 4), np.bool_), gym.spaces.Discrete(3)),
    "int grid": (gym.spaces.Box(0, 7, (5, 6, 2), np.int16), gym.spaces.Discrete(3)),
}


@pytest.mark.parametrize("name", SPACES)
def test_env_spec_round_trips_as_plain_data(name):
    obs_space, act_space = SPACES[name]
    spec = EnvSpec("some_module:Env-v0", obs_space, act_space, 475.0, 500, clip_rewards=name == "frames")
    buffer = io.BytesIO()
    torch.save({"env_spec": spec.to_data()}, buffer)
    buffer.seek(0)
    data = torch.load(buffer, weights_only=True)["env_spec"]  # plain data: the safe loader takes it
    again = EnvSpec.from_data(data, "ckpt.pt")
    assert again == spec  # the spaces compare by value: bounds, shape, dtype, n and start
    assert again.describe() == spec.describe() and again.obs_dtype == spec.obs_dtype
    assert again.observation_space.dtype == obs_space.dtype and again.action_space.dtype == act_space.dtype


def test_one_valued_box_bounds_are_stored_as_one_number():
    data = EnvSpec("x", *SPACES["frames"], None, None).to_data()
    assert data["observation_space"]["low"] == 0 and data["observation_space"]["high"] == 255


@pytest.mark.parametrize(
    "edit, fragment",
    [
        (lambda d: d.pop("action_space"), "KeyError"),
        (lambda d: d["observation_space"].update(type="Graph"), "unknown space type 'Graph'"),
        (lambda d: d["observation_space"].update(dtype="object"), "is neither numeric nor bool"),
        (lambda d: d["observation_space"].update(shape=[5]), "ValueError"),
        (lambda d: d["observation_space"].update(dtype="int64"), "OverflowError"),  # its infinite bounds
        (
            lambda d: d.update(action_space={"type": "Box", "dtype": "int64", "shape": [2], "low": 0, "high": 3}),
            "has action space Box.* which is not supported",
        ),
    ],
)
def test_a_malformed_env_description_is_a_user_error(edit, fragment):
    data = EnvSpec("CartPole-v1", *SPACES["cartpole"], 475.0, 500).to_data()
    edit(data)
    with pytest.raises(UserError, match=fragment) as err:
        EnvSpec.from_data(data, "ckpt.pt")
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("dtype", [np.bool_, np.uint8, np.int8, np.int32, np.float16, np.float64])
def test_box_observations_of_every_number_and_bool_dtype_are_accepted(dtype):
    from a3c.spec.environment import check_spaces

    check_spaces(gym.spaces.Box(0, 1, (10, 10, 4), dtype), gym.spaces.Discrete(2), "Grid-v0")
    spec = EnvSpec("Grid-v0", gym.spaces.Box(0, 1, (10, 10, 4), dtype), gym.spaces.Discrete(2), None, None)
    # frames and grids keep their byte per cell in the rollout buffers; everything else is float32
    assert spec.obs_dtype == (np.dtype(dtype) if dtype in (np.bool_, np.uint8) else np.float32)


def test_an_unsupported_observation_space_says_what_is_supported_and_what_to_do():
    from a3c.spec.environment import check_spaces

    with pytest.raises(UserError) as err:
        check_spaces(gym.spaces.Text(5), gym.spaces.Discrete(2), "Words-v0")
    message = str(err.value)
    assert "has observation space Text(" in message and "not supported" in message
    assert "Box observations of numbers or booleans" in message and "ObservationWrapper" in message
