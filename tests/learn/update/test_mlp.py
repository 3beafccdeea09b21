"""a3c.learn.update.mlp: the update's forward and backward by hand give autograd's values and gradients (into the same
flat buffer), and the acting forward the model's policy, for every action family's head, shared or separate
torsos, scaled uint8 inputs; models it does not cover (an LSTM core, a CNN) are left to autograd, through
backward_from, which gives torch.autograd.backward's gradients bit for bit."""

import gymnasium as gym
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from a3c.learn.model import build_model, flatten_parameters
from a3c.learn.update.mlp import MlpBackprop
from a3c.learn.update.protocol import backward_from
from a3c.spec.config import Config
from a3c.spec.environment import EnvSpec

ACTIONS = {
    "discrete": gym.spaces.Discrete(3),
    "multi-discrete": gym.spaces.MultiDiscrete([2, 4]),
    "gaussian": gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
}


def built(obs_space, action_space, dtype=torch.float32, **settings):
    model, dist = build_model(EnvSpec("Test-v0", obs_space, action_space, None, None), Config(**settings))
    _, grads = flatten_parameters(model.to(dtype))
    return model, dist, grads


def by_autograd(model, grads, obs, dparams, dvalues):
    """Today's update: the model's unroll with autograd, backward from the loss's output gradients."""
    grads.zero_()
    T, K = obs.shape[0] - 1, obs.shape[1]
    params, values, _ = model.unroll(obs, (), torch.zeros(T, K))
    torch.autograd.backward((params, values[:T].reshape(-1)), (dparams, dvalues))
    return params.detach(), values.detach(), grads.clone()


def by_hand(model, grads, obs, dparams, dvalues):
    backprop = MlpBackprop.of(model)
    assert backprop is not None
    # where the passes write every gradient (linear heads), whatever the buffer held is overwritten: NaN here
    assert backprop.writes_all_grads == backprop.by_hand_head  # (Linear and Gaussian heads by hand, gSDE not)
    grads.fill_(float("nan")) if backprop.writes_all_grads else grads.zero_()
    params, values, _, saved = backprop.unroll(obs)
    backprop.backward(saved, dparams, dvalues)
    return torch.from_numpy(params), torch.from_numpy(values), grads.clone()


def check_same(model, grads, obs, seed=0):
    """The passes by hand against autograd's on the same inputs. In float64 to 1e-10 (the arithmetic is the same);
    in float32 to 1e-6 of the largest entry: the hand passes run in numpy, whose matrix products sum in another order
    than torch's, which moves an entry by float32 rounding of the largest terms summed into it, not of its own size."""
    T, K = obs.shape[0] - 1, obs.shape[1]
    dtype = next(model.parameters()).dtype
    gen = torch.Generator().manual_seed(seed)
    param_dim = model.policy_head(torch.zeros(1, model.actor.width, dtype=dtype)).shape[-1]
    dparams = torch.randn(T * K, param_dim, generator=gen, dtype=dtype)
    dvalues = torch.randn(T * K, generator=gen, dtype=dtype)
    expected = by_autograd(model, grads, obs, dparams, dvalues)
    got = by_hand(model, grads, obs, dparams, dvalues)
    tol = 1e-10 if dtype == torch.float64 else 1e-6
    for name, e, g in zip(("params", "values", "gradient"), expected, got, strict=True):
        scale = max(1.0, float(e.abs().max()))
        torch.testing.assert_close(g, e, rtol=0, atol=tol * scale, msg=name)
    assert expected[2].abs().sum() > 0  # (a gradient there is to compare)
    backprop = MlpBackprop.of(model)
    with torch.inference_mode():  # acting, as the worker calls it
        scale = max(1.0, float(model.policy(obs[0])[0].abs().max()))
        torch.testing.assert_close(backprop.policy(obs[0]), model.policy(obs[0])[0], rtol=0, atol=tol * scale)


@pytest.mark.parametrize(
    ("action", "gsde"), [("discrete", False), ("multi-discrete", False), ("gaussian", False), ("gaussian", True)]
)
@pytest.mark.parametrize("shared_torso", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_gradients_by_hand_are_autograds(action, shared_torso, gsde, dtype):
    torch.manual_seed(1)
    model, _, grads = built(gym.spaces.Box(-2, 2, (5,)), ACTIONS[action], dtype, shared_torso=shared_torso, gsde=gsde)
    check_same(model, grads, torch.randn(6, 4, 5, dtype=dtype))


def test_uint8_observations_are_scaled_as_the_model_scales_them():
    torch.manual_seed(2)
    model, _, grads = built(gym.spaces.Box(0, 255, (6,), np.uint8), ACTIONS["discrete"], hidden_sizes=(8,))
    assert model.actor.scale == pytest.approx(1 / 255)
    check_same(model, grads, torch.randint(0, 256, (4, 3, 6), dtype=torch.uint8))


@settings(max_examples=25, deadline=None)
@given(
    T=st.integers(1, 6),
    K=st.integers(1, 5),
    obs_dim=st.integers(1, 9),
    hidden=st.lists(st.integers(1, 12), min_size=1, max_size=3),
    shared=st.booleans(),
    action=st.sampled_from(sorted(ACTIONS)),
    seed=st.integers(0, 2**16),
)
def test_the_gradients_by_hand_are_autograds_for_any_sizes(T, K, obs_dim, hidden, shared, action, seed):
    torch.manual_seed(seed)
    model, _, grads = built(
        gym.spaces.Box(-1, 1, (obs_dim,)), ACTIONS[action], hidden_sizes=tuple(hidden), shared_torso=shared
    )
    check_same(model, grads, torch.randn(T + 1, K, obs_dim), seed)


@pytest.mark.parametrize("action", sorted(ACTIONS))
def test_the_paired_chains_are_the_two_chains_one_after_the_other(action):
    """Separate actor and critic of one shape run as one stacked chain (strided views of the flat buffers): the
    same values and gradients as running each chain on its own, and the pair sees a weight written after it was
    built (the views are of the buffer, not copies: a pull of the global weights must reach them)."""
    torch.manual_seed(5)
    model, _, grads = built(gym.spaces.Box(-1, 1, (5,)), ACTIONS[action], torch.float64)
    paired = MlpBackprop.of(model)
    assert paired is not None and paired.pair_np is not None
    with torch.no_grad():
        model.critic.net[2].weight.mul_(1.5)  # a write through the model's own tensors, after the pair was made
    gen = torch.Generator().manual_seed(6)
    obs = torch.randn(4, 3, 5, dtype=torch.float64, generator=gen)
    dparams = torch.randn(
        9, model.policy_head(torch.zeros(1, 64, dtype=torch.float64)).shape[-1], generator=gen, dtype=torch.float64
    )
    dvalues = torch.randn(9, generator=gen, dtype=torch.float64)
    results = []
    for pair in (paired.pair_np, None):
        paired.pair_np = pair
        grads.zero_()
        params, values, _, saved = paired.unroll(obs)
        paired.backward(saved, dparams, dvalues)
        results.append((torch.from_numpy(params), torch.from_numpy(values), grads.clone()))
    for ours, theirs in zip(*results, strict=True):
        torch.testing.assert_close(ours, theirs, rtol=1e-12, atol=1e-12)
    check_same(model, grads, obs)  # and both are autograd's


@pytest.mark.parametrize("dtype, tol", [(torch.float64, 1e-12), (torch.float32, 1e-6)])
@pytest.mark.parametrize("action", sorted(ACTIONS))
def test_an_update_after_recorded_acting_passes_is_the_whole_forward_passes(action, dtype, tol):
    """``record``: the acting passes of a rollout keep the actor's activations and the policy's params, and the
    update runs only the critic: the same params, values and gradients as the update's own forward over every row
    (float32: numpy's products of 3 rows and of 12 may sum in another order). A record is used once; acting passes
    out of order (or none) leave the update to the whole forward pass, with the same result."""
    torch.manual_seed(8)
    model, _, grads = built(gym.spaces.Box(-1, 1, (5,)), ACTIONS[action], dtype)
    T, K = 3, 4
    gen = torch.Generator().manual_seed(9)
    dparams = torch.randn(
        T * K, model.policy_head(torch.zeros(1, 64, dtype=dtype)).shape[-1], generator=gen, dtype=dtype
    )
    dvalues = torch.randn(T * K, generator=gen, dtype=dtype)
    whole = MlpBackprop.of(model)
    recorded = MlpBackprop.of(model)
    assert whole is not None and recorded is not None
    recorded.record(T, K)

    def update(backprop, acting_steps, obs):
        acting = [backprop.policy(obs[t], t) for t in acting_steps]
        grads.zero_()
        params, values, _, saved = backprop.unroll(obs)
        backprop.backward(saved, dparams, dvalues)
        return acting, (torch.from_numpy(params), torch.from_numpy(values), grads.clone()), saved

    for steps in (range(T), range(T), [0, 2, 1], [], range(T)):
        obs = torch.randn(T + 1, K, 5, dtype=dtype, generator=gen)  # each rollout its own
        _, expected, _ = update(whole, [], obs)
        acting, got, saved = update(recorded, steps, obs)
        assert (saved.pair is not None and saved.pair[1] is recorded.acted.layers[0]) == (list(steps) == [0, 1, 2])
        for t, params in zip(steps, acting, strict=True):
            torch.testing.assert_close(params, expected[0][t * K : (t + 1) * K], rtol=0, atol=tol)
        for ours, theirs in zip(got, expected, strict=True):
            torch.testing.assert_close(ours, theirs, rtol=0, atol=tol * max(1.0, float(theirs.abs().max())))


@pytest.mark.parametrize("shared", [False, True])
def test_the_final_observations_values_are_the_models(shared):
    """V(final observation) (the bootstrap at truncation), by hand: the model's value of those observations."""
    torch.manual_seed(10)
    model, _, _ = built(gym.spaces.Box(-1, 1, (3,)), ACTIONS["discrete"], torch.float64, shared_torso=shared)
    backprop = MlpBackprop.of(model)
    assert backprop is not None
    obs, final_obs = torch.randn(4, 2, 3, dtype=torch.float64), torch.randn(3, 2, 3, dtype=torch.float64)
    _, _, final_values, _ = backprop.unroll(obs, final_obs)
    with torch.no_grad():
        expected = model(final_obs.reshape(6, 3))[1].view(3, 2)
    torch.testing.assert_close(torch.from_numpy(final_values), expected, rtol=1e-12, atol=1e-12)


def test_bool_observations_are_taken_as_zeros_and_ones():
    torch.manual_seed(7)
    model, _, grads = built(gym.spaces.MultiBinary(6), ACTIONS["discrete"], torch.float64)
    check_same(model, grads, torch.randint(0, 2, (4, 3, 6)).bool())


def test_models_it_does_not_cover_are_left_to_autograd():
    lstm, _, _ = built(gym.spaces.Box(-1, 1, (4,)), ACTIONS["discrete"], lstm=4)
    cnn, _, _ = built(gym.spaces.Box(0, 255, (10, 10, 2), np.uint8), ACTIONS["discrete"])
    unflattened, _ = build_model(
        EnvSpec("T-v0", gym.spaces.Box(-1, 1, (4,)), ACTIONS["discrete"], None, None), Config()
    )

    assert MlpBackprop.of(lstm) is None and MlpBackprop.of(cnn) is None
    assert MlpBackprop.of(unflattened) is None  # no .grad views to accumulate into


@pytest.mark.parametrize(
    ("obs_space", "settings"),
    [
        (gym.spaces.Box(-1, 1, (5,)), dict(shared_torso=True)),  # two roots meet in the torso
        (gym.spaces.Box(-1, 1, (5,)), dict(lstm=6)),
        (gym.spaces.Box(0, 255, (12, 12, 2), np.uint8), dict()),  # the CNN torso, shared by both heads
    ],
    ids=["shared-mlp", "lstm", "cnn"],
)
@pytest.mark.parametrize("action", sorted(ACTIONS))
def test_backward_from_a_scalar_root_gives_autograds_gradients_bit_for_bit(obs_space, settings, action):
    torch.manual_seed(3)
    model, _, grads = built(obs_space, ACTIONS[action], **settings)
    T, K = 5, 3
    if isinstance(obs_space, gym.spaces.Box) and obs_space.dtype == np.uint8:
        obs = torch.randint(0, 256, (T + 1, K, *obs_space.shape), dtype=torch.uint8)
    else:
        obs = torch.randn(T + 1, K, *obs_space.shape)
    state = model.initial_state(K)
    gen = torch.Generator().manual_seed(4)
    results = []
    for backward in (torch.autograd.backward, backward_from):
        grads.zero_()
        params, values, _ = model.unroll(obs, state, torch.zeros(T, K))
        outputs = (params, values[:T].reshape(-1))
        if not results:
            dparams, dvalues = torch.randn(params.shape, generator=gen), torch.randn(T * K, generator=gen)
        backward(outputs, (dparams, dvalues))
        results.append(grads.clone())
    assert results[0].abs().sum() > 0
    assert torch.equal(results[0], results[1])
