"""The frames' background level, which the CNN subtracts from its input (``Config.input_shift``).

Why: most Atari screens are mostly background, and in some games the background is not black (Pong's is the grey
level 87 of 255 on 84% of the pixels). A first-layer filter's response to such a frame is then dominated by
``background x sum(its weights)``, and that sum is what an adaptive optimizer moves fastest: the gradient of every
weight of the filter carries the same ``background x delta`` term, RMSprop (and Adam) normalise each weight's step to
about the learning rate, so the 256 weights of an 8x8x4 filter move together and the response on the whole screen
shifts by ``0.34 x 256 x lr`` an update (about 0.06 at lr 7e-4) where the bias alone moves it by lr. A few dozen
updates in one direction and the filter is negative everywhere: dead (ReLU), with no gradient to bring it back. On
ALE/Pong-v5 with A3C's atari table 30 of the first convolution's 32 filters were dead by 1.4M frames (0 of 32 on
Breakout, whose background is black), and every run sat at the floor (-20.5) for 3.5-5M frames. With the background
subtracted (the frames' background becomes 0) no filter died and the runs left the floor at ~1.2M frames
(docs/benchmarks/atari.md, "The background level").

The level is measured once, when a new run starts (in the main process, before any worker): the most common pixel
value over the env's first observations (its reset with the run's seed and ``MEASURED_STEPS`` steps of uniformly
random actions from a generator seeded with it), in the model's input units (the value / 255 for uint8 frames, which
the model scales by 1/255). Not the reset's frame alone: a game's first frames after power-on can be drawn in other
colours (ALE/Pong-v5 reset with seed 4, few no-op starts: all four stacked frames at 107, the game's 87 from the
fourth step on; measured on that frame, a Pong run of seed 4 took 107/255 off where other seeds took 87/255). Only for
uint8 images the Nature CNN takes (36 pixels or more on the short side: screens; a small grid's background is its
empty cell, usually 0), and not with --normalize-obs (whose inputs are centred already). The value goes into the
config (config.json, every checkpoint): a resumed run and a loaded agent use the one the run trained with; a
checkpoint from before this rule has 0 (a3c.record.checkpoint.ADDED_SETTINGS). No torch here: settings resolve
before torch is imported.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

import gymnasium as gym
import numpy as np

from a3c.spec.config import Config
from a3c.spec.environment import EnvSpec, is_image, make_env

# the short side from which CnnTorso uses the Nature CNN (8x8/4, 4x4/2, 3x3/1, no padding); below it two padded 3x3
# convolutions (a3c.learn.model)
NATURE_CNN_MIN_SIDE = 36

# the steps after the reset whose observations the level is measured over (a few dozen ms of an Atari emulator):
# enough that a reset's odd frames (a game's power-on colours) are a small minority
MEASURED_STEPS = 64


def image_side(space: gym.spaces.Box) -> int:
    """The short side of an image observation as CnnTorso reads it: [H, W], or [C, H, W] / [H, W, C] by which of
    the outer dimensions is the channels (the smaller); 0 for other shapes."""
    shape = tuple(space.shape)
    if len(shape) == 2:
        return min(shape)
    if len(shape) != 3:
        return 0
    h, w = (shape[0], shape[1]) if shape[-1] < shape[0] else (shape[1], shape[2])
    return min(h, w)


def shifts_input(space: gym.spaces.Box, config: Config) -> bool:
    """Whether a run of ``config`` on observations ``space`` measures a background level: uint8 images the Nature
    CNN takes, without --normalize-obs."""
    return (
        is_image(space)
        and space.dtype == np.uint8
        and image_side(space) >= NATURE_CNN_MIN_SIDE
        and not config.normalize_obs
    )


def background_level(observations: Iterable[np.ndarray]) -> float:
    """The most common value over uint8 frames (stacks), in the model's input units: value / 255."""
    counts = np.zeros(256, dtype=np.int64)
    for observation in observations:
        counts += np.bincount(np.asarray(observation, dtype=np.uint8).ravel(), minlength=256)
    return float(np.argmax(counts)) / 255.0


def first_observations(env: gym.Env, seed: int | None, steps: int = MEASURED_STEPS) -> list[np.ndarray]:
    """The observation of ``env``'s reset with ``seed`` and of ``steps`` steps of uniformly random actions (their
    generator seeded with ``seed`` too, so a run's level is reproducible), resetting when an episode ends."""
    env.action_space.seed(seed)
    observation, _ = env.reset(seed=seed)
    observations = [observation]
    for _ in range(steps):
        observation, _, terminated, truncated, _ = env.step(env.action_space.sample())
        observations.append(observation)
        if terminated or truncated:
            observation, _ = env.reset()
            observations.append(observation)
    return observations


def resolve_input_shift(config: Config, spec: EnvSpec) -> Config:
    """A new run's config with ``input_shift`` set: the background level of the env's first observations where
    ``shifts_input``, else 0.0. One given already (a resumed run's, from its checkpoint) is kept."""
    if config.input_shift is not None:
        return config
    shift = 0.0
    if shifts_input(spec.observation_space, config):
        env = make_env(config.env, config.env_kwargs)
        try:
            observations = first_observations(env, config.seed)
        finally:
            env.close()
        shift = background_level(observations)
    return dataclasses.replace(config, input_shift=shift)
