"""envs/Memory-v0 (the memory task) and envs/Spaces-v0 (every supported space), and how a3c.spec.environment makes and
checks their spaces: Dict/Tuple observations flattened, unsupported spaces refused with a UserError."""

import gymnasium as gym
import numpy as np
import pytest

from a3c.spec.environment import LIFE_LOST, LifeLossTerminal, describe_env, make_env, spec_of
from a3c.spec.errors import UserError


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


class FakeAle:
    def __init__(self):
        self.lives_left = 3

    def lives(self):
        return self.lives_left


class ThreeLives(gym.Env):
    """A life is lost every 2 steps; the game is over after the third."""

    observation_space = gym.spaces.Box(0, 100, (1,))
    action_space = gym.spaces.Discrete(2)

    def __init__(self):
        self.ale, self.t, self.resets = FakeAle(), 0, 0

    def reset(self, *, seed=None, options=None):
        self.ale.lives_left, self.t, self.resets = 3, 0, self.resets + 1
        return np.array([0.0], np.float32), {}

    def step(self, action):
        self.t += 1
        if self.t % 2 == 0:
            self.ale.lives_left -= 1
        return np.array([self.t], np.float32), 1.0, self.ale.lives_left == 0, False, {}


def test_a_lost_life_is_a_terminal_for_the_learner_but_the_game_goes_on():
    env = LifeLossTerminal(ThreeLives())
    env.reset()
    ends = []
    for _ in range(12):
        obs, _, terminated, _, info = env.step(0)
        if terminated:
            ends.append((int(obs[0]), bool(info.get(LIFE_LOST))))
            after, _ = env.reset()
            if info.get(LIFE_LOST):
                assert after[0] == obs[0]  # the game continues from where the life was lost
    assert ends == [(2, True), (4, True), (6, False), (2, True), (4, True), (6, False)]
    assert env.env.resets == 3  # the first reset and one after each game's real end, none after a lost life
