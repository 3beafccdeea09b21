"""ActorCritic (built from the spaces, with and without an LSTM core), its rollout unroll, the flat parameter/gradient
buffers, and the Categorical distribution."""

import copy
import math

import gymnasium as gym
import numpy as np
import pytest
import torch

import a3c
from a3c.learn.distributions import Categorical, make_distribution
from a3c.learn.model import (
    CnnTorso,
    MlpTorso,
    build_model,
    flatten_parameters,
    make_torso,
    mlp_actor_critic,
    parameter_count,
)
from a3c.spec.config import Config
from a3c.spec.environment import EnvSpec
from a3c.spec.errors import UserError


def spec(obs_shape=(4,), n=3):
    return EnvSpec("Test-v0", gym.spaces.Box(-1, 1, obs_shape), gym.spaces.Discrete(n), None, None)


def test_shapes():
    model = mlp_actor_critic(4, 3, (16, 8))
    logits, value, state = model(torch.zeros(5, 4))
    assert logits.shape == (5, 3) and value.shape == (5,) and state == ()


@pytest.mark.parametrize("shared_torso", [False, True])
def test_build_model_from_the_spaces(shared_torso):
    cfg = Config(hidden_sizes=(16, 8), shared_torso=shared_torso)
    model, dist = build_model(spec((2, 3), n=5), cfg)
    assert isinstance(dist, Categorical) and dist.param_dim == 5
    params, values, _ = model(torch.zeros(7, 2, 3))  # observations of any shape are flattened
    assert params.shape == (7, 5) and values.shape == (7,)
    assert (model.critic is None) == shared_torso
    # separate networks: the actor's and the critic's MLPs each have their own weights
    torso = 6 * 16 + 16 + 16 * 8 + 8
    heads = 8 * 5 + 5 + 8 + 1
    assert parameter_count(spec((2, 3), n=5), cfg) == torso * (1 if shared_torso else 2) + heads


def test_separate_critic_leaves_the_policy_alone():
    model = mlp_actor_critic(4, 2, (8,), shared_torso=False)
    _, value, _ = model(torch.randn(3, 4))
    value.sum().backward()
    assert all(p.grad is None or float(p.grad.abs().sum()) == 0 for p in model.actor.parameters())


def test_unsupported_action_space_is_a_user_error():
    with pytest.raises(UserError, match="not supported"):
        make_distribution(gym.spaces.MultiBinary(3))


@pytest.mark.parametrize("shared_torso", [False, True])
def test_lstm_core_parameters_and_state(shared_torso):
    cfg = Config(hidden_sizes=(16,), shared_torso=shared_torso, lstm=8)
    model, _ = build_model(spec((4,), n=3), cfg)
    cores = 1 if shared_torso else 2
    state = model.initial_state(5)
    assert len(state) == 2 * cores and all(s.shape == (5, 8) and not s.any() for s in state)
    params, values, new_state = model(torch.randn(5, 4), state)
    assert params.shape == (5, 3) and values.shape == (5,) and len(new_state) == 2 * cores
    assert all(s.abs().sum() > 0 for s in new_state)  # the state moved
    lstm = 4 * (16 * 8 + 8 * 8 + 8 + 8)
    torso = 4 * 16 + 16
    heads = 8 * 3 + 3 + 8 + 1
    assert parameter_count(spec((4,), n=3), cfg) == (torso + lstm) * cores + heads


def unroll_step_by_step(model, obs, state, dones):
    """The reference for ActorCritic.unroll: one forward per step, the state zeroed where an episode ended."""
    T = dones.shape[0]
    params, values = [], []
    for t in range(T + 1):
        p, v, state = model(obs[t], state)
        params.append(p)
        values.append(v)
        if t < T:
            state = tuple(s * (1 - dones[t]).unsqueeze(-1) for s in state)
    return torch.cat(params[:T]), torch.stack(values)


@pytest.mark.parametrize("lstm", [0, 6])
@pytest.mark.parametrize("shared_torso", [False, True])
def test_unroll_equals_stepping_with_the_state_reset_at_episode_ends(lstm, shared_torso):
    torch.manual_seed(0)
    model, _ = build_model(spec((4,), n=3), Config(hidden_sizes=(8,), shared_torso=shared_torso, lstm=lstm))
    T, K = 6, 3
    obs = torch.randn(T + 1, K, 4)
    dones = torch.zeros(T, K)
    dones[1, 0] = dones[4, 0] = dones[2, 2] = 1.0
    state = tuple(torch.randn_like(s) for s in model.initial_state(K))  # a rollout that starts mid-episode
    params, values, final = model.unroll(obs, state, dones)
    ref_params, ref_values = unroll_step_by_step(model, obs, state, dones)
    torch.testing.assert_close(params, ref_params)
    torch.testing.assert_close(values, ref_values)
    assert final is None
    if lstm:  # the reset matters: without it env 0's outputs after step 1 differ
        no_reset, _ = unroll_step_by_step(model, obs, state, torch.zeros(T, K))
        assert not torch.allclose(params.view(T, K, 3)[2:, 0], no_reset.view(T, K, 3)[2:, 0])
        torch.testing.assert_close(params.view(T, K, 3)[:, 1], no_reset.view(T, K, 3)[:, 1])


def test_unroll_values_final_observations_from_the_truncated_episodes_state():
    torch.manual_seed(1)
    model, _ = build_model(spec((4,), n=3), Config(hidden_sizes=(8,), lstm=5))
    T, K = 4, 2
    obs, final_obs = torch.randn(T + 1, K, 4), torch.randn(T, K, 4)
    dones, truncated = torch.zeros(T, K), torch.zeros(T, K)
    dones[2, 1] = truncated[2, 1] = 1.0
    state = model.initial_state(K)
    _, _, final = model.unroll(obs, state, dones, final_obs, truncated)
    for t in range(3):  # env 1's state after obs[0..2], then its final observation
        _, _, state = model(obs[t], state)
    expected = model(final_obs[2], state)[1][1]
    torch.testing.assert_close(final[2, 1], expected)
    assert final[0].abs().sum() == 0 and final[3].abs().sum() == 0


def test_categorical_log_prob_entropy_and_mode_match_torch_distributions():
    logits = torch.randn(6, 4, generator=torch.Generator().manual_seed(1))
    actions = torch.tensor([0, 1, 2, 3, 0, 1])
    log_prob, entropy = Categorical(4).log_prob_entropy(logits, actions)
    reference = torch.distributions.Categorical(logits=logits)
    torch.testing.assert_close(log_prob, reference.log_prob(actions))
    torch.testing.assert_close(entropy, reference.entropy())
    np.testing.assert_array_equal(Categorical(4).mode(logits), logits.argmax(-1).numpy())


def test_discrete_with_a_start_offset_steps_the_env_with_its_own_actions():
    dist = make_distribution(gym.spaces.Discrete(3, start=-1))
    assert dist.env_actions(np.array([0, 1, 2])) == [-1, 0, 1]


def test_parameters_and_gradients_are_views_of_the_flat_buffers():
    model = mlp_actor_critic(4, 2, (8,))
    before = [p.detach().clone() for p in model.parameters()]
    flat, grads = flatten_parameters(model)
    assert flat.numel() == sum(p.numel() for p in model.parameters())
    for p, b in zip(model.parameters(), before, strict=True):
        torch.testing.assert_close(p.detach(), b)  # values kept
    flat.zero_()
    assert all(float(p.detach().abs().sum()) == 0 for p in model.parameters())  # views, not copies
    flat.normal_()
    logits, value, _ = model(torch.randn(3, 4))
    (logits.sum() + value.sum()).backward()
    assert grads.abs().sum() > 0
    torch.testing.assert_close(grads, torch.cat([p.grad.reshape(-1) for p in model.parameters()]))
    # backward accumulates; zeroing the flat buffer clears every .grad
    grads.zero_()
    assert all(float(p.grad.abs().sum()) == 0 for p in model.parameters())


def test_shared_flat_buffers():
    flat, grads = flatten_parameters(mlp_actor_critic(4, 2, (8,)), shared=True)
    assert flat.is_shared() and grads.is_shared()


def test_sample_actions_follows_the_policy():
    logits = torch.log(torch.tensor([[0.1, 0.2, 0.7], [0.5, 0.5, 0.0]]) + 1e-12)
    rng = np.random.default_rng(0)
    draws = Categorical(3).sample(logits.repeat(20000, 1), rng).reshape(20000, 2)  # 20000 independent draws per row
    freq0 = np.bincount(draws[:, 0], minlength=3) / len(draws)
    freq1 = np.bincount(draws[:, 1], minlength=3) / len(draws)
    np.testing.assert_allclose(freq0, [0.1, 0.2, 0.7], atol=0.015)
    np.testing.assert_allclose(freq1, [0.5, 0.5, 0.0], atol=0.015)
    assert draws.dtype == np.int64 and draws.min() >= 0 and draws.max() <= 2


@pytest.mark.parametrize(
    "shape",
    [(84, 84, 4), (4, 84, 84), (10, 12, 3), (3, 10, 12), (64, 48, 1), (3, 3, 2), (84, 84), (7, 9)],
)
@pytest.mark.parametrize("lstm", [0, 16])
def test_cnn_torso_on_images_of_several_sizes_and_layouts(shape, lstm):
    space = gym.spaces.Box(0, 255, shape, np.uint8)
    model, _ = build_model(
        EnvSpec("Img-v0", space, gym.spaces.Discrete(4), None, None), Config(lstm=lstm, shared_torso=False)
    )
    assert isinstance(model.actor, CnnTorso) and model.critic is None  # one CNN for actor and critic
    frames = torch.from_numpy(np.stack([space.sample() for _ in range(5)]))
    params, values, _ = model(frames, model.initial_state(5))
    assert params.shape == (5, 4) and values.shape == (5,) and torch.isfinite(params).all()


@pytest.mark.parametrize(
    "dtype, high", [(np.bool_, 1), (np.uint8, 255), (np.int16, 9), (np.float32, 1.0)], ids=lambda v: str(v)
)
@pytest.mark.parametrize("shape", [(10, 10, 4), (10, 10), (3, 3, 2), (1, 1, 1)])
def test_cnn_torso_takes_every_image_dtype_it_claims(dtype, high, shape):
    """bool grids, uint8 frames, integer and float images, down to 1x1: a CNN (2-D: for bool and uint8 only; other
    2-D arrays are vectors), finite outputs, and 0/1 cells read as 0.0/1.0 (only uint8 is scaled by 1/255)."""
    space = gym.spaces.Box(0, high, shape, dtype)
    model, _ = build_model(EnvSpec("Grid-v0", space, gym.spaces.Discrete(3), None, None), Config())
    image = len(shape) == 3 or dtype in (np.bool_, np.uint8)
    assert isinstance(model.actor, CnnTorso if image else MlpTorso)
    assert model.actor.scale == pytest.approx(1 / 255 if dtype == np.uint8 else 1.0)
    obs = torch.from_numpy(np.stack([space.sample() for _ in range(4)]))
    params, values, _ = model(obs)
    assert params.shape == (4, 3) and values.shape == (4,) and torch.isfinite(params).all()
    if dtype == np.bool_:  # a bool grid is the same input as its 0/1 floats
        torch.testing.assert_close(model(obs)[0], model(obs.float())[0])


@pytest.mark.parametrize("channels_last", [True, False])
def test_cnn_reads_channels_where_they_are_and_scales_uint8(channels_last):
    torch.manual_seed(0)
    chw = torch.randint(0, 256, (2, 3, 10, 12), dtype=torch.uint8)
    shape = (10, 12, 3) if channels_last else (3, 10, 12)
    torso = make_torso(gym.spaces.Box(0, 255, shape, np.uint8), Config())
    reference = CnnTorso((3, 10, 12), channels_last=False, scale=1.0)
    reference.load_state_dict(torso.state_dict())
    frames = chw.permute(0, 2, 3, 1) if channels_last else chw
    torch.testing.assert_close(torso(frames), reference(chw.float() / 255))


@pytest.mark.parametrize("shape", [(4, 84, 84), (84, 84, 4), (10, 10, 2)])
def test_the_updates_channels_last_convolutions_give_the_same_values_and_gradients(shape):
    """With autograd on (the update) the CNN reads its input channels-last (a faster convolution backward): the
    outputs and the weights' gradients are those of the plain contiguous layers, and the gradients land in the flat
    buffer. The layouts are compared in float64: in float32 the two convolutions sum in different orders, and among
    the ~150k ReLU inputs of a batch one now and then lies within rounding of 0 and flips, which changes a few
    gradient entries by up to 1% of the largest (seen on 2 threads about once in 60 batches), a property of ReLU
    networks and not of the layout."""
    torch.manual_seed(0)
    space = gym.spaces.Box(0, 255, shape, np.uint8)
    space.seed(0)
    model, _ = build_model(EnvSpec("Img-v0", space, gym.spaces.Discrete(6), None, None), Config())
    _, grads = flatten_parameters(model)
    views = [p.grad.data_ptr() for p in model.parameters()]
    frames = torch.from_numpy(np.stack([space.sample() for _ in range(12)]))
    params, values, _ = model(frames)
    (params.square().sum() + values.sum()).backward()
    assert [p.grad.data_ptr() for p in model.parameters()] == views  # accumulated in place: the flat buffer holds them
    torch.testing.assert_close(grads, torch.cat([p.grad.reshape(-1) for p in model.parameters()]), rtol=0, atol=0)

    model64 = copy.deepcopy(model).double()  # the forward casts its input to the weights' dtype
    torso = model64.actor
    assert isinstance(torso, CnnTorso)
    with torch.no_grad():
        acting = model64(frames)[0]
    params, values, _ = model64(frames)
    weights = list(model64.parameters())
    got = torch.autograd.grad(params.square().sum() + values.sum(), weights)
    x = frames.double() / 255
    x = (x.permute(0, 3, 1, 2) if torso.channels_last else x).contiguous()
    features = torso.fc(torso.convs(x))  # the same layers on the contiguous input, by hand
    ref_params, ref_values = model64.policy_head(features), model64.value_head(features).squeeze(-1)
    ref_grads = torch.autograd.grad(ref_params.square().sum() + ref_values.sum(), weights)
    torch.testing.assert_close(params, ref_params)
    torch.testing.assert_close(acting, ref_params.detach())
    for g, ref in zip(got, ref_grads, strict=True):
        torch.testing.assert_close(g, ref, rtol=1e-9, atol=1e-9 * ref.abs().max().item())


@pytest.mark.parametrize("shape", [(84, 84, 4), (10, 10, 2)])
def test_bf16_computes_the_cnn_in_bfloat16_and_keeps_weights_and_gradients_float32(shape):
    """--bf16: the same network (same weights) gives nearly the float32 outputs and gradients (bfloat16 keeps 8 bits
    of mantissa: within a few percent, and the gradient pointing the same way), while the weights, their gradients
    in the flat buffer and the heads' outputs stay float32."""
    torch.manual_seed(0)
    space = gym.spaces.Box(0, 255, shape, np.uint8)
    space.seed(0)
    spec = EnvSpec("Img-v0", space, gym.spaces.Discrete(6), None, None)
    model, _ = build_model(spec, Config(bf16=True))
    reference, _ = build_model(spec, Config())
    reference.load_state_dict(model.state_dict())
    assert model.actor.bf16 and not reference.actor.bf16
    _, grads = flatten_parameters(model)
    frames = torch.from_numpy(np.stack([space.sample() for _ in range(12)]))
    outputs = []
    for net in (model, reference):
        params, values, _ = net(frames)
        (params.square().sum() + values.sum()).backward()
        assert params.dtype == values.dtype == torch.float32
        outputs.append(torch.cat([params.reshape(-1), values]).detach())
    assert all(p.dtype == torch.float32 and p.grad.dtype == torch.float32 for p in model.parameters())
    assert grads.dtype == torch.float32 and torch.isfinite(grads).all()
    ref_grads = torch.cat([p.grad.reshape(-1) for p in reference.parameters()])
    torch.testing.assert_close(outputs[0], outputs[1], rtol=0.05, atol=0.05 * outputs[1].abs().max().item())
    assert torch.nn.functional.cosine_similarity(grads, ref_grads, dim=0) > 0.99
    assert not torch.equal(grads, ref_grads)  # (it did compute in bfloat16)
    with torch.no_grad():  # acting takes the same path
        torch.testing.assert_close(model(frames)[0], outputs[0][: 12 * 6].view(12, 6))


def test_no_ortho_init_gives_every_dense_layer_pytorchs_default_init():
    """--no-ortho-init (rl-zoo3's gSDE settings: SB3's ortho_init=False): each dense layer's weights uniform in
    +-1/sqrt(fan_in), as nn.Linear makes them, where the default is orthogonal (the policy head at gain 0.01)."""
    spec = EnvSpec("Pendulum-v1", gym.spaces.Box(-8, 8, (3,)), gym.spaces.Box(-2, 2, (1,)), None, None)
    for gsde in (False, True):
        torch.manual_seed(0)
        plain, _ = build_model(spec, Config(ortho_init=False, gsde=gsde, log_std_init=-2.0))
        torch.manual_seed(0)
        ortho, _ = build_model(spec, Config(gsde=gsde, log_std_init=-2.0))
        layers = [m for m in plain.modules() if isinstance(m, torch.nn.Linear)]
        assert len(layers) == 6  # the actor's 2, the critic's 2, the policy mean, the value
        for layer in layers:
            bound = 1 / math.sqrt(layer.in_features)
            assert layer.weight.abs().max() <= bound and layer.weight.abs().max() > 0.5 * bound
        head = plain.policy_head.mean.weight
        assert head.abs().max() > 10 * ortho.policy_head.mean.weight.abs().max()  # not the 0.01-gain head
        log_std = dict(plain.named_parameters())["policy_head.log_std"]
        assert torch.all(log_std == -2.0)  # the log-std keeps --log-std-init


def test_uint8_vectors_are_scaled_and_floats_are_not():
    torso = make_torso(gym.spaces.Box(0, 255, (6,), np.uint8), Config(hidden_sizes=(4,)))
    assert isinstance(torso, MlpTorso) and torso.scale == pytest.approx(1 / 255)
    x = torch.full((1, 6), 255, dtype=torch.uint8)
    torch.testing.assert_close(torso(x), torso.net(torch.ones(1, 6)))
    assert make_torso(gym.spaces.Box(-1, 1, (6,)), Config()).scale == 1.0


@pytest.mark.parametrize("shape", [(10, 12, 3), (6,)], ids=["image", "vector"])
def test_normalised_uint8_observations_are_not_scaled_by_1_255_again(shape):
    """With --normalize-obs the model is fed normalised floats, not pixels: build_model (which the worker, the
    evaluator, a3c.load, workers_auto's timing model and the Ray server all call) applies no 1/255; without it, it
    does."""
    space = gym.spaces.Box(0, 255, shape, np.uint8)
    spec = EnvSpec("Img-v0", space, gym.spaces.Discrete(4), None, None)
    for normalize_obs, scale in ((True, 1.0), (False, 1 / 255)):
        model, _ = build_model(spec, Config(normalize_obs=normalize_obs, shared_torso=False))
        torsos = [model.actor] + ([model.critic] if model.critic is not None else [])
        assert all(t.scale == pytest.approx(scale) for t in torsos), (normalize_obs, [t.scale for t in torsos])
    torso = make_torso(space, Config(normalize_obs=True))
    reference = make_torso(space, Config())
    reference.load_state_dict(torso.state_dict())
    x = torch.randn(2, *shape)  # what the worker feeds with --normalize-obs: ~N(0, 1) floats
    torch.testing.assert_close(torso(x), reference(x * 255))


@pytest.mark.parametrize("shared_torso", [False, True], ids=["separate", "shared"])
def test_both_torsos_learn_cartpole(tmp_path, shared_torso):
    """Short CartPole runs with each architecture get well above random play (a mean return of about 22): the flat
    parameter buffer and the closed-form loss gradient train both. The serial backend makes a run reproducible on one
    CPU, but another CPU's float kernels take it down another path, as another seed would: over seeds 1-16 one
    separate-torso run ended at 37 (the rest 61-204; shared 76-120), so the test holds the mean of three seeds, not one
    seed's draw (here seeds 1-3 end at 162, 91 and 88 separate, 112, 96 and 110 shared)."""
    settings = {"env": "CartPole-v1", "preset": "none", "backend": "serial", "workers": 2, "envs_per_worker": 4}
    settings |= {"total_steps": 25000, "lr": 3e-3, "checkpoint_every": 0, "eval_every": 0, "shared_torso": shared_torso}
    means = [
        a3c.train(seed=seed, run_dir=str(tmp_path / f"run{seed}"), **settings).summary["mean_return_100"]
        for seed in (1, 2, 3)
    ]
    assert sum(means) / 3 >= 60, f"100-episode mean returns {means} after 25k steps: not learning"
