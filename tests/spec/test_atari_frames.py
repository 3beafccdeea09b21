"""a3c.spec.atari: AtariFrames (the worker's Atari preprocessing, stepping the emulator directly) gives what
gymnasium's AtariPreprocessing + FrameStackObservation give, bit for bit, over game ends, truncations and resets."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("ale_py", reason="Atari needs the [atari] extra (.ci/run installs it)")
pytest.importorskip("cv2", reason="Atari needs the [atari] extra (.ci/run installs it)")

from a3c.spec.atari import AtariFrames, atari_kwargs, check_new_run_kwargs  # noqa: E402
from a3c.spec.errors import UserError  # noqa: E402


def _base(env_id: str, **kwargs) -> gym.Env:
    return gym.make(env_id, **atari_kwargs(env_id, kwargs))


def gymnasium_atari_wrappers(env: gym.Env) -> gym.Env:
    """The reference: gymnasium's AtariPreprocessing + FrameStackObservation with the same settings (noop_max 30,
    frame skip 4, 84x84 grey, 4 frames), its two max-pooled frames sized by the emulator's screen (the env observes
    its RAM: atari_kwargs)."""
    preprocessing = gym.wrappers.AtariPreprocessing(
        env, noop_max=30, frame_skip=4, screen_size=84, terminal_on_life_loss=False
    )
    height, width = env.unwrapped.ale.getScreenDims()
    preprocessing.obs_buffer = [np.empty((height, width), np.uint8), np.empty((height, width), np.uint8)]
    return gym.wrappers.FrameStackObservation(preprocessing, 4)


def _compare(env_id: str, steps: int, seed: int, **kwargs) -> tuple[int, int]:
    """Step both stacks with the same random actions; (game ends, truncations) seen."""
    fast, reference = AtariFrames(_base(env_id, **kwargs)), gymnasium_atari_wrappers(_base(env_id, **kwargs))
    assert fast.observation_space == reference.observation_space
    got, got_info = fast.reset(seed=seed)
    want, want_info = reference.reset(seed=seed)
    assert np.array_equal(got, want) and got.dtype == want.dtype == np.uint8 and got_info == want_info
    rng = np.random.default_rng(seed)
    ends = truncations = 0
    previous = got
    for _ in range(steps):
        action = int(rng.integers(reference.action_space.n))
        fast_step, reference_step = fast.step(action), reference.step(action)
        assert np.array_equal(fast_step[0], reference_step[0])
        assert fast_step[1:] == reference_step[1:]  # reward, terminated, truncated, info
        assert np.array_equal(previous[1:], fast_step[0][:-1])  # a stack of the last 4 frames ...
        assert not np.shares_memory(previous, fast_step[0])  # ... in a new array
        previous = fast_step[0]
        if reference_step[2] or reference_step[3]:
            ends += 1
            truncations += bool(reference_step[3])
            got, got_info = fast.reset()
            want, want_info = reference.reset()
            assert np.array_equal(got, want) and got_info == want_info
            previous = got
    fast.close()
    reference.close()
    return ends, truncations


def test_pong_with_sticky_actions_over_whole_games():
    ends, _ = _compare("ALE/Pong-v5", 1500, seed=3)
    assert ends > 0  # a game ended: the early break of the frame skip and the reset were compared too


def test_breakout_with_lives_and_truncation_by_the_emulator():
    ends, truncations = _compare("ALE/Breakout-v5", 600, seed=5, max_num_frames_per_episode=400)
    assert truncations > 0


def test_a_finished_episodes_last_observation_survives_the_reset():
    env = AtariFrames(_base("ALE/Pong-v5"))
    env.reset(seed=1)
    last = env.step(0)[0]
    kept = last.copy()
    env.reset()
    env.step(1)
    assert np.array_equal(last, kept)


def test_continuous_actions_are_refused_in_one_line():
    with pytest.raises(UserError, match="continuous=True: a3c plays Atari games with their discrete action set"):
        atari_kwargs("ALE/Pong-v5", {"continuous": True})


def test_a_step_limit_is_refused_in_one_line():
    """gymnasium's TimeLimit (max_episode_steps) counts env.step calls, and AtariFrames steps the emulator itself: the
    limit was silently never reached (a game of Pong ran 30 agent steps past max_episode_steps=10)."""
    with pytest.raises(UserError, match="max_episode_steps=10: .* max_num_frames_per_episode=N"):
        atari_kwargs("ALE/Pong-v5", {"max_episode_steps": 10})


@pytest.mark.parametrize("obs_type", ["ram", "rgb", "grayscale"])
def test_a_new_run_refuses_an_observation_type_in_one_line(obs_type):
    """Found by probing: --env-kwargs obs_type=ram trained on the 84x84 screen frames the preprocessing reads from the
    emulator itself, while config.json said ram: the kwarg did nothing, silently."""
    with pytest.raises(UserError, match=f"obs_type={obs_type}: a3c's Atari preprocessing .* drop it"):
        check_new_run_kwargs({"obs_type": obs_type})


def test_a_run_made_with_an_observation_type_still_makes_its_env():
    """A run made before the refusal keeps its obs_type (env kwargs are fixed on resume): its resume and evaluation
    make the env as before."""
    assert atari_kwargs("ALE/Breakout-v5", {"obs_type": "rgb"})["obs_type"] == "rgb"


@pytest.mark.parametrize("probability", [2.0, -0.1, 1.5])
def test_a_sticky_action_probability_outside_0_1_is_refused_in_one_line(probability):
    """Found by probing: ale-py takes repeat_action_probability=2.0, and then repeats the first action for ever: a run
    that trained on no episode at all, exit 0."""
    with pytest.raises(UserError, match=f"repeat_action_probability={probability}: .* from 0 to 1"):
        atari_kwargs("ALE/Breakout-v5", {"repeat_action_probability": probability})


@pytest.mark.parametrize("probability", [0, 0.0, 0.25, 1])
def test_a_sticky_action_probability_in_0_1_is_taken(probability):
    assert (
        atari_kwargs("ALE/Breakout-v5", {"repeat_action_probability": probability})["repeat_action_probability"]
        == probability
    )
