"""a3c.spec.background: the frames' background level is the most common value over the first observations (the reset's
and MEASURED_STEPS random steps'), in the model's input units; it is measured for uint8 frames the Nature CNN takes
(not grids, not other dtypes, not with --normalize-obs), kept where a config has one already, taken off by the CNN
(before its first convolution) and 0 for a checkpoint from before the rule."""

import gymnasium as gym
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from a3c.learn.model import CnnTorso, input_shift
from a3c.record.checkpoint import saved_settings
from a3c.spec.background import (
    MEASURED_STEPS,
    background_level,
    first_observations,
    image_side,
    resolve_input_shift,
    shifts_input,
)
from a3c.spec.config import Config
from a3c.spec.environment import EnvSpec


def spec(space: gym.spaces.Box, env: str = "Test-v0") -> EnvSpec:
    return EnvSpec(env, space, gym.spaces.Discrete(3), None, None)


@given(
    background=st.integers(0, 255),
    others=st.lists(st.integers(0, 255), max_size=40),
    shape=st.sampled_from([(4, 84, 84), (84, 84, 3), (36, 40)]),
)
def test_the_level_is_the_most_common_value_over_255(background, others, shape):
    frame = np.full(shape, background, dtype=np.uint8)
    flat = frame.reshape(-1)
    flat[: len(others)] = others  # far fewer than the background's pixels: it stays the most common value
    assert background_level([frame]) == background / 255.0


SPACES = {
    "frames [4, 84, 84] uint8": (gym.spaces.Box(0, 255, (4, 84, 84), np.uint8), True),
    "frames [84, 84, 4] uint8, channels last": (gym.spaces.Box(0, 255, (84, 84, 4), np.uint8), True),
    "grey frame [84, 84] uint8": (gym.spaces.Box(0, 255, (84, 84), np.uint8), True),
    "frames [3, 36, 48] uint8 (the Nature CNN's smallest)": (gym.spaces.Box(0, 255, (3, 36, 48), np.uint8), True),
    "grid [10, 10, 4] uint8 (the small CNN)": (gym.spaces.Box(0, 255, (10, 10, 4), np.uint8), False),
    "frames [84, 84, 4] bool": (gym.spaces.Box(0, 1, (84, 84, 4), np.bool_), False),
    "frames [4, 84, 84] float32": (gym.spaces.Box(0.0, 1.0, (4, 84, 84), np.float32), False),
    "vector [8] uint8": (gym.spaces.Box(0, 255, (8,), np.uint8), False),
}


@pytest.mark.parametrize(("space", "measured"), SPACES.values(), ids=SPACES.keys())
def test_which_observations_get_a_level(space, measured):
    assert shifts_input(space, Config()) is measured
    assert not shifts_input(space, Config(normalize_obs=True))  # its inputs are centred already
    if measured:
        assert image_side(space) >= 36
        assert input_shift(space, Config(input_shift=0.25)) == 0.25  # the model takes the config's
    else:
        assert input_shift(space, Config(input_shift=0.25)) == 0.0  # none for a CNN it does not apply to


def test_a_grid_env_gets_none_and_a_given_level_is_kept():
    grid = spec(gym.spaces.Box(0, 255, (10, 10, 4), np.uint8), "envs/Catch-v0")
    assert resolve_input_shift(Config(env="envs/Catch-v0"), grid).input_shift == 0.0
    frames = spec(gym.spaces.Box(0, 255, (4, 84, 84), np.uint8), "ALE/Pong-v5")
    # a resumed run's (its checkpoint's): kept, the env is not made
    assert resolve_input_shift(Config(env="no-such-env-v0", input_shift=0.5), frames).input_shift == 0.5


class PowerOnColours(gym.Env):
    """Frames of level 200 for the first reset and the two steps after it (a game's power-on colours), then level
    30; an episode lasts 10 steps."""

    observation_space = gym.spaces.Box(0, 255, (4, 36, 36), np.uint8)
    action_space = gym.spaces.Discrete(2)

    def __init__(self):
        self.resets = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.resets += 1
        self.t = 0
        return self.frame(), {}

    def step(self, action):
        self.t += 1
        return self.frame(), 0.0, self.t >= 10, False, {}

    def frame(self):
        power_on = self.resets == 1 and self.t <= 2
        return np.full((4, 36, 36), 200 if power_on else 30, np.uint8)


def test_the_level_is_measured_over_many_frames_not_the_resets_alone():
    env = PowerOnColours()
    observations = first_observations(env, seed=4)
    # the reset's frame, one per step, and one per reset after an episode's end (every 10 steps)
    assert len(observations) == 1 + MEASURED_STEPS + MEASURED_STEPS // 10
    assert background_level(observations[:1]) == 200 / 255  # the reset's frame alone would give the odd colour
    assert background_level(observations) == 30 / 255


def test_the_measurement_is_reproducible_from_the_seed():
    pytest.importorskip("ale_py", reason="Atari needs the [atari] extra (.ci/run installs it)")
    from a3c.spec.environment import make_env

    first, second = make_env("ALE/Pong-v5", {}), make_env("ALE/Pong-v5", {})
    try:
        a, b = first_observations(first, seed=7, steps=20), first_observations(second, seed=7, steps=20)
    finally:
        first.close()
        second.close()
    assert len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize("seed", range(1, 9))
def test_pongs_level_is_its_grey_background_on_every_seed(seed):
    # seed 4's reset shows the game's power-on colours (all four stacked frames at 107): measured on the reset's
    # frame alone, its run took 107/255 off where the others took 87/255
    pytest.importorskip("ale_py", reason="Atari needs the [atari] extra (.ci/run installs it)")
    from a3c.spec.environment import describe_env

    config = Config(env="ALE/Pong-v5", seed=seed)
    assert resolve_input_shift(config, describe_env(config.env)).input_shift == 87 / 255


def test_breakouts_level_is_black():
    pytest.importorskip("ale_py", reason="Atari needs the [atari] extra (.ci/run installs it)")
    from a3c.spec.environment import describe_env

    breakout = Config(env="ALE/Breakout-v5")
    assert resolve_input_shift(breakout, describe_env(breakout.env)).input_shift == 0.0  # a black background


@pytest.mark.parametrize("channels_last", [False, True])
def test_the_cnn_takes_the_level_off_its_scaled_input(channels_last):
    torch.manual_seed(1)
    shape = (84, 84, 4) if channels_last else (4, 84, 84)
    shifted = CnnTorso(shape, channels_last, 1 / 255, shift=87 / 255)
    plain = CnnTorso(shape, channels_last, 1.0)
    plain.load_state_dict(shifted.state_dict())
    frames = torch.randint(0, 256, (3, *shape), dtype=torch.uint8)
    with torch.no_grad():
        expected = plain(frames.float() / 255 - 87 / 255)
        torch.testing.assert_close(shifted(frames), expected, rtol=0, atol=1e-5)
        assert not torch.allclose(CnnTorso(shape, channels_last, 1 / 255, shift=0.0).eval()(frames), expected)


def test_a_checkpoint_from_before_the_rule_has_no_level():
    payload = {"config": Config(env="ALE/Pong-v5").to_dict(), "env_spec": None}
    del payload["config"]["input_shift"]
    assert saved_settings(payload)["input_shift"] == 0.0
