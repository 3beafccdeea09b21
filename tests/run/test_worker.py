"""The worker loop, run in this process (no other processes): what a rollout records, where episodes end by
termination and by truncation, what reaches the board, and that an update moves the shared parameters; under
--algo ppo, a pull before every minibatch, --max-policy-lag counting other workers' pushes only (and its drops
counted), no short minibatch, samples with non-finite targets left out (not the whole rollout's updates skipped).
That the gradient it pushes is its objective's, on every update path, is the conformance test's
(tests/learn/update/test_paths.py); the learn loop's order with a fake exchange: tests/run/test_learn_loop.py."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from worker_rig import ScriptedEnv, make_worker, worker_spec

from a3c.learn.model import build_model, model_shape
from a3c.record.checkpoint import load_checkpoint, save_checkpoint
from a3c.record.resume import check_compatible
from a3c.record.rows import FIELD, Stat
from a3c.run.board import BoardReader
from a3c.run.worker import RANK_ENV, Worker
from a3c.spec.config import Config
from a3c.spec.environment import LIFE_LOST
from a3c.spec.seeding import WorkerSeeds


def test_rollout_records_termination_truncation_and_final_observation():
    worker, store = make_worker()
    worker.rollout()
    worker.publish()
    for k in range(2):  # both envs follow the same script
        # episode 0: steps t=0,1,2, terminated at t=2; episode 1: t=3..6, truncated at t=6 (time limit 4)
        assert worker.terminated[:, k].tolist() == [0, 0, 1, 0, 0, 0, 0, 0]
        assert worker.truncated[:, k].tolist() == [0, 0, 0, 0, 0, 0, 1, 0]
        # the final observation of the truncated episode is kept (for the bootstrap), not the reset one
        assert worker.final_obs[6, k].tolist() == [4.0, 1.0]
        # the observation after a step that ended an episode is the next episode's first
        assert worker.obs[3, k].tolist() == [0.0, 1.0]
        assert worker.obs[7, k].tolist() == [0.0, 2.0]
        assert worker.obs[8, k].tolist() == [1.0, 2.0]  # the boundary observation, after the last step
    assert worker.rewards.eq(1.0).all()
    assert store.board.global_step() == 16
    episodes = BoardReader(store.board).drain()
    assert [(e.index, e["return"], e["length"]) for e in episodes] == [
        (0, 3.0, 3),
        (1, 3.0, 3),
        (2, 4.0, 4),
        (3, 4.0, 4),
    ]
    assert all(np.isnan(e["loss"]) for e in episodes)  # no update yet: no loss to report
    assert [e["global_step"] for e in episodes] == [6, 6, 14, 14]


def test_update_moves_the_shared_parameters_and_records_losses():
    worker, store = make_worker()
    before = store.params.clone()
    worker.step()  # pull, rollout, update, publish
    assert store.optimizer.step_count() == 1
    assert not torch.equal(store.params, before)
    assert np.isfinite(worker.last_loss).all()
    worker.rollout()  # the episode that ends now was partly trained on: its row carries the update's losses
    worker.publish()
    rows = BoardReader(store.board).drain()
    assert np.isfinite(rows[-1].values[FIELD["loss"]])


def test_rollouts_continue_across_the_boundary():
    worker, _ = make_worker(envs_per_worker=1, n_steps=2)
    worker.rollout()
    assert worker.obs[0, 0].tolist() == [0.0, 0.0]  # the reset observation
    assert worker.obs[2, 0].tolist() == [2.0, 0.0]
    worker.rollout()  # starts from where the last one stopped: t=2 terminates episode 0
    assert worker.obs[0, 0].tolist() == [2.0, 0.0]
    assert worker.terminated[:, 0].tolist() == [1, 0]
    assert worker.obs[2, 0].tolist() == [1.0, 1.0]


def test_first_rollout_starts_from_the_reset_observations():
    """Bug (f374bab): the reset observations went to obs[0], then the first rollout copied obs[T] (zeros) over them,
    so every worker incarnation's first rollout acted and trained on all-zero observations."""
    worker, _ = make_worker(env="CartPole-v1", envs_per_worker=3, n_steps=4)
    envs = [gym.make("CartPole-v1") for _ in range(3)]
    expected = [env.reset(seed=worker_seeds().env(k))[0] for k, env in enumerate(envs)]
    worker.rollout()
    np.testing.assert_array_equal(worker.obs[0].numpy(), np.stack(expected))
    assert worker.obs[0].abs().sum() > 0


def worker_seeds(seed=1):
    return WorkerSeeds(seed, 0, 0, 0)


def test_action_sampler_is_independent_of_the_env_streams():
    """Bug (f374bab): the sampler and env 0 were both seeded with seed + rank, so they drew the same numbers: the
    first action was "right" exactly when the cart started right of centre. Independent streams agree ~50%."""
    agree = 0
    n = 400
    for seed in range(n):
        seeds = WorkerSeeds(seed, 0, 0, 0)
        env = gym.make("CartPole-v1")
        x = env.reset(seed=seeds.env(0))[0][0]
        u = seeds.rng.random()  # what the sampler draws first (a near-uniform policy: right when u >= 0.5)
        agree += (u >= 0.5) == (x > 0)
    assert 0.4 < agree / n < 0.6


def test_normalised_observations_and_scaled_rewards_reach_the_loss_while_returns_stay_raw():
    worker, coordinator = make_worker(
        env="CartPole-v1", envs_per_worker=4, n_steps=16, normalize_obs=True, normalize_reward=True
    )
    worker.step()
    worker.step()
    obs = worker.obs[1:].reshape(-1, 4).numpy()
    assert np.abs(obs.mean(0)).max() < 1.0 and 0.2 < obs.std(0).min() < 3.0  # ~ zero mean, unit variance
    assert not np.allclose(worker.rewards.numpy(), 1.0)  # CartPole's reward 1, divided by the return's std
    assert coordinator.run.obs_stats.merged().count == 4 * (1 + 2 * 16)  # resets + every step, counted once
    rows = BoardReader(coordinator.board).drain()
    assert all(r["return"] == r["length"] for r in rows)  # episode returns in CartPole's own units
    snapshot = coordinator.snapshot()
    assert set(snapshot["obs_stats"]) >= {"count", "mean"} and "reward_stats" in snapshot


def test_a_nan_observation_skips_its_update_and_never_reaches_the_normalisation_statistics(monkeypatch):
    """envs/Faulty-v0 gives a NaN observation at each env's 3rd step: with --normalize-obs the model sees NaN there
    (its update skipped, as without normalisation), the shared statistics see every other observation and stay
    finite, and the two left-out samples are counted in the worker's stats row."""
    monkeypatch.setenv(RANK_ENV, "0")  # the worker sets it for its envs; undone after the test
    worker, coordinator = make_worker(
        env="envs/Faulty-v0", env_kwargs={"nan_at": 3, "nan_for": 1}, n_steps=8, normalize_obs=True
    )
    worker.step()
    assert torch.isnan(worker.obs[3]).all() and worker.stats[Stat.SKIPPED] == 1
    worker.step()  # no NaN in this rollout: applied
    assert worker.stats[Stat.UPDATES] == 1 and worker.stats[Stat.NONFINITE_SAMPLES] == 2
    merged = coordinator.run.obs_stats.merged()
    assert merged.count == 2 * (1 + 2 * 8) - 2  # resets + every step of both envs, but the two NaN ones
    assert np.isfinite(merged.mean).all() and np.isfinite(merged.var).all()
    snapshot = coordinator.snapshot()
    assert all(torch.isfinite(v).all() for v in snapshot["obs_stats"].values())  # what a checkpoint saves
    assert snapshot["worker_stats"][0, Stat.NONFINITE_SAMPLES] == 2


@pytest.mark.parametrize("normalize_obs", [False, True])
def test_the_first_conv_sees_pixels_in_0_1_or_the_normalised_observations(normalize_obs):
    """uint8 images: without --normalize-obs the model scales the worker's raw pixels by 1/255; with it the worker
    feeds normalised floats, and the first conv sees them as they are (not divided by 255 a second time)."""
    worker, _ = make_worker(env="envs/Spaces-v0", env_kwargs={"obs": "image"}, n_steps=4, normalize_obs=normalize_obs)
    seen = []
    conv = worker.model.actor.convs[0]
    handle = conv.register_forward_pre_hook(lambda module, args: seen.append(args[0].detach().clone()))
    try:
        worker.step()
    finally:
        handle.remove()
    fed = worker.obs[:4].reshape(-1, *worker.obs.shape[2:])  # [T * K, 10, 12, 3]: the rollout's acting inputs
    expected = fed.float().permute(0, 3, 1, 2) / (1.0 if normalize_obs else 255.0)
    torch.testing.assert_close(torch.cat(seen[:4]), expected)  # the first four forwards: acting, one per step
    assert 0.9 < float(expected.abs().max()) <= (10.0 if normalize_obs else 1.0)  # pixels in [0, 1]; or ~N(0, 1)


# -- every space combination; the recurrent state ------------------------------------------------------------------
COMBINATIONS = [
    (obs, action, lstm, False)
    for obs in ("box", "dict", "tuple", "image", "image_chw")
    for action in ("discrete", "multidiscrete", "box")
    for lstm in (0, 4)
] + [(obs, "box", lstm, True) for obs in ("box", "image") for lstm in (0, 4)]  # --gsde (Box actions)


@pytest.mark.parametrize(
    "obs, action, lstm, gsde",
    COMBINATIONS,
    ids=[f"{o}-{a}-lstm{n}" + ("-gsde" if g else "") for o, a, n, g in COMBINATIONS],
)
def test_every_space_combination_trains_and_round_trips_through_a_checkpoint(tmp_path, obs, action, lstm, gsde):
    worker, store = make_worker(
        env="envs/Spaces-v0",
        env_kwargs={"obs": obs, "action": action},
        n_steps=5,
        lstm=lstm,
        hidden_sizes=(8,),
        gsde=gsde,
    )
    before = store.params.clone()
    for _ in range(3):
        worker.step()
    assert store.optimizer.step_count() == 3 and not torch.equal(store.params, before)
    assert np.isfinite(worker.last_loss).all()
    spec = worker_spec(worker)
    path = tmp_path / "latest.pt"
    save_checkpoint(
        path,
        {
            "model": store.params.clone(),
            "obs_dim": spec.obs_dim,
            "n_actions": worker.dist.param_dim,
            "spaces": spec.describe(),
            "config": worker.config.to_dict(),
        },
    )
    payload = load_checkpoint(path)
    loaded_config = Config.from_dict(payload["config"])
    n_params, param_dim = model_shape(spec, loaded_config)
    check_compatible(payload, spec, n_params, str(path), param_dim)
    model, dist = build_model(spec, loaded_config)
    torch.nn.utils.vector_to_parameters(payload["model"], model.parameters())
    worker.model.load_state_dict(model.state_dict())  # the worker's copy, as pulled: the same network
    worker.params.copy_(store.params)
    obs_batch = worker.obs[0]
    state = model.initial_state(obs_batch.shape[0])
    ours, _, _ = model(obs_batch, state)
    theirs, _, _ = worker.model(obs_batch, state)
    torch.testing.assert_close(ours, theirs)
    for action in dist.env_actions(dist.mode(ours.detach())):  # deterministic actions the env takes
        assert spec.action_space.contains(np.asarray(action, dtype=spec.action_space.dtype))


@pytest.mark.parametrize("gsde", [False, True], ids=["gaussian", "gsde"])
def test_the_clipped_log_prob_trains_the_box_policy(gsde):
    """--clipped-log-prob through a worker's updates (the Gaussian's closed-form gradient; gSDE's autograd), with a
    policy wide enough that samples pass Spaces-v0's bounds [-1, 1]: the updates apply and every loss is finite
    (the log-prob's math against a reference: tests/learn/test_distributions.py)."""
    worker, store = make_worker(
        env="envs/Spaces-v0",
        env_kwargs={"obs": "box", "action": "box"},
        n_steps=5,
        hidden_sizes=(8,),
        gsde=gsde,
        clipped_log_prob=True,
        log_std_init=1.0,
    )
    assert worker.dist.clipped_log_prob
    before = store.params.clone()
    beyond = 0
    for _ in range(3):
        worker.step()
        beyond += int((worker.actions.abs() > 1.0).sum())
    assert store.optimizer.step_count() == 3 and not torch.equal(store.params, before)
    assert np.isfinite(worker.last_loss).all() and beyond > 0


def test_lstm_state_is_reset_at_episode_ends_inside_a_rollout():
    """Scripted episodes end at steps 2 (terminated) and 6 (truncated) of an 8-step rollout: the policy that acted
    on obs[3] and obs[7] (first observations of new episodes) must be the one of a fresh state, and the update's
    unroll must reproduce what acting computed."""
    worker, _ = make_worker(lstm=8, hidden_sizes=(8,))
    acted = []
    policy = worker.model.policy

    def recording_policy(obs, state):
        params, new_state = policy(obs, state)
        acted.append(params.clone())
        return params, new_state

    worker.model.policy = recording_policy
    worker.rollout()
    worker.rollout()  # the second rollout starts mid-episode, from the state the first left
    T, K = worker.terminated.shape
    model = worker.model
    with torch.no_grad():
        fresh = model.initial_state(K)
        assert any(s.abs().sum() > 0 for s in worker.start_state)  # carried over, not reset, at the boundary
        params, _, _ = model.unroll(worker.obs, worker.start_state, torch.maximum(worker.terminated, worker.truncated))
    torch.testing.assert_close(params.view(T, K, -1), torch.stack(acted[T:]), rtol=1e-5, atol=1e-6)
    # second rollout, env 0: steps 0..7 are t = 8..15 of the script; an episode ends at rollout steps 2 and 6
    ends = torch.maximum(worker.terminated, worker.truncated)[:, 0].nonzero().flatten().tolist()
    assert ends, "the script has episode ends in every 8-step rollout"
    with torch.no_grad():
        for end in ends:
            if end + 1 < T:
                expected, _ = model.policy(worker.obs[end + 1], fresh)  # a new episode: a fresh state
                torch.testing.assert_close(acted[T + end + 1], expected)
                carried, _ = model.policy(worker.obs[end + 1], worker.start_state)
                assert not torch.allclose(acted[T + end + 1], carried)


def test_atari_worker_trains_on_stacked_uint8_frames_and_reports_whole_games():
    pytest.importorskip("ale_py")
    worker, store = make_worker(env="ALE/Pong-v5", envs_per_worker=1, n_steps=5, lstm=16)
    assert worker.obs.dtype == torch.uint8 and worker.obs.shape == (6, 1, 4, 84, 84)
    assert worker.clip_rewards
    worker.step()
    assert store.optimizer.step_count() == 1 and np.isfinite(worker.last_loss).all()
    assert worker.obs[-1].float().mean() > 0  # real frames, not zeros


@pytest.fixture
def one_thread():
    """torch on one thread, as in a worker (batch-1 convolutions on several threads crawl on a busy machine)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_an_atari_worker_on_the_vector_env_ends_lives_for_the_learner_and_reports_whole_games(one_thread):
    """--env-backend ale-vector through the worker's loop (the backend itself: tests/spec/test_atari_vector.py):
    each env's stack moves on by one frame a step except where its game restarted, lost lives are terminals of the
    learner's episode while games are reported whole, and every step is in a reported game or the one going on."""
    pytest.importorskip("ale_py.vector_env")
    T, K, rollouts = 25, 1, 24  # (a random game of Breakout lasts ~140-400 steps, by its seed)
    worker, store = make_worker(env="ALE/Breakout-v5", envs_per_worker=K, n_steps=T, env_backend="ale-vector")
    terminals, episodes, board = 0, [], BoardReader(store.board)
    for _ in range(rollouts):
        worker.rollout()
        worker.publish()
        episodes += board.drain()
        obs, terminated = worker.obs.numpy(), worker.terminated.numpy()
        terminals += int(terminated.sum())
        for t in range(T):
            for k in range(K):
                restarted = np.array_equal(obs[t + 1, k], np.repeat(obs[t + 1, k, -1:], 4, axis=0))
                if not restarted:  # (a game's first stack is its first frame four times)
                    assert np.array_equal(obs[t + 1, k, :-1], obs[t, k, 1:])
    assert len(episodes) >= 1 and terminals >= 5 * len(episodes)  # Breakout: 5 lives, a terminal each
    assert sum(e["length"] for e in episodes) + worker.ep_length.sum() == rollouts * T * K


class LivesEnv(ScriptedEnv):
    """Games of 6 steps, reward 1 each; the learner's episode ends (terminated, marked a lost life) at step 2 and 4."""

    def step(self, action):
        self.t += 1
        info = {LIFE_LOST: True} if self.t in (2, 4) else {}
        return self._obs(), 1.0, self.t in (2, 4, 6), False, info

    def reset(self, *, seed=None, options=None):
        if self.t in (2, 4):  # a lost life: the game goes on
            return self._obs(), {}
        return super().reset(seed=seed, options=options)


gym.register("LivesForWorkerTest-v0", entry_point=LivesEnv)


@pytest.mark.parametrize("n_steps", [1, 2, 3, 5])
def test_episodes_that_span_rollouts_are_reported_whole(n_steps):
    """Lengths are counted once a rollout (a3c.run.worker's rollout): an episode over several rollouts, or ending
    inside one and going on in the next, is reported with its own length and return whatever the rollout length."""
    worker, store = make_worker(n_steps=n_steps)
    for _ in range(14 // n_steps + 1):  # episodes of 3, 4, 3, 4 steps: 14 steps and more
        worker.rollout()
    worker.publish()
    episodes = BoardReader(store.board).drain()
    assert [(e["return"], e["length"]) for e in episodes][:8] == [(3.0, 3)] * 2 + [(4.0, 4)] * 2 + [(3.0, 3)] * 2 + [
        (4.0, 4)
    ] * 2


class OffShapeEnv(ScriptedEnv):
    """The script's observations as [1, 2] arrays for a (2,) space: same size, another shape."""

    def _obs(self):
        return super()._obs().reshape(1, 2)


gym.register("OffShapeForWorkerTest-v0", entry_point=OffShapeEnv, max_episode_steps=4)


@pytest.mark.filterwarnings("ignore")  # gymnasium's checker warns about the shape
def test_observations_of_another_shape_of_the_same_size_are_reshaped():
    worker, _ = make_worker(env="OffShapeForWorkerTest-v0")
    reference, _ = make_worker()
    for w in (worker, reference):
        w.rollout()
    assert worker.obs.equal(reference.obs)


def test_lost_lives_end_the_learners_episode_but_games_are_reported_whole():
    worker, store = make_worker(env="LivesForWorkerTest-v0", envs_per_worker=1, n_steps=12)
    worker.rollout()
    worker.publish()
    assert worker.terminated[:, 0].tolist() == [0, 1, 0, 1, 0, 1] * 2  # three terminals per game for the learner
    episodes = BoardReader(store.board).drain()
    assert [(e["return"], e["length"]) for e in episodes] == [(6.0, 6), (6.0, 6)]


OVERFLOW_SCRIPT = """
import sys, torch
sys.path.insert(0, {here!r})
from worker_rig import make_worker
from a3c.record.rows import Stat
worker, coordinator = make_worker(env="CartPole-v1")
params = coordinator.run.params
backward = worker.path.backward
def huge(*args):  # every gradient entry finite, their float32 sum of squares not
    backward(*args)
    worker.grads_np[:] = 1e30
worker.path.backward = huge
before = params.clone()
worker.step()
assert worker.stats[Stat.UPDATES] == 1 and worker.stats[Stat.SKIPPED] == 0, worker.stats
assert torch.isfinite(params).all() and not torch.equal(params, before)
print("applied")
"""


def test_a_gradient_whose_float32_square_sum_overflows_is_clipped_and_applied_without_a_warning():
    """The gradient's norm is a float32 dot, whose overflow numpy reports as a RuntimeWarning: the worker measures
    it again in float64, clips and applies the update, and the warning (a3c.learn.update.step filters it) never reaches
    the terminal. In a fresh interpreter with warnings shown, since pytest resets filters between tests."""
    proc = subprocess.run(
        [sys.executable, "-W", "default", "-c", OVERFLOW_SCRIPT.format(here=str(Path(__file__).parent.parent))],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0 and "applied" in proc.stdout, proc.stderr[-3000:]
    assert "Warning" not in proc.stderr, proc.stderr


class CallLog:
    """A WorkerChannel that logs each pull (with the weights it gave) and each push, then does them."""

    def __init__(self, inner):
        self.inner, self.calls = inner, []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def pull(self, dest):
        at = self.inner.pull(dest)
        self.calls.append(("pull", dest.clone()))
        return at

    def push(self, grad, pulled_at, lr):
        self.calls.append(("push", grad.clone()))
        return self.inner.push(grad, pulled_at, lr)


def test_ppo_pushes_each_minibatch_gradient_with_a_pull_before_each():
    """--algo ppo: n_epochs x minibatches gradients a rollout, each computed on weights pulled just before it (the
    shared model has moved by the push before: the weights differ pull to pull), each pushed as computed."""
    worker, store = make_worker(algo="ppo", n_steps=8, envs_per_worker=2, minibatch_size=6, n_epochs=2)
    log = CallLog(worker.channel)
    worker.channel = log
    seen = []
    gradient = worker.learner.gradient

    def recording(rollout, minibatch):
        seen.append(worker.params.clone())  # the weights this gradient is computed on
        return gradient(rollout, minibatch)

    worker.learner.gradient = recording
    worker.step()
    kinds = [kind for kind, _ in log.calls]
    assert kinds == ["pull"] + ["pull", "push"] * 4  # the rollout's pull, then 2 epochs x 16 // 6 minibatches
    assert store.optimizer.step_count() == 4 and worker.stats[Stat.UPDATES] == 4
    pulls = [weights for kind, weights in log.calls if kind == "pull"][1:]
    for before, after in zip(pulls, pulls[1:], strict=False):
        assert not torch.equal(before, after)  # the push between moved the shared model
    for used, pulled in zip(seen, pulls, strict=True):
        assert torch.equal(used, pulled)


def test_ppo_with_one_worker_drops_nothing_at_any_max_policy_lag():
    """--max-policy-lag counts the shared optimizer's steps that were not this worker's own pushes of the rollout:
    alone, its lag is always 0, so --max-policy-lag 1 takes every minibatch (it used to count its own pushes and drop
    the rest of the rollout after the second)."""
    worker, store = make_worker(
        algo="ppo", n_steps=8, envs_per_worker=4, minibatch_size=8, n_epochs=2, max_policy_lag=1
    )
    worker.step()
    worker.step()
    assert store.optimizer.step_count() == 2 * 2 * 4 and worker.stats[Stat.UPDATES] == 16
    assert worker.stats[Stat.DROPPED_MINIBATCHES] == 0 and worker.stats[Stat.LAG_SUM] == 0


class OthersPush(CallLog):
    """A channel on which another worker pushes ``every`` optimizer steps before each of this worker's minibatch
    pulls (the rollout's own pull excepted)."""

    def __init__(self, inner, optimizer, every):
        super().__init__(inner)
        self.optimizer, self.every, self.pulls = optimizer, every, 0

    def pull(self, dest):
        if self.pulls:
            for _ in range(self.every):
                self.optimizer.step(torch.zeros_like(dest), 0, 0.0)  # (lr 0: the count moves, the weights do not)
        self.pulls += 1
        return super().pull(dest)


def test_ppo_drops_the_rest_of_a_rollout_once_others_pushed_past_max_policy_lag():
    """Another worker pushes 1 step before each minibatch pull: minibatch k's lag is k + 1 (others' steps since acting,
    this worker's own k not counted), so --max-policy-lag 2 takes minibatches 0 and 1, drops the other 4 of the 6 at
    the third's pull, and counts them."""
    worker, store = make_worker(
        algo="ppo", n_steps=8, envs_per_worker=4, minibatch_size=16, n_epochs=3, max_policy_lag=2
    )
    worker.channel = OthersPush(worker.channel, store.optimizer, 1)
    worker.step()
    assert worker.stats[Stat.UPDATES] == 2 and worker.stats[Stat.DROPPED_MINIBATCHES] == 4
    assert store.optimizer.step_count() == 2 + 3  # this worker's 2, the others' 3 (before each of its 3 pulls)


def test_a_ppo_rollout_of_one_sample_more_than_a_minibatch_takes_one_minibatch():
    """65 samples, --minibatch-size 64: one minibatch of 65 an epoch, not [64, 1] (whose 1-sample minibatch pushed a
    full step with a normalised advantage of 0)."""
    worker, store = make_worker(
        algo="ppo", n_steps=13, envs_per_worker=5, minibatch_size=64, n_epochs=2, normalize_advantage=True
    )
    worker.step()
    assert store.optimizer.step_count() == 2 and worker.stats[Stat.UPDATES] == 2


@pytest.mark.filterwarnings("ignore:.*not within the observation space")
def test_one_nan_observation_leaves_its_samples_out_of_ppo_s_minibatches_not_the_rollout(monkeypatch):
    """envs/Faulty-v0's NaN observation at each env's 3rd step: GAE carries the NaN back through the episode's earlier
    steps, so nearly every minibatch held a non-finite sample and was skipped (and --max-skipped-in-row ended the run).
    Those samples are left out of every minibatch and counted; every minibatch is pushed, none skipped."""
    monkeypatch.setenv(RANK_ENV, "0")  # the worker sets it for its envs; undone after the test
    worker, store = make_worker(
        algo="ppo",
        env="envs/Faulty-v0",
        env_kwargs={"nan_at": 3, "nan_for": 1},
        n_steps=8,
        envs_per_worker=8,
        minibatch_size=8,
        n_epochs=2,
    )
    worker.step()
    assert torch.isnan(worker.obs[3]).all()
    assert worker.stats[Stat.SKIPPED] == 0 and worker.stats[Stat.SKIPPED_IN_ROW] == 0
    dropped = worker.stats[Stat.DROPPED_SAMPLES]
    assert 8 <= dropped < 64  # at least the 8 NaN observations' samples, not all
    assert worker.stats[Stat.UPDATES] == store.optimizer.step_count() == 2 * ((64 - dropped) // 8)
    assert np.isfinite(store.params.numpy()).all()


@pytest.mark.filterwarnings("ignore:.*not within the observation space")
def test_the_dropped_counts_go_on_across_a_worker_s_restart_and_a_resume(monkeypatch):
    """A restarted worker (the next incarnation of the rank, on the same stats row) goes on from the counts its
    predecessor published, and a resumed run from its checkpoint's: the samples left out for non-finite targets and
    the minibatches dropped by --max-policy-lag, like every other counter of the row."""
    monkeypatch.setenv(RANK_ENV, "0")
    settings = dict(
        algo="ppo",
        env="envs/Faulty-v0",
        env_kwargs={"nan_at": 3, "nan_for": 1},
        n_steps=8,
        envs_per_worker=8,
        minibatch_size=8,
        n_epochs=2,
        max_policy_lag=1,
    )
    worker, coordinator = make_worker(**settings)
    worker.channel = OthersPush(worker.channel, coordinator.optimizer, 1)
    worker.step()
    samples, minibatches = worker.stats[Stat.DROPPED_SAMPLES], worker.stats[Stat.DROPPED_MINIBATCHES]
    assert samples > 0 and minibatches > 0
    restarted = Worker(
        0, coordinator.channel(0), worker.config, worker_spec(worker), time.time(), WorkerSeeds(1, 0, 0, 1)
    )
    restarted.channel = OthersPush(restarted.channel, coordinator.optimizer, 1)
    restarted.step()  # its first rollout: the NaN observation at each env's 3rd step again
    assert restarted.stats[Stat.DROPPED_SAMPLES] == 2 * samples
    assert restarted.stats[Stat.DROPPED_MINIBATCHES] == 2 * minibatches
    # and across a resume: the checkpoint's stats rows restored, the counters kept
    restarted.publish()
    payload = coordinator.snapshot()
    _, resumed = make_worker(**settings)
    resumed.restore(payload)
    row = resumed.channel(0).load_stats()
    assert row[Stat.DROPPED_SAMPLES] == 2 * samples and row[Stat.DROPPED_MINIBATCHES] == 2 * minibatches


def test_ppo_trains_an_lstm_and_every_action_family():
    """gSDE's Gaussian (its noise drawn per rollout; the log-probability from the params acting kept) and a
    MultiDiscrete policy on an LSTM core (minibatches of whole envs)."""
    for settings in (
        dict(env="envs/Spaces-v0", env_kwargs={"obs": "box", "action": "box"}, gsde=True),
        dict(env="envs/Spaces-v0", env_kwargs={"obs": "box", "action": "multidiscrete"}, lstm=4),
    ):
        worker, store = make_worker(algo="ppo", n_steps=5, minibatch_size=5, n_epochs=1, hidden_sizes=(8,), **settings)
        before = store.params.clone()
        worker.step()
        # 10 samples in 2 minibatches of 5; with the LSTM, minibatches of 5 // 5 = 1 whole env of the 2
        assert store.optimizer.step_count() == 2 and np.isfinite(worker.last_loss).all()
        assert not torch.equal(store.params, before)
