"""a3c.record.agent: a3c.load round trips (act/value shapes, the deterministic action is the model's argmax), value() in
the env's reward units against a closed form, the episode loop, and loading errors."""

import json
import sys

import gymnasium as gym
import numpy as np
import pytest
import torch
from countdown_env import LENGTH, true_value

import a3c
from a3c.evaluate import evaluate
from a3c.learn.model import build_model, flatten_parameters
from a3c.record.agent import Agent, eval_samplers, eval_seeds, make_eval_envs, run_episodes
from a3c.record.checkpoint import save_checkpoint
from a3c.spec.config import Config
from a3c.spec.environment import EnvSpec, describe_env
from a3c.spec.errors import UserError


def _checkpoint(run_dir, seed=0, name="latest.pt", config=None, **extra):
    """A run directory whose checkpoint holds a randomly initialised model (CartPole's unless ``config`` says
    otherwise); returns (path, model)."""
    config = config or Config(env="CartPole-v1", hidden_sizes=(16, 16))
    spec = describe_env(config.env)
    torch.manual_seed(seed)
    model, _ = build_model(spec, config)
    params, _ = flatten_parameters(model)
    (run_dir / "checkpoints").mkdir(parents=True, exist_ok=True)
    (run_dir / "config.json").write_text(json.dumps(config.to_dict()))
    path = run_dir / "checkpoints" / name
    payload = {"model": params.clone(), "config": config.to_dict(), "spaces": spec.describe(), "global_step": 123}
    save_checkpoint(path, {**payload, **extra})
    return path, model


def test_load_round_trip_act_and_value(tmp_path):
    path, model = _checkpoint(tmp_path / "run")
    obs = np.random.default_rng(0).normal(size=(32, 4)).astype(np.float32)
    with torch.no_grad():
        logits, values, _ = model(torch.from_numpy(obs))
    for agent in (a3c.load(tmp_path / "run"), a3c.load(path)):
        assert isinstance(agent, Agent) and agent.global_step == 123
        assert agent.config.hidden_sizes == (16, 16) and agent.action_space == gym.spaces.Discrete(2)
        batch = agent.act(obs)
        assert batch.shape == (32,) and np.array_equal(batch, logits.argmax(-1).numpy())
        one = agent.act(obs[3])
        assert isinstance(one, int) and one == int(logits[3].argmax())
        v = agent.value(obs)
        assert v.shape == (32,) and np.allclose(v, values.numpy(), atol=1e-6)
        assert isinstance(agent.value(obs[0]), float) and agent.value(obs[0]) == pytest.approx(float(values[0]))
    # the policy of this random model is near uniform: sampling gives both actions, and a seed repeats them
    sampled = a3c.load(path, seed=5).act(np.repeat(obs[:1], 200, axis=0), deterministic=False)
    assert set(sampled.tolist()) == {0, 1}
    assert np.array_equal(sampled, a3c.load(path, seed=5).act(np.repeat(obs[:1], 200, axis=0), deterministic=False))


def test_load_takes_the_newest_intact_checkpoint_as_resume_does(tmp_path, capsys):
    """A run whose latest.pt is damaged (or older than a step file, as a write failing on a full disk leaves it):
    a3c.load takes the newest intact step-N.pt and says on stderr what it passed over; it used to read latest.pt
    alone and refuse the run (or hand back the older weights)."""
    run = tmp_path / "run"
    _, older = _checkpoint(run, seed=1, name="step-100.pt", global_step=100)
    _, newer = _checkpoint(run, seed=2, name="step-200.pt", global_step=200)
    _checkpoint(run, seed=3, name="latest.pt", global_step=150)  # older than step-200.pt
    obs = np.random.default_rng(0).normal(size=(8, 4)).astype(np.float32)
    with torch.no_grad():
        expected = newer(torch.from_numpy(obs))[1].numpy()
    agent = a3c.load(run)
    assert agent.global_step == 200 and np.allclose(agent.value(obs), expected, atol=1e-6)
    assert "loading checkpoints/step-200.pt (step 200)" in capsys.readouterr().err
    (run / "checkpoints" / "latest.pt").write_bytes(b"not a checkpoint")
    (run / "checkpoints" / "step-200.pt").write_bytes(b"damaged too")
    agent = a3c.load(run)
    assert agent.global_step == 100
    err = capsys.readouterr().err
    assert "loading checkpoints/step-100.pt" in err and "latest.pt" in err and "step-200.pt" in err


def test_act_rejects_observations_of_another_shape(tmp_path):
    path, _ = _checkpoint(tmp_path / "run")
    agent = a3c.load(path)
    with pytest.raises(ValueError, match=r"observation of shape \(3,\) does not fit the env's observations \(4,\)"):
        agent.act(np.zeros(3))
    with pytest.raises(ValueError, match="does not fit"):
        agent.value(np.zeros((2, 2, 4)))


def test_load_errors_name_the_fix(tmp_path):
    with pytest.raises(ValueError, match="no such run directory or checkpoint file"):
        a3c.load(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="has no checkpoints/latest.pt"):
        a3c.load(tmp_path / "empty")
    path, _ = _checkpoint(tmp_path / "run")
    with pytest.raises(ValueError, match="has no checkpoints/best.pt: the run did not evaluate"):
        a3c.load(tmp_path / "run", best=True)
    with pytest.raises(ValueError, match="--best takes a run directory"):
        a3c.load(path, best=True)
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="corrupt or not a torch file"):
        a3c.load(bad)
    other = tmp_path / "other.pt"
    save_checkpoint(other, {"model": torch.zeros(3)})
    with pytest.raises(ValueError, match="has no model or config"):
        a3c.load(other)


@pytest.mark.parametrize(
    "damage",
    [
        {"obs_stats": {"count": torch.tensor(5.0), "mean": torch.zeros(7), "var": torch.ones(7)}},  # another shape
        {"obs_stats": {"junk": 1}},
        {"reward_stats": {"mean": 0.0}},
    ],
)
def test_a_checkpoint_with_damaged_normalisation_statistics_is_one_line(tmp_path, damage):
    """Found in review: a traceback each (ValueError of numpy's broadcast, KeyError 'mean', KeyError 'count')."""
    config = Config(env="CartPole-v1", hidden_sizes=(16, 16), normalize_obs=True, normalize_reward=True)
    path, _ = _checkpoint(tmp_path / "run", config=config, **damage)
    with pytest.raises(UserError, match=f"{path}'s normalisation statistics do not fit its model"):
        a3c.load(path)


def test_a_checkpoint_whose_config_holds_a_value_of_the_wrong_type_is_one_line(tmp_path):
    """Found in review: config lstm = "x" raised torch's TypeError from inside the model's construction."""
    path, _ = _checkpoint(tmp_path / "run")
    payload = torch.load(path, weights_only=True)
    payload["config"]["lstm"] = "x"
    save_checkpoint(path, payload)
    with pytest.raises(UserError, match=r"config does not fit this a3c \(lstm must be an integer"):
        a3c.load(path)


def test_a_checkpoint_with_settings_this_a3c_does_not_know_is_refused(tmp_path):
    """Found in review: a setting of a newer a3c (one that shapes the model, say) was dropped unsaid, and the model
    built without it."""
    path, _ = _checkpoint(tmp_path / "run")
    payload = torch.load(path, weights_only=True)
    payload["config"]["future_setting"] = 3
    save_checkpoint(path, payload)
    with pytest.raises(UserError, match=r"holds settings this a3c does not know \(future_setting\): it was written"):
        a3c.load(path)


@pytest.mark.parametrize("seed", ["x", -1, 1.5])
def test_a_seed_numpy_cannot_take_is_one_line(tmp_path, seed):
    """Found by a probing review: a3c.load(run, seed="x") raised numpy's TypeError, seed=-1 its ValueError."""
    _checkpoint(tmp_path / "run")
    with pytest.raises(UserError, match=r"^seed must be an integer >= 0 \(got "):
        a3c.load(tmp_path / "run", seed=seed)


def test_best_checkpoint_carries_its_evaluation(tmp_path):
    _checkpoint(tmp_path / "run", name="best.pt", eval={"mean_return": 9.5, "global_step": 123})
    agent = a3c.load(tmp_path / "run", best=True)
    assert agent.evaluation["mean_return"] == 9.5 and agent.path.name == "best.pt"


def test_run_episodes_in_lockstep_equals_one_at_a_time(tmp_path):
    """Episodes played as one batch give what they give played one by one (the batch a row sits in does not
    change its action), and every episode of CartPole-v1 is accounted for."""
    path, _ = _checkpoint(tmp_path / "run", seed=3)
    agent = a3c.load(path)
    seeds = eval_seeds(7, 6)
    together = run_episodes(agent, make_eval_envs(agent.config, 6), seeds)
    alone = run_episodes(agent, make_eval_envs(agent.config, 1), seeds)
    assert np.array_equal(together.returns, alone.returns) and np.array_equal(together.lengths, alone.lengths)
    assert np.array_equal(together.returns, together.lengths)  # CartPole pays 1 per step
    assert len(set(together.returns.tolist())) > 1  # the seeds give different start states
    summary = together.summary()
    assert summary["episodes"] == 6 and summary["mean_return"] == pytest.approx(together.returns.mean())


@pytest.mark.parametrize("env, gsde", [("CartPole-v1", False), ("Pendulum-v1", False), ("Pendulum-v1", True)])
def test_sampled_episodes_are_the_same_in_lockstep_and_one_at_a_time(tmp_path, env, gsde):
    """Stochastic evaluation draws each episode's actions from that episode's own sampler (eval_samplers), so an
    episode samples the same actions whether it is played in a batch (a3c.evaluate, the evaluator) or alone
    (a3c.evaluate --video, one recording env): the video shows the episodes the numbers are of. gSDE's noise, held
    over an episode, is drawn from the episode's sampler too (a review found every row using the first row's)."""
    config = Config(env=env, hidden_sizes=(16, 16), gsde=gsde, eval_episodes=6)
    path, _ = _checkpoint(tmp_path / "run", seed=3, config=config)
    agent = a3c.load(path)
    seeds = eval_seeds(7, 6)
    together = run_episodes(agent, make_eval_envs(agent.config, 6), seeds, False, eval_samplers(7, 6))
    alone = run_episodes(agent, make_eval_envs(agent.config, 1), seeds, False, eval_samplers(7, 6))
    # (the same draws; a batch of 6 and of 1 may round the network's arithmetic differently in the last bits)
    assert np.allclose(together.returns, alone.returns, rtol=1e-6), (together.returns, alone.returns)
    assert np.array_equal(together.lengths, alone.lengths)
    assert len(set(together.returns.tolist())) > 1
    same_start = [seeds[0]] * 3  # one start state three times: only the samples differ
    three = run_episodes(agent, make_eval_envs(agent.config, 3), same_start, False, eval_samplers(7, 3))
    assert len(set(three.returns.tolist())) == 3, three.returns
    again = run_episodes(agent, make_eval_envs(agent.config, 3), seeds, False, eval_samplers(8, 6))
    assert not np.array_equal(again.returns, together.returns)  # (another seed: other samples)


def test_a_gsde_agent_draws_new_noise_for_each_episode(tmp_path):
    """Found by probing: a gSDE agent's exploration noise was drawn at its first sampled action and kept for good:
    reset() ("start new episodes") and later episodes played with one sampler took the same noise, so every
    sampled episode from one start state scored the same (three games: -1347.93 each). Within an episode the noise
    is held (the same state, the same action); each reset draws it again from the agent's sampler."""
    config = Config(env="Pendulum-v1", hidden_sizes=(16, 16), gsde=True)
    path, _ = _checkpoint(tmp_path / "run", seed=3, config=config)
    agent = a3c.load(path, seed=0)
    obs = np.array([0.5, -0.5, 0.1], dtype=np.float32)
    firsts = []
    for _ in range(3):
        agent.reset()
        first = agent.act(obs, deterministic=False)
        assert np.array_equal(agent.act(obs, deterministic=False), first)  # held over the episode
        firsts.append(float(first[0]))
    assert len(set(firsts)) == 3, firsts
    one_start = [eval_seeds(7, 1)[0]] * 4  # one start state, four episodes in two groups of two, one sampler
    played = run_episodes(agent, make_eval_envs(agent.config, 2), one_start, False, np.random.default_rng(5))
    assert len(set(played.returns.tolist())) == 4, played.returns


def test_run_episodes_still_takes_one_generator_for_every_row(tmp_path):
    """A script of a user's that gave run_episodes one sampler (``rng=``, or in its place) still runs: every row
    draws from it, as before per-episode samplers."""
    path, _ = _checkpoint(tmp_path / "run", seed=3)
    agent = a3c.load(path)
    seeds = eval_seeds(7, 4)
    by_name = run_episodes(agent, make_eval_envs(agent.config, 4), seeds, False, rng=np.random.default_rng(5))
    in_place = run_episodes(agent, make_eval_envs(agent.config, 4), seeds, False, np.random.default_rng(5))
    assert np.array_equal(by_name.returns, in_place.returns) and len(by_name.returns) == 4
    with pytest.raises(ValueError, match="3 samplers for 4 episodes"):
        run_episodes(agent, make_eval_envs(agent.config, 4), seeds, False, eval_samplers(7, 3))


@pytest.mark.parametrize("normalize", [False, True])
def test_value_is_in_reward_units(tmp_path, normalize):
    """A critic trained on an env whose value is known in closed form (reward 2 per step, exactly 4 steps, discount
    0.9: 2.0, 3.8, 5.42, 6.878 with 1..4 steps left) gives those values back through Agent.value. Trained briefly
    in this process (the serial backend) through a3c.train. With --normalize-obs and --normalize-reward the critic
    learns scaled values of normalised observations: the loaded agent applies the frozen statistics and undoes the
    scale."""
    gamma = 0.9
    result = a3c.train(
        normalize_obs=normalize,
        normalize_reward=normalize,
        env="countdown_env:Countdown-v0",
        backend="serial",
        workers=1,
        envs_per_worker=4,
        total_steps=8000,
        gamma=gamma,
        lr=5e-3,
        run_dir=str(tmp_path / "run"),
        checkpoint_every=0,
        eval_every=0,
    )
    left = np.arange(1, LENGTH + 1)
    values = result.agent.value((left / LENGTH).reshape(-1, 1))
    expected = np.array([true_value(k, gamma) for k in left])
    assert np.allclose(values, expected, rtol=0.05), (values, expected)
    assert (result.agent.value_scale != 1.0) == normalize
    assert result.summary["total_steps"] >= 8000 and result.run_dir == tmp_path / "run"


def test_a_recurrent_agent_carries_its_state_between_actions_and_reset_forgets(tmp_path):
    result = a3c.train(
        env="envs/Memory-v0",
        backend="serial",
        lstm=8,
        workers=1,
        envs_per_worker=2,
        total_steps=400,
        run_dir=str(tmp_path / "run"),
        checkpoint_every=0,
        eval_every=0,
    )
    agent = result.agent
    obs = np.ones(agent.spec.obs_shape, dtype=np.float32)
    agent.reset()
    agent.act(obs)
    carried = tuple(s.clone() for s in agent.state)
    assert carried and any(float(s.abs().sum()) > 0 for s in carried)  # the state moved
    agent.act(obs)
    assert not all(torch.equal(a, b) for a, b in zip(carried, agent.state, strict=True))
    agent.reset()
    assert all(float(s.abs().sum()) == 0 for s in agent.state)

    # Found in review: value() or action_probs() of a batch of another size (a look at other states mid-episode)
    # replaced the episode's carried state with a fresh one; they use a fresh state for that batch and leave it be
    agent.act(obs)
    carried = tuple(s.clone() for s in agent.state)
    batch = np.stack([obs, obs, obs])
    agent.value(batch)
    agent.action_probs(batch)
    assert all(torch.equal(a, b) for a, b in zip(carried, agent.state, strict=True))
    fresh = agent.value(batch)
    agent.reset(3)
    np.testing.assert_array_equal(agent.value(batch), fresh)  # (what a fresh state gives)


def test_a_gsde_run_trains_resumes_and_loads(tmp_path):
    """--gsde end to end on Pendulum: a run, its resume (the wider head checked against the checkpoint), a3c.load:
    deterministic actions are the mean, sampled ones vary and stay within the bounds the env is given."""
    import subprocess
    import sys

    run_dir = tmp_path / "run"
    base = [sys.executable, "-m", "a3c.train", "--env", "Pendulum-v1"]
    base += ["--workers", "1", "--envs-per-worker", "2", "--checkpoint-every", "0", "--eval-every", "0"]
    # A3C's plain defaults (Pendulum's preset normalises observations, which act() would apply and the raw model
    # below would not; continuous actions default to PPO)
    start = [*base, "--preset", "none", "--algo", "a3c", "--gsde", "--log-std-init", "-1", "--run-dir", str(run_dir)]
    first = subprocess.run([*start, "--total-steps", "800"], capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    again = [*base, "--resume", str(run_dir), "--total-steps", "1600"]
    second = subprocess.run(again, capture_output=True, text=True)
    assert second.returncode == 0, second.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["resumed_from_step"] >= 800 and summary["total_steps"] >= 1600
    agent = a3c.load(run_dir, seed=0)
    assert agent.config.gsde and agent.action_space == gym.spaces.Box(-2.0, 2.0, (1,), np.float32)
    obs = np.random.default_rng(0).normal(size=(16, 3)).astype(np.float32)
    with torch.no_grad():
        params, _, _ = agent.model(torch.from_numpy(obs))
    assert np.allclose(agent.act(obs)[:, 0], np.clip(params[:, 0].numpy(), -2, 2))
    sampled = agent.act(obs, deterministic=False)
    assert sampled.shape == (16, 1) and np.all(np.abs(sampled) <= 2.0) and not np.allclose(sampled, agent.act(obs))


PAYLOAD_MODULE = "a3c_test_payload"
PAYLOAD = """
import pathlib

import gymnasium as gym

pathlib.Path({marker!r}).write_text("this module ran")
gym.register("Payload-v0", entry_point="gymnasium.envs.classic_control:{entry}", max_episode_steps=500)
"""


@pytest.fixture
def payload_run(tmp_path, monkeypatch):
    """A CartPole run (trained in this process) whose checkpoint and config.json were then edited to name the env
    ``a3c_test_payload:Payload-v0``: a module on sys.path that writes a marker file when imported. Returns
    (run_dir, marker, write_module(entry)), where write_module writes the module with the env class it registers."""
    result = a3c.train(
        env="CartPole-v1",
        backend="serial",
        workers=1,
        envs_per_worker=2,
        hidden_sizes=[8],
        total_steps=100,
        run_dir=str(tmp_path / "run"),
        eval_every=0,
    )
    run_dir, marker, folder = result.run_dir, tmp_path / "marker", tmp_path / "modules"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))

    def write_module(entry: str = "CartPoleEnv") -> None:
        (folder / f"{PAYLOAD_MODULE}.py").write_text(PAYLOAD.format(marker=str(marker), entry=entry))

    write_module()
    latest = run_dir / "checkpoints" / "latest.pt"
    payload = torch.load(latest, weights_only=True)
    payload["config"]["env"] = f"{PAYLOAD_MODULE}:Payload-v0"
    save_checkpoint(latest, payload)
    config = json.loads((run_dir / "config.json").read_text())
    (run_dir / "config.json").write_text(json.dumps({**config, "env": payload["config"]["env"]}))
    yield run_dir, marker, write_module
    sys.modules.pop(PAYLOAD_MODULE, None)
    gym.registry.pop("Payload-v0", None)


def test_load_imports_no_module_the_checkpoint_names(payload_run):
    """a3c.load builds the agent from the spaces stored in the checkpoint: the `module:` env id its config names is
    not imported (before, describing the env imported it, running the module's code)."""
    run_dir, marker, _ = payload_run
    agent = a3c.load(run_dir)
    assert not marker.exists() and PAYLOAD_MODULE not in sys.modules
    assert agent.config.env == f"{PAYLOAD_MODULE}:Payload-v0"
    assert agent.observation_space == gym.make("CartPole-v1").observation_space
    assert agent.action_space == gym.spaces.Discrete(2) and agent.act(np.zeros(4, dtype=np.float32)) in (0, 1)
    assert agent.spec.reward_threshold == 475.0 and agent.spec.max_episode_steps == 500


def test_an_old_checkpoint_naming_a_module_env_is_refused_by_load_and_evaluated(payload_run):
    """A checkpoint written before the spaces were stored (no env_spec): a3c.load could describe its `module:` env
    only by importing the module, so it refuses in one line naming evaluate and --resume, importing nothing;
    python -m a3c.evaluate, which makes the env anyway (as its --help says), evaluates it."""
    run_dir, marker, _ = payload_run
    latest = run_dir / "checkpoints" / "latest.pt"
    payload = torch.load(latest, weights_only=True)
    payload.pop("env_spec", None)
    save_checkpoint(latest, payload)
    with pytest.raises(ValueError) as err:
        a3c.load(run_dir)
    message = str(err.value)
    assert "\n" not in message and f"importing module {PAYLOAD_MODULE!r}" in message
    assert "python -m a3c.evaluate" in message and "--resume" in message and "retrain" in message
    assert not marker.exists() and PAYLOAD_MODULE not in sys.modules
    result = evaluate(run_dir, episodes=2)
    assert result["episodes"] == 2 and marker.exists()  # evaluate made the env: the module ran, as documented


def test_evaluate_refuses_an_env_whose_spaces_changed(payload_run):
    """The env a `module:` id names now has other spaces (Acrobot's under the same id): evaluate says so."""
    run_dir, _, write_module = payload_run
    write_module("AcrobotEnv")
    with pytest.raises(ValueError, match=r"was trained on Box.* but env 'a3c_test_payload:Payload-v0' now has Box"):
        evaluate(run_dir, episodes=1)


IMAGE = gym.spaces.Box(0, 255, (10, 12, 3), np.uint8)


def _image_payload(normalize_obs: bool, old: bool = False) -> dict:
    """A checkpoint's payload for a model of 10x12 RGB frames (env_spec: no env is made). ``old``: as an a3c before
    the model's input scale was recorded wrote it (no input_scale in the payload or its config)."""
    config = Config(env="Img-v0", normalize_obs=normalize_obs)
    spec = EnvSpec("Img-v0", IMAGE, gym.spaces.Discrete(4), None, None)
    torch.manual_seed(0)
    model, _ = build_model(spec, config)
    params, _ = flatten_parameters(model)
    payload = {"model": params.clone(), "config": config.to_dict(), "env_spec": spec.to_data(), "global_step": 7}
    payload["spaces"] = spec.describe()
    if old:
        payload["config"].pop("input_scale", None)
    return payload


def test_an_old_checkpoint_of_normalised_uint8_frames_loads_with_the_input_scale_it_was_trained_with(tmp_path):
    """Bug (review of issue 22): an a3c before the 1/255 fix trained --normalize-obs on uint8 frames with both
    scalings (normalised input x 1/255); a3c.load (and evaluate, through agent_from_payload) rebuilt it with scale 1,
    so its first conv saw inputs 255x larger than in training. A checkpoint without the recorded input scale is
    rebuilt with the one its a3c used (1/255 for uint8 observations); a new one records its own (1 here)."""
    old_path = tmp_path / "old.pt"
    torch.save({"format": 1, **_image_payload(normalize_obs=True, old=True)}, old_path)  # (not stamped: old a3c)
    old = a3c.load(old_path)
    assert old.model.actor.scale == pytest.approx(1 / 255) and old.config.input_scale == pytest.approx(1 / 255)
    # what the loaded model computes is what training's did: the normalised observation, times 1/255
    reference, _ = build_model(old.spec, Config(env="Img-v0", normalize_obs=False))  # (scale 1/255 from the rule)
    flatten_parameters(reference)[0].copy_(torch.load(old_path, weights_only=True)["model"])
    x = torch.randn(3, *IMAGE.shape)
    with torch.no_grad():
        torch.testing.assert_close(old.model(x)[:2], reference(x)[:2])

    new_path = tmp_path / "new.pt"
    save_checkpoint(new_path, _image_payload(normalize_obs=True))
    assert torch.load(new_path, weights_only=True)["input_scale"] == 1.0  # the checkpoint records it
    new = a3c.load(new_path)
    assert new.config.input_scale == 1.0 and new.model.actor.scale == 1.0
    # without --normalize-obs, old and new agree: raw frames x 1/255
    torch.save({"format": 1, **_image_payload(normalize_obs=False, old=True)}, old_path)
    assert a3c.load(old_path).model.actor.scale == pytest.approx(1 / 255)
    save_checkpoint(new_path, _image_payload(normalize_obs=False))
    assert torch.load(new_path, weights_only=True)["input_scale"] == pytest.approx(1 / 255)
    assert a3c.load(new_path).model.actor.scale == pytest.approx(1 / 255)


def test_action_probs_are_the_policys_softmax_and_sampling_follows_them(tmp_path):
    path, model = _checkpoint(tmp_path / "run", seed=2)
    obs = np.random.default_rng(1).normal(size=(16, 4)).astype(np.float32)
    with torch.no_grad():
        logits, _, _ = model(torch.from_numpy(obs))
    agent = a3c.load(path)
    probs = agent.action_probs(obs)
    assert probs.shape == (16, 2) and np.allclose(probs.sum(-1), 1.0)
    assert np.allclose(probs, torch.softmax(logits.double(), -1).numpy(), atol=1e-6)
    assert np.allclose(agent.action_probs(obs[5]), probs[5])  # one observation: one row
    assert np.array_equal(agent.act(obs), probs.argmax(-1))  # the deterministic action is the most likely
    # the sampled actions' frequencies follow the probabilities (4,000 samples of one observation)
    sampled = a3c.load(path, seed=3).act(np.repeat(obs[:1], 4000, axis=0), deterministic=False)
    assert abs(float(np.mean(sampled == 1)) - probs[0, 1]) < 0.04


def test_action_probs_refuses_continuous_actions_in_one_line(tmp_path):
    config = Config(env="Pendulum-v1", hidden_sizes=(8,))
    spec = describe_env(config.env)
    model, _ = build_model(spec, config)
    params, _ = flatten_parameters(model)
    (tmp_path / "checkpoints").mkdir()
    path = tmp_path / "checkpoints" / "latest.pt"
    save_checkpoint(path, {"model": params.clone(), "config": config.to_dict(), "spaces": spec.describe()})
    with pytest.raises(ValueError, match=r"action_probs needs a Discrete action space .* samples from any policy"):
        a3c.load(path).action_probs(np.zeros(3, np.float32))


@pytest.mark.parametrize("kind", ["dict", "tuple"])
def test_a_dict_or_tuple_observation_straight_from_the_env_is_one_line_naming_the_fix(tmp_path, kind):
    """Found by probing: a Dict or Tuple observation as gym.make's env gives it (the agent takes the flattened one the
    model saw) raised numpy's own TypeError or 'inhomogeneous shape' ValueError."""
    from agent_runs import untrained_run

    run = untrained_run(tmp_path / "run", Config(env="envs/Spaces-v0", env_kwargs={"obs": kind}))
    agent = a3c.load(run)
    parts = (np.zeros(2, dtype=np.float32), np.zeros(1, dtype=np.float32))
    obs = {"position": parts[0], "velocity": parts[1]} if kind == "dict" else parts
    with pytest.raises(ValueError, match=r"flattened.*make_env\(.*FlattenObservation") as err:
        agent.act(obs)
    assert "\n" not in str(err.value)
    assert agent.act(np.concatenate(parts)) in agent.action_space  # the flattened one acts


def test_a_damaged_latest_beside_an_intact_best_points_at_best(tmp_path):
    """Found by probing: a run directory whose every checkpoint but best.pt is damaged said "use another checkpoint"
    without naming the one it has."""
    path, _ = _checkpoint(tmp_path / "run")
    (path.parent / "best.pt").write_bytes(path.read_bytes())
    path.write_bytes(b"garbage")
    with pytest.raises(ValueError, match=r"corrupt .*; use another checkpoint \(or give --best: this run's") as err:
        a3c.load(tmp_path / "run")
    assert "\n" not in str(err.value)
    assert a3c.load(tmp_path / "run", best=True).global_step == 123
    (path.parent / "best.pt").unlink()
    with pytest.raises(ValueError, match=r"use another checkpoint$"):  # (no best.pt: nothing more to say)
        a3c.load(tmp_path / "run")
