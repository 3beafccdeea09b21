"""``--env-backend ale-vector``: a worker's K Atari envs stepped by ale-py's C++ vector env (``AtariVectorEnv``, one
thread), with a3c's preprocessing semantics, as an ``EnvBatch`` (a3c/spec/batch.py; registered in a3c.spec.env_batch).

The C++ side does what ``AtariFrames`` does (a3c.spec.atari): frame skip 4 with the last two frames max-pooled (and
the same rule when the game ends inside a skip: the frames pooled are the previous step's), ALE's palette to grey,
OpenCV's INTER_AREA to 84x84, sticky actions inside the emulator. This module does the rest, in numpy for all K
envs at once, as a3c's gymnasium path does it:

- the frame stack (the vector env's is asked for one frame): a new episode's stack is its first frame four times
  (gymnasium's ``FrameStackObservation`` padding; the vector env's own stack pads with zeros);
- a lost life ends the learner's episode only (``Ended.life_lost``; ``LifeLossTerminal``'s rule: fewer lives, some
  left, the game not over), the game goes on; rewards are the game's own, unclipped (the worker clips for the loss);
- the frame limit (``max_num_frames_per_episode``, v5's 108,000) on ALE's own episode frame counter, as ALE counts it
  for gymnasium's env (the vector env counts frames after the no-op start, so its own limit is switched off).

Where it is not the gymnasium path, for the same seed (tests/spec/test_atari_vector.py holds the rest equal, bit for
bit, step for step):

- **the no-op start**: the vector env draws 0..29 no-op frames from its own ``std::mt19937`` seeded with the env's
  seed; gymnasium's ``AtariPreprocessing`` (and ``AtariFrames``) 1..30 from the env's numpy generator. The counts
  differ, so the games start on different frames: the runs are different samples of the same start distribution
  (shifted by one frame), not the same run;
- **the emulator's seed**: the same as the gymnasium env's (the second word of ``SeedSequence(seed)``, as ale-py's
  ``AtariEnv.seed_game``) where that word is below 2**31; the vector env takes no larger seed, so there its top bit is
  cleared (a different sticky-action stream);
- **the frame limit**: checked at the end of an agent step rather than inside it. The same step is cut, but the
  vector env runs it out: where the limit falls inside the step, its reward counts up to 3 more frames; and the
  episode's last observation has a different newest frame (gymnasium's path stops reading screens at the limit's
  frame and pools what it had read with the previous step's, the rule it also applies at a game's end, which the
  vector env shares). Once in 108,000 frames, and only in the bootstrap value of that one step;
- ``mode`` and ``difficulty`` are not supported (a one-line error names the gymnasium backend).

Which is why it is not the default (``--env-backend gymnasium`` is): docs/atari_speed.md has its speed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from a3c.spec.atari import NOOP_MAX, SCREEN_SIZE, STACK, atari_kwargs
from a3c.spec.batch import BatchStep, Ended
from a3c.spec.errors import UserError, install_extra

# the env kwargs this backend plays as the gymnasium path does (obs_type, render_mode and sound_obs change nothing
# a3c's preprocessing reads: obs_type is atari_kwargs' own, or an older run's, as a new run refuses it; frameskip is
# 1 after atari_kwargs, which refuses any other)
SUPPORTED_KWARGS = frozenset(
    {
        "game",
        "repeat_action_probability",
        "full_action_space",
        "max_num_frames_per_episode",
        "frameskip",
        "obs_type",
        "render_mode",
        "sound_obs",
        "continuous",
    }
)
# the vector env's own episode limit, out of reach (frames; its counter is a C int, and it stores limit + 1)
NO_LIMIT = 2**30
SEED_MASK = 2**31 - 1  # the vector env reseeds only on seeds >= 0 (a C int)


def emulator_seed(seed: int) -> int:
    """The emulator's seed for env seed ``seed``: ale-py's ``AtariEnv.seed_game`` takes the second word of
    ``SeedSequence(seed)`` (as a C int32); the vector env only takes non-negative ones, so the top bit is cleared (the
    same seed where that word is below 2**31)."""
    return int(np.random.SeedSequence(seed).generate_state(2)[1]) & SEED_MASK


def vector_kwargs(env_id: str, env_kwargs: dict[str, Any] | None) -> dict[str, Any]:
    """The ALE env's settings as gymnasium.make would give them (the id's registered kwargs under the user's), checked
    as make_env checks them (``atari_kwargs``) and for this backend: UserError naming any it does not play."""
    user = dict(env_kwargs or {})
    kwargs = atari_kwargs(env_id, user)  # registers the ALE ids; refuses continuous and frame skips
    try:
        registered = dict(gym.spec(env_id).kwargs)
    except gym.error.Error as err:
        raise UserError(f"unknown env id {env_id!r} ({err})") from None
    unsupported = sorted(set(user) - SUPPORTED_KWARGS)
    if unsupported:
        raise UserError(
            f"--env-backend ale-vector does not play --env-kwargs {' '.join(unsupported)}; drop them or use "
            "--env-backend gymnasium"
        )
    return {**registered, **kwargs}


def _vector_env_class() -> Any:
    try:
        from ale_py.vector_env import AtariVectorEnv
    except ImportError:
        raise UserError(
            f"--env-backend ale-vector needs ale-py 0.11 or later (its AtariVectorEnv); install the extra: "
            f"{install_extra('atari')}"
        ) from None
    return AtariVectorEnv


def check_vector_env(env_id: str, env_kwargs: dict[str, Any] | None) -> None:
    """UserError, before any worker starts, where this backend cannot play ``env_id`` with ``env_kwargs`` (the
    kwargs it does not play, an ale-py without the vector env)."""
    vector_kwargs(env_id, env_kwargs)
    _vector_env_class()


class AtariVectorBatch:
    """K envs of one ALE game in ale-py's ``AtariVectorEnv`` (one thread, the step's results for all K at once),
    preprocessed as a3c's gymnasium path (the module docstring)."""

    def __init__(self, env_id: str, env_kwargs: dict[str, Any] | None, num_envs: int) -> None:
        kwargs, vector_env = vector_kwargs(env_id, env_kwargs), _vector_env_class()
        limit = kwargs.get("max_num_frames_per_episode")
        self.frame_limit = int(limit) if limit else 0  # ALE's rule: 0 (or none) is no limit
        self.vec = vector_env(
            kwargs["game"],
            num_envs,
            num_threads=1,  # a worker is one core's work: the emulator thread runs while the worker waits on it
            autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,  # an ended env's first observation in the same step
            max_num_frames_per_episode=NO_LIMIT,
            repeat_action_probability=float(kwargs.get("repeat_action_probability", 0.25)),
            full_action_space=bool(kwargs.get("full_action_space", False)),
            img_height=SCREEN_SIZE,
            img_width=SCREEN_SIZE,
            grayscale=True,
            stack_num=1,  # the stack is kept here (its padding)
            frameskip=4,
            maxpool=True,
            noop_max=NOOP_MAX,
            episodic_life=False,
            life_loss_info=False,
            reward_clipping=False,
            use_fire_reset=False,
        )
        self.num_envs = num_envs
        self.single_action_space = self.vec.single_action_space
        self.frames = np.zeros((num_envs, STACK, SCREEN_SIZE, SCREEN_SIZE), dtype=np.uint8)
        self.lives = np.zeros(num_envs, dtype=np.int64)
        self.info: dict[str, np.ndarray] = {}  # the vector env's last info (lives, frame counters), per env
        self._actions = np.zeros(num_envs, dtype=np.int32)

    def reset(self, seeds: Sequence[int], action_seeds: Sequence[int]) -> np.ndarray:
        """Every env reset with its seed (``emulator_seed``); there are no action spaces to seed (the worker samples
        from its own generator)."""
        del action_seeds
        obs, info = self.vec.reset(seed=np.array([emulator_seed(s) for s in seeds], dtype=np.int64))
        self.info = info
        self.frames = np.repeat(obs, STACK, axis=1)  # a new episode's stack: its first frame four times
        self.lives = info["lives"].astype(np.int64)
        return self.frames

    def step(self, actions: Sequence[Any]) -> BatchStep:
        self._actions[:] = actions
        obs, rewards, terminated, truncated, info = self.vec.step(self._actions)
        # the new stack (a new array: the worker keeps an ended episode's last one past this step)
        frames = np.empty_like(self.frames)
        frames[:, :-1] = self.frames[:, 1:]
        frames[:, -1] = obs[:, 0]
        if self.frame_limit:
            # ALE's frame limit on ALE's own episode counter (info: after the auto-reset where the game ended, so
            # only where it did not)
            truncated = (info["episode_frame_number"] >= self.frame_limit) & ~terminated
        lives = info["lives"].astype(np.int64)
        over = terminated | truncated
        ended: list[Ended] = []
        if over.any() or (lives < self.lives).any():
            final = info.get("final_obs")  # [K, 1, 84, 84]: the last frames of the envs whose game ended
            game_over = terminated.copy()  # (the vector env's own truncation is out of reach: NO_LIMIT)
            for k in np.flatnonzero(over | ((lives > 0) & (lives < self.lives))):
                if game_over[k] and final is not None:
                    # the episode's last stack (the vector env reset this env in the step: obs is the new game's)
                    last = frames[k].copy()
                    last[-1] = final[k, 0]
                    ended.append(Ended(int(k), last, False))
                    frames[k] = obs[k, 0]  # the new episode's stack: its first frame four times
                elif truncated[k]:  # the frame limit, here: this env is reset now
                    ended.append(Ended(int(k), frames[k].copy(), False))
                    first, reset_info = self.vec.reset(options={"reset_mask": np.arange(self.num_envs) == k})
                    frames[k] = first[k, 0]
                    lives[k] = reset_info["lives"][k]
                    info = {**info, "episode_frame_number": reset_info["episode_frame_number"]}
                else:  # a lost life: terminal for the learner, the game and its observation go on
                    ended.append(Ended(int(k), frames[k], True))
                    terminated[k] = True
        self.frames, self.lives, self.info = frames, lives, info
        return BatchStep(frames, rewards.astype(np.float64), terminated, truncated, ended)

    def close(self) -> None:
        self.vec.close()
