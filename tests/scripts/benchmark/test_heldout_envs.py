"""The toy-text envs the benchmarks register one-hot (scripts/benchmark/heldout_envs.py): a3c takes them, and each
observation is the one-hot code of the wrapped env's state."""

import gymnasium as gym
import numpy as np
import pytest

import scripts.benchmark.heldout_envs  # noqa: F401  (registers the ids)
from a3c.spec.environment import describe_env


@pytest.mark.parametrize(
    ("env_id", "inner", "threshold"),
    [
        ("TaxiOneHot-v4", "Taxi-v4", 8.0),
        ("FrozenLakeOneHot-v1", "FrozenLake-v1", 0.70),
        ("CliffWalkingOneHot-v1", "CliffWalking-v1", None),
    ],
)
def test_one_hot_envs_code_the_wrapped_state(env_id, inner, threshold):
    env, plain = gym.make(env_id), gym.make(inner)
    assert env.spec.reward_threshold == threshold
    n = plain.observation_space.n
    obs, _ = env.reset(seed=3)
    state, _ = plain.reset(seed=3)
    for action in [0, 1, 2, 3, 1, 2]:
        assert obs.shape == (n,) and obs.sum() == 1 and int(np.argmax(obs)) == state
        obs, reward, terminated, truncated, _ = env.step(action)
        state, plain_reward, plain_terminated, plain_truncated, _ = plain.step(action)
        assert (reward, terminated, truncated) == (plain_reward, plain_terminated, plain_truncated)
        if terminated or truncated:
            break
    spec = describe_env(f"scripts.benchmark.heldout_envs:{env_id}")
    assert spec.action_space == plain.action_space


def test_cliff_walking_ends_an_episode_at_200_steps_where_the_plain_env_never_does():
    env = gym.make("CliffWalkingOneHot-v1")
    env.reset(seed=0)
    ends = [env.step(0)[2:4] for _ in range(200)]  # always up: never the goal, never the cliff
    assert ends[:-1] == [(False, False)] * 199 and ends[-1] == (False, True)
    assert gym.make("CliffWalking-v1").spec.max_episode_steps is None
