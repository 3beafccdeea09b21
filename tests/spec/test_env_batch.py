"""a3c.spec.env_batch: GymEnvBatch steps K gymnasium envs as the worker's loop stepped them by hand (each reset at
its episode's end, within the step; the ended episode's last observation kept), and make_env_batch picks the
backend (the vector env's own tests: tests/spec/test_atari_vector.py)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from a3c.spec.env_batch import GymEnvBatch, make_env_batch


def test_gym_batch_is_the_envs_stepped_by_hand():
    K, seeds = 3, [5, 6, 7]
    batch, by_hand = GymEnvBatch("CartPole-v1", {}, K), [gym.make("CartPole-v1") for _ in range(K)]
    first = batch.reset(seeds, [1, 2, 3])
    want = [env.reset(seed=s)[0] for env, s in zip(by_hand, seeds, strict=True)]
    np.testing.assert_array_equal(np.stack(first), np.stack(want))
    rng, ends = np.random.default_rng(0), 0
    for _ in range(200):
        actions = rng.integers(2, size=K).tolist()
        step = batch.step(actions)
        ended = []
        for k, (env, action) in enumerate(zip(by_hand, actions, strict=True)):
            obs, reward, terminated, truncated, _ = env.step(action)
            assert step.rewards[k] == reward and step.terminated[k] == terminated and step.truncated[k] == truncated
            if terminated or truncated:
                ended.append((k, obs))
                obs, _ = env.reset()
            np.testing.assert_array_equal(step.obs[k], obs)
        assert [(e.env, e.life_lost) for e in step.ended] == [(k, False) for k, _ in ended]
        for mine, (_, obs) in zip(step.ended, ended, strict=True):
            np.testing.assert_array_equal(mine.final_obs, obs)
        ends += len(ended)
        assert step.rewards.dtype == np.float64
    assert ends >= 5  # random CartPole episodes last ~20 steps
    batch.close()


def test_make_env_batch_gives_the_gymnasium_backend_for_any_env():
    batch = make_env_batch("CartPole-v1", None, 2, "gymnasium")
    assert isinstance(batch, GymEnvBatch) and batch.num_envs == len(batch.envs) == 2
    batch.close()


def test_every_env_backend_flag_has_a_maker_and_no_other():
    """--env-backend's choices (a3c.spec.flags.ENV_BACKENDS) are the registry's keys: a backend is a class of the
    EnvBatch interface (a3c/spec/batch.py) and one entry in ENV_BACKEND_MAKERS."""
    from a3c.spec.env_batch import ENV_BACKEND_MAKERS
    from a3c.spec.flags import ENV_BACKENDS

    assert tuple(ENV_BACKEND_MAKERS) == ENV_BACKENDS
    batch = make_env_batch("CartPole-v1", {}, 2, "gymnasium")
    assert isinstance(batch, GymEnvBatch) and batch.num_envs == 2
    batch.close()
