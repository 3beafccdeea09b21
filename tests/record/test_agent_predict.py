"""Agent.predict, Stable-Baselines3's protocol: one observation or a VecEnv's batch, the recurrent state in and out with
episode_start resetting it, deterministic or sampled actions; and SB3's own evaluate_policy run on a3c agents (a
discrete MLP, a continuous one with observation normalisation, an Atari CNN and an LSTM) scoring the same episodes as
python -m a3c.evaluate on the same seeds."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from agent_runs import sampled, trained, untrained_run

import a3c
from a3c.evaluate import evaluate
from a3c.record.agent import Agent, eval_seeds, make_eval_envs, run_episodes
from a3c.spec.config import Config


@pytest.fixture(scope="module")
def cartpole(tmp_path_factory):
    return trained(tmp_path_factory, "cartpole", env="CartPole-v1", total_steps=5000)


@pytest.fixture(scope="module")
def pendulum(tmp_path_factory):
    return trained(tmp_path_factory, "pendulum", env="Pendulum-v1", total_steps=4000)  # (its preset: --normalize-obs)


@pytest.fixture(scope="module")
def memory(tmp_path_factory):
    return trained(tmp_path_factory, "memory", env="envs/Memory-v0", lstm=16, total_steps=10_000)  # (scores ~1)


def run_dir_of(agent: Agent):
    return agent.path.parent.parent  # RUN/checkpoints/latest.pt


# -- predict's protocol ---------------------------------------------------------------------------------------------
def test_predict_takes_one_observation_or_a_batch_as_sb3_does(cartpole, pendulum):
    obs = sampled(cartpole.observation_space, 16)
    actions, state = cartpole.predict(obs, deterministic=True)
    assert state is None and actions.shape == (16,) and actions.dtype == np.int64
    assert np.array_equal(actions, cartpole.act(obs))  # deterministic: act's argmax
    one, state = cartpole.predict(obs[3], deterministic=True)
    assert state is None and np.shape(one) == () and one == cartpole.act(obs[3])
    assert cartpole.action_space.contains(int(one))

    x = sampled(pendulum.observation_space, 16)
    actions, _ = pendulum.predict(x, deterministic=True)
    assert actions.shape == (16, 1) and actions.dtype == np.float32
    assert np.array_equal(actions, pendulum.act(x))  # the mean, clipped to the bounds, of normalised observations
    one, _ = pendulum.predict(x[0], deterministic=True)
    assert one.shape == (1,) and np.allclose(one, actions[0], atol=1e-6)  # (a batch of 1 rounds otherwise)
    with pytest.raises(ValueError, match=r"observation of shape \(5,\) does not fit the env's observations \(3,\)"):
        pendulum.predict(np.zeros(5, dtype=np.float32))


def test_predict_samples_by_default_with_the_agents_seeded_sampler(cartpole):
    """SB3's default is deterministic=False: samples, from the agent's sampler (a3c.load(seed=...)), so a seed
    repeats them; the sampled actions follow the policy (both CartPole actions appear where it is unsure)."""
    obs = np.repeat(np.zeros((1, 4), dtype=np.float32), 400, axis=0)
    probs = cartpole.action_probs(obs[0])
    first = a3c.load(cartpole.path, seed=3).predict(obs)[0]
    assert np.array_equal(first, a3c.load(cartpole.path, seed=3).predict(obs)[0])
    assert abs(first.mean() - probs[1]) < 0.1  # the share of action 1 is its probability (400 draws)


def test_predict_holds_a_gsde_noise_of_its_own_and_leaves_acts_be(tmp_path):
    """Found by a probing review: predict on another batch size than act's redrew gSDE's noise that act held over its
    episode (act's next action changed), against "nor is the state act carries [changed]". predict holds its own
    noise from call to call, act its own, and reset() draws both again."""
    config = Config(env="Pendulum-v1", hidden_sizes=(16, 16), gsde=True, log_std_init=-1.0)
    agent = a3c.load(untrained_run(tmp_path / "run", config), seed=3)  # (small actions: inside the bounds, +-2)
    one, two = np.ones(3, dtype=np.float32) * 0.5, np.array([[0.1, -0.2, 0.3], [0.9, 0.1, -0.4]], dtype=np.float32)
    agent.reset(1)
    first = agent.act(one, deterministic=False)
    sampled, _ = agent.predict(two, deterministic=False)  # (a batch of 2: act's noise is for 1)
    assert np.array_equal(agent.act(one, deterministic=False), first)  # act's noise held
    again, _ = agent.predict(two, deterministic=False)
    assert np.array_equal(again, sampled)  # predict's own noise held from call to call
    agent.reset(1)
    assert not np.array_equal(agent.predict(two, deterministic=False)[0], sampled)  # reset draws predict's anew
    assert not np.array_equal(agent.act(one, deterministic=False), first)  # and act's


def test_predict_carries_the_recurrent_state_and_episode_start_resets_each_envs(tmp_path):
    """An LSTM agent with strong random weights, three envs: predict's actions over a sequence with episode starts
    (different ones per env) are those of act() played env by env with reset() at each episode start; the state comes
    back as [S, B, H], the state given is left as it was, and so is the state act carries."""
    config = Config(env="envs/Memory-v0", lstm=8, hidden_sizes=(16,))
    agent = a3c.load(untrained_run(tmp_path / "run", config, scale=1.5))
    rng = np.random.default_rng(0)
    steps, envs = 12, 3
    obs = rng.uniform(-1.0, 1.0, (steps, envs, 3)).astype(np.float32)
    starts = np.zeros((steps, envs), dtype=bool)
    starts[0] = True
    starts[4, 0] = starts[7, 1] = starts[7, 2] = starts[9, 0] = True

    expected = np.zeros((steps, envs), dtype=np.int64)
    for k in range(envs):
        for t in range(steps):
            if starts[t, k]:
                agent.reset()
            expected[t, k] = agent.act(obs[t, k])
    agent.reset()
    carried = tuple(s.clone() for s in agent.state)

    state = None
    got = np.zeros_like(expected)
    for t in range(steps):
        given = None if state is None else state.copy()
        got[t], new = agent.predict(obs[t], state=state, episode_start=starts[t], deterministic=True)
        assert new.shape == (4, envs, 8) and new.dtype == np.float32  # h, c of the actor's LSTM and the critic's
        if given is not None:
            assert np.array_equal(state, given)  # (what was passed in is not written to)
        state = new
    assert np.array_equal(got, expected)
    assert len(set(expected.reshape(-1).tolist())) == 2  # (both actions: a policy that depends on what it saw)
    assert all(torch.equal(a, b) for a, b in zip(carried, agent.state, strict=True))

    # without the resets the actions change: the state is what carried the difference
    state, ignored = None, np.zeros_like(expected)
    for t in range(steps):
        ignored[t], state = agent.predict(obs[t], state=state, episode_start=None, deterministic=True)
    assert not np.array_equal(ignored, expected)


def test_predict_names_a_state_or_episode_start_that_does_not_fit(tmp_path):
    agent = a3c.load(untrained_run(tmp_path / "run", Config(env="envs/Memory-v0", lstm=8, hidden_sizes=(16,))))
    obs = np.zeros((3, 3), dtype=np.float32)
    _, state = agent.predict(obs)
    with pytest.raises(ValueError, match=r"state of shape \(4, 2, 8\) does not fit this recurrent policy \(4, 3, 8\)"):
        agent.predict(obs, state=state[:, :2])
    with pytest.raises(ValueError, match=r"episode_start of shape \(2,\) does not fit 3 observations"):
        agent.predict(obs, state=state, episode_start=np.ones(2, dtype=bool))


# -- SB3's evaluate_policy on a3c agents ----------------------------------------------------------------------------
class SeededResets(gym.Wrapper):
    """Reset with the given seeds in turn (a VecEnv's resets pass none): the episodes a3c.evaluate plays."""

    def __init__(self, env: gym.Env, seeds: list[int]) -> None:
        super().__init__(env)
        self.seeds = list(seeds)

    def reset(self, *, seed=None, options=None):
        if seed is None and self.seeds:
            seed = self.seeds.pop(0)
        return self.env.reset(seed=seed, options=options)


def sb3_returns(agent: Agent, seeds_per_env: list[list[int]]) -> list[float]:
    """evaluate_policy(agent, VecEnv) over envs made as a3c.evaluate makes them (Monitor-wrapped, as SB3 advises),
    each resetting with its seeds; the returns sorted (evaluate_policy lists them as episodes finish)."""
    sb3_eval = pytest.importorskip("stable_baselines3.common.evaluation")
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.vec_env import DummyVecEnv

    envs = make_eval_envs(agent.config, len(seeds_per_env))
    venv = DummyVecEnv([lambda e=e, s=s: Monitor(SeededResets(e, s)) for e, s in zip(envs, seeds_per_env, strict=True)])
    episodes = sum(len(s) for s in seeds_per_env)
    returns, _ = sb3_eval.evaluate_policy(agent, venv, n_eval_episodes=episodes, return_episode_rewards=True)
    venv.close()
    return sorted(float(r) for r in returns)


@pytest.fixture(scope="module")
def atari_run(tmp_path_factory):
    pytest.importorskip("ale_py", reason="Atari needs the [atari] extra (.ci/run installs it)")
    # an untrained Nature CNN (the equality of the two scores needs no skill), games cut at 2,000 frames (500 steps)
    config = Config(env="ALE/Pong-v5", env_kwargs={"max_num_frames_per_episode": 2000}, eval_episodes=3, seed=4)
    return untrained_run(tmp_path_factory.mktemp("pong") / "run", config)


@pytest.mark.parametrize("kind", ["discrete-mlp", "continuous", "atari-cnn", "lstm"])
def test_sb3_evaluate_policy_scores_what_a3c_evaluate_scores_on_the_same_seeds(kind, request):
    """evaluate_policy plays one episode per env of a VecEnv whose env k resets with a3c.evaluate's k-th seed (the
    run's evaluation seeds, eval_seeds): the same episodes, batched as a3c.evaluate batches them (all in lockstep),
    deterministic actions. Same returns, same mean (up to Monitor's rounding of a return to 6 decimals)."""
    pytest.importorskip("stable_baselines3")
    fixture = {"discrete-mlp": "cartpole", "continuous": "pendulum", "atari-cnn": "atari_run", "lstm": "memory"}[kind]
    value = request.getfixturevalue(fixture)
    run_dir = value if kind == "atari-cnn" else run_dir_of(value)
    episodes = 3 if kind == "atari-cnn" else 8
    ours = evaluate(run_dir, episodes=episodes)
    agent = a3c.load(run_dir)
    theirs = sb3_returns(agent, [[s] for s in eval_seeds(agent.config.seed, episodes)])
    assert theirs == pytest.approx(sorted(ours["returns"]), abs=1e-6)
    assert np.mean(theirs) == pytest.approx(ours["mean_return"], abs=1e-6)
    print(
        f"\n{kind} ({agent.config.env}): evaluate_policy {np.mean(theirs):.6f}, a3c.evaluate {ours['mean_return']:.6f}"
    )
    if kind != "continuous":
        assert theirs == sorted(ours["returns"])  # (integer rewards: exactly)


def test_sb3_evaluate_policy_resets_an_lstm_between_episodes_of_one_env(tmp_path):
    """Two envs, eight episodes each: evaluate_policy starts each env's later episodes through episode_start, and
    scores them as a3c's episode loop does with two envs in lockstep (an LSTM with strong random weights: what it
    carried over from the episode before would change its actions)."""
    pytest.importorskip("stable_baselines3")
    config = Config(env="envs/Memory-v0", lstm=8, hidden_sizes=(16,))
    agent = a3c.load(untrained_run(tmp_path / "run", config, scale=1.5))
    seeds = eval_seeds(5, 16)
    theirs = sb3_returns(agent, [seeds[0::2], seeds[1::2]])
    ours = run_episodes(agent, make_eval_envs(agent.config, 2), seeds).returns
    assert theirs == sorted(ours.tolist())
