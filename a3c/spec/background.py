"""The frames' background level, which the CNN subtracts from its input (``Config.input_shift``).

Why: most Atari screens are mostly background, and in some games the background is not black (Pong's is the grey
level 87 of 255 on 84% of the pixels). A first-layer filter's response to such a frame is then dominated by
``background x sum(its weights)``, and that sum is what an adaptive optimizer moves fastest: the gradient of every
weight of the filter carries the same ``background x delta`` term, RMSprop (and Adam) normalise each weight's step to
about the learning rate, so the 256 weights of an 8x8x4 filter move together and the response on the whole screen
shifts by ``0.34 x 256 x lr`` an update (about 0.06 at lr 7e-4) where the bias alone moves it by lr. A few dozen
updates in one direction and the filter is negative everywhere: dead (ReLU), with no gradient to bring it back. On
ALE/Pong-v5 with the atari preset 30 of the first convolution's 32 filters were dead by 1.4M frames (0 of 32 on
Breakout, whose background is black), and every run sat at the floor (-20.5) for 3.5-5M frames. With the background
subtracted (the frames' background becomes 0) no filter died and the runs left the floor at ~1.2M frames
(docs/atari.md, "The background level").

The level is measured once, when a new run starts (in the main process, before any worker): the most common pixel
value of the env's first observation (its reset with the run's seed), in the model's input units (the value / 255
for uint8 frames, which the model scales by 1/255). Only for uint8 images the Nature CNN takes (36 pixels or more
on the short side: screens; a small grid's background is its empty cell, usually 0), and not with --normalize-obs
(whose inputs are centred already). The value goes into the config (config.json, every
checkpoint): a resumed run and a loaded agent use the one the run trained with; a checkpoint from before this rule
has 0 (a3c.record.checkpoint.ADDED_SETTINGS). No torch here: settings resolve before torch is imported.
"""

from __future__ import annotations

import dataclasses

import gymnasium as gym
import numpy as np

from a3c.spec.config import Config
from a3c.spec.environment import EnvSpec, is_image, make_env

# the short side from which CnnTorso uses the Nature CNN (8x8/4, 4x4/2, 3x3/1, no padding); below it two padded 3x3
# convolutions (a3c.learn.model)
NATURE_CNN_MIN_SIDE = 36


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


def background_level(observation: np.ndarray) -> float:
    """The most common value of a uint8 frame (stack), in the model's input units: value / 255."""
    counts = np.bincount(np.asarray(observation, dtype=np.uint8).ravel(), minlength=256)
    return float(np.argmax(counts)) / 255.0


def resolve_input_shift(config: Config, spec: EnvSpec) -> Config:
    """A new run's config with ``input_shift`` set: the background level of the env's first observation where
    ``shifts_input``, else 0.0. One given already (a resumed run's, from its checkpoint) is kept."""
    if config.input_shift is not None:
        return config
    shift = 0.0
    if shifts_input(spec.observation_space, config):
        env = make_env(config.env, config.env_kwargs)
        try:
            observation, _ = env.reset(seed=config.seed)
        finally:
            env.close()
        shift = background_level(observation)
    return dataclasses.replace(config, input_shift=shift)
