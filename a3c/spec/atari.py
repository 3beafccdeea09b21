"""Atari's standard preprocessing (the DQN/A3C one), made for the worker's hot loop.

What a learner sees of an ``ALE/*`` game: up to 30 no-op frames at each reset, each action repeated for 4 emulator
frames (the agent step) with the screen max-pooled over the last two, 84x84 grey (OpenCV's INTER_AREA), the last 4
such frames stacked (uint8 [4, 84, 84]). That is gymnasium's ``AtariPreprocessing(noop_max=30, frame_skip=4,
screen_size=84)`` under ``FrameStackObservation(4)``, on an ALE env made without its own frame skip.

``AtariFrames`` does the same in one wrapper: an agent step calls the emulator (``ale.act``) four times directly and
writes the stacked frames once, where gymnasium's stack goes through six Python layers a frame (the two wrappers,
gymnasium.make's order and checker wrappers and ale-py's own ``AtariEnv.step``, which also fetches an observation a
frame that the preprocessing throws away) and concatenates and deep-copies the stack a step. The emulator, its
sticky actions (ALE's ``repeat_action_probability``, applied inside ``act``) and its random state are the same, so
the observations, rewards and flags are the same bit for bit (tests/spec/test_atari_frames.py, against gymnasium's
stack). The reset (rare) goes through the env as gymnasium's does, seeding and no-op draws included.
"""

from __future__ import annotations

from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np

from a3c.spec.errors import UserError, install_extra

NOOP_MAX, FRAME_SKIP, SCREEN_SIZE, STACK = 30, 4, 84, 4


def register_ale(env_id: str) -> None:
    """Register the ALE ids with gymnasium (ale-py ships the ROMs); UserError without ale-py."""
    try:
        import ale_py
    except ImportError:
        raise UserError(f"{env_id} needs ale-py; install the extra: {install_extra('atari')}") from None
    gym.register_envs(ale_py)


def atari_kwargs(env_id: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """Register the ALE ids (``register_ale``), then ``atari_make_kwargs``."""
    register_ale(env_id)
    return atari_make_kwargs(env_id, kwargs)


def atari_make_kwargs(env_id: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """gymnasium.make's kwargs for an ALE game (the ids registered already): the env made without its own frame skip,
    as the preprocessing skips frames, once. Its own observations are the 128 bytes of the console's RAM (unless
    --env-kwargs asks otherwise): the preprocessing reads the screen from the emulator itself and drops the env's
    observation, so a copy of the screen at every reset would be made for nothing. UserError for a kwarg the
    preprocessing cannot play under."""
    if kwargs.get("continuous"):
        raise UserError(
            "--env-kwargs continuous=True: a3c plays Atari games with their discrete action set (its no-op starts "
            "and frame skip need it); drop it"
        )
    if "max_episode_steps" in kwargs:
        # gymnasium's TimeLimit would count env.step calls, which the preprocessing makes only in its no-op starts
        raise UserError(
            f"--env-kwargs max_episode_steps={kwargs['max_episode_steps']}: a3c's Atari preprocessing steps the "
            "emulator itself; limit a game by emulator frames instead: max_num_frames_per_episode=N (4 an agent step)"
        )
    if kwargs.get("frameskip", 1) != 1:
        raise UserError(
            f"--env-kwargs frameskip={kwargs['frameskip']}: a3c's Atari preprocessing skips 4 frames itself; drop it"
        )
    sticky = kwargs.get("repeat_action_probability", 0.0)
    if isinstance(sticky, bool) or not isinstance(sticky, (int, float)) or not 0.0 <= sticky <= 1.0:
        # (ale-py takes 2.0, and then repeats the game's first action for ever: a run without one episode)
        raise UserError(
            f"--env-kwargs repeat_action_probability={sticky}: the chance that the emulator repeats the last action "
            "instead of the new one, a number from 0 to 1 (ALE v5's default: 0.25; 0: no sticky actions)"
        )
    return {"obs_type": "ram", **kwargs, "frameskip": 1}


def check_new_run_kwargs(kwargs: dict[str, Any]) -> None:
    """UserError for --env-kwargs that a new Atari run refuses though they do no harm where they are: obs_type, which
    changes nothing the learner sees (the preprocessing reads the screen from the emulator and drops the env's own
    observation), so that obs_type=ram trained on the screen while config.json said ram. A run made before this check
    keeps its obs_type: its resume and its evaluation make the env as it was (atari_make_kwargs takes it)."""
    if "obs_type" in kwargs:
        raise UserError(
            f"--env-kwargs obs_type={kwargs['obs_type']}: a3c's Atari preprocessing learns from 84x84 grey frames of "
            "the screen, read from the emulator, whatever the env's own observation is; drop it"
        )


class AtariFrames(gym.Wrapper):
    """No-op starts, frame skip 4 with max-pooling, 84x84 grey and 4 stacked frames in one wrapper over an ALE env
    (discrete actions, no frame skip of its own, made with ``atari_kwargs``), stepping the emulator directly (the
    module docstring). gymnasium.error.DependencyNotInstalled without OpenCV."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        try:
            import cv2
        except ImportError:
            raise gym.error.DependencyNotInstalled("opencv-python is not installed") from None
        self._resize = cv2.resize
        self._area = cv2.INTER_AREA
        atari: Any = env.unwrapped  # ale_py's AtariEnv (typed as a plain Env here)
        self.ale, self._action_set = atari.ale, list(atari._action_set)
        height, width = self.ale.getScreenDims()  # (ale.getScreenGrayscale writes the whole screen into these)
        self._buffers = [np.empty((height, width), dtype=np.uint8), np.empty((height, width), dtype=np.uint8)]
        self._frames = np.zeros((STACK, SCREEN_SIZE, SCREEN_SIZE), dtype=np.uint8)
        self.observation_space = gym.spaces.Box(0, 255, self._frames.shape, np.uint8)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        # as AtariPreprocessing.reset: the env's reset, then 1..30 no-op frames drawn from the env's own generator
        _, info = self.env.reset(seed=seed, options=options)
        for _ in range(self.noop_count()):
            _, _, terminated, truncated, step_info = self.env.step(0)
            info.update(step_info)
            if terminated or truncated:
                _, info = self.env.reset(seed=seed, options=options)
        self.ale.getScreenGrayscale(self._buffers[0])
        self._buffers[1].fill(0)
        frame = self._frame()
        self._frames = np.stack([frame] * STACK)  # the stack starts as the first frame, 4 times (gymnasium's padding)
        return self._frames, info

    def noop_count(self) -> int:
        """The no-op frames of a reset: 1..30 from the env's own generator, as AtariPreprocessing draws them."""
        return int(self.env.unwrapped.np_random.integers(1, NOOP_MAX + 1))

    def step(self, action: Any) -> tuple[np.ndarray, SupportsFloat, bool, bool, dict[str, Any]]:
        ale, ale_action = self.ale, self._action_set[action]
        reward, terminated, truncated = 0.0, False, False
        for t in range(FRAME_SKIP):
            reward += ale.act(ale_action, 1.0)
            terminated, truncated = ale.game_over(with_truncation=False), ale.game_truncated()
            if terminated or truncated:
                break  # (the frames pooled are then those of the last step: AtariPreprocessing's rule)
            if t == FRAME_SKIP - 2:
                ale.getScreenGrayscale(self._buffers[1])
            elif t == FRAME_SKIP - 1:
                ale.getScreenGrayscale(self._buffers[0])
        # a new array a step: the worker keeps a finished episode's last observation past the reset that follows
        frames = np.empty_like(self._frames)
        frames[:-1] = self._frames[1:]
        frames[-1] = self._frame()
        self._frames = frames
        info = {"lives": ale.lives(), "episode_frame_number": ale.getEpisodeFrameNumber()}
        info["frame_number"] = ale.getFrameNumber()
        return frames, reward, terminated, truncated, info

    def _frame(self) -> np.ndarray:
        """The two last frames max-pooled (in place, into the first buffer, as AtariPreprocessing does), 84x84."""
        np.maximum(self._buffers[0], self._buffers[1], out=self._buffers[0])
        return self._resize(self._buffers[0], (SCREEN_SIZE, SCREEN_SIZE), interpolation=self._area)
