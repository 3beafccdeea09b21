"""envs/Memory-v0 (the memory task) and envs/Spaces-v0 (every supported space), and how a3c.environment makes and
checks their spaces: Dict/Tuple observations flattened, unsupported spaces refused with a UserError."""

import gymnasium as gym
import numpy as np
import pytest

from a3c.environment import describe_env, make_env, spec_of
from a3c.errors import UserError


def play(env, policy, episodes, seed=0):
    """Mean return of ``policy(obs, first_obs)`` over episodes; also checks the episode length."""
    returns = []
    for i in range(episodes):
        obs, _ = env.reset(seed=seed + i)
        first, total, steps, done = obs, 0.0, 0, False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(policy(obs, first))
            total, steps, done = total + reward, steps + 1, terminated or truncated
        assert steps == env.unwrapped.delay + 2
        returns.append(total)
    return float(np.mean(returns))


def test_memory_task_needs_memory():
    env = make_env("envs/Memory-v0", {"delay": 5})
    obs, _ = env.reset(seed=3)
    assert obs[:2].sum() == 1 and obs[2] == 0  # the cue, one-hot
    for _ in range(5):
        blank, reward, terminated, _, _ = env.step(0)
        assert not blank.any() and reward == 0 and not terminated
    query, _, _, _, _ = env.step(1)
    assert query.tolist() == [0, 0, 1]  # the query: the same whatever the cue
    remembers = play(env, lambda obs, first: int(first.argmax()), 200)
    forgets = play(env, lambda obs, first: 0, 400)  # any memoryless policy answers the query the same way
    assert remembers == 1.0
    assert 0.4 < forgets < 0.6


def test_memory_task_rejects_bad_settings():
    with pytest.raises(UserError, match="n_cues"):
        make_env("envs/Memory-v0", {"n_cues": 1})
    with pytest.raises(UserError, match="delay"):
        make_env("envs/Memory-v0", {"delay": -1})


@pytest.mark.parametrize("obs, size", [("box", 3), ("dict", 3), ("tuple", 3)])
@pytest.mark.parametrize("action", ["discrete", "multidiscrete", "box"])
def test_spaces_env_is_described_with_flat_box_observations(obs, size, action):
    spec = describe_env("envs/Spaces-v0", {"obs": obs, "action": action})
    assert isinstance(spec.observation_space, gym.spaces.Box) and spec.obs_shape == (size,)
    env = make_env("envs/Spaces-v0", {"obs": obs, "action": action})
    first, _ = env.reset(seed=0)
    assert spec.observation_space.contains(first)
    _, reward, _, _, _ = env.step(env.action_space.sample())
    assert np.isfinite(reward)


class TextObservation(gym.Env):
    observation_space = gym.spaces.Dict({"a": gym.spaces.Box(0, 1, (2,)), "b": gym.spaces.Text(4)})
    action_space = gym.spaces.Discrete(2)


class IntBoxActions(gym.Env):
    observation_space = gym.spaces.Box(0, 1, (2,))
    action_space = gym.spaces.Box(0, 3, (2,), np.int64)


def test_unsupported_spaces_are_user_errors():
    with pytest.raises(UserError, match="observation space"):
        spec_of(TextObservation(), "Text-v0")
    with pytest.raises(UserError, match="action space"):
        spec_of(IntBoxActions(), "IntBox-v0")
