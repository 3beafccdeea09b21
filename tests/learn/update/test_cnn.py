"""a3c.learn.update.cnn: after a rollout's acting passes (recorded in order), the update's params, values and the
gradients it writes are autograd's on the same inputs (the model's unroll and backward), for every image shape and
dtype the CNN torso takes (channels-first frames, channels-last grids, one-channel [H, W], bool and uint8 and float),
with the whole forward pass as the fallback when acting was not recorded in order; models it does not cover are left
to autograd."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from a3c.learn.model import build_model, flatten_parameters
from a3c.learn.update.cnn import CnnBackprop
from a3c.spec.config import Config
from a3c.spec.environment import EnvSpec

T, K = 3, 2
DISCRETE = gym.spaces.Discrete(4)


def built(obs_space, action_space=DISCRETE, dtype=torch.float32, **settings):
    model, dist = build_model(EnvSpec("Test-v0", obs_space, action_space, None, None), Config(**settings))
    _, grads = flatten_parameters(model.to(dtype))
    return model, grads


def observations(space, gen):
    shape = (T + 1, K, *space.shape)
    if space.dtype == np.bool_:
        return torch.randint(0, 2, shape, generator=gen).bool()
    if space.dtype == np.uint8:
        return torch.randint(0, 256, shape, generator=gen, dtype=torch.uint8)
    return torch.rand(shape, generator=gen, dtype=torch.float64).to(torch.from_numpy(np.zeros(0, space.dtype)).dtype)


def by_autograd(model, grads, obs, dparams, dvalues):
    grads.zero_()
    params, values, _ = model.unroll(obs, (), torch.zeros(T, K))
    torch.autograd.backward((params, values[:T].reshape(-1)), (dparams, dvalues))
    return params.detach(), values.detach(), grads.clone()


def recording(model):
    """The worker's CnnBackprop for ``model``, recording rollouts of T x K."""
    backprop = CnnBackprop.of(model)
    assert backprop is not None and backprop.writes_all_grads
    backprop.record(T, K)
    return backprop


def by_hand(backprop, grads, obs, dparams, dvalues, acted_steps):
    """The worker's calls: acting passes for ``acted_steps`` (in that order), then the update."""
    acted = [backprop.policy(obs[t].numpy(), t) for t in acted_steps]
    grads.fill_(float("nan"))  # every gradient is written, whatever the buffer held
    params, values, _, saved = backprop.unroll(obs.numpy())
    backprop.backward(saved, dparams.numpy(), dvalues.numpy())
    return torch.from_numpy(params), torch.from_numpy(values), grads.clone(), acted


def assert_near(got, expected, name, tol=2e-5):
    """float32 to ``tol`` of the largest entry: a batch of K and one of T x K rows may take different convolution
    kernels, which sum in other orders."""
    scale = max(1.0, float(expected.abs().max()))
    torch.testing.assert_close(got, expected, rtol=0, atol=tol * scale, msg=name)


SPACES = {
    "frames [4, 84, 84] uint8": gym.spaces.Box(0, 255, (4, 84, 84), np.uint8),
    "grid [10, 10, 2] uint8, channels last": gym.spaces.Box(0, 255, (10, 10, 2), np.uint8),
    "grid [10, 10, 4] bool, channels last": gym.spaces.Box(0, 1, (10, 10, 4), np.bool_),
    "grid [12, 9] uint8, one channel": gym.spaces.Box(0, 255, (12, 9), np.uint8),
    "grid [3, 16, 16] float32, channels first": gym.spaces.Box(-1.0, 1.0, (3, 16, 16), np.float32),
}


# the frames' background level (a3c.spec.background: Pong's, 87 / 255), which the CNN subtracts from its scaled input
# (a3c gives one to the Nature CNN's uint8 frames only, a3c.learn.model.input_shift; the passes by hand take any)
SHIFTS = {"no shift": 0.0, "background shift": 87 / 255}


@pytest.mark.parametrize("space", SPACES.values(), ids=SPACES.keys())
@pytest.mark.parametrize("acted_steps", [range(T), [], [0, 2]], ids=["recorded", "not-acted", "out-of-order"])
@pytest.mark.parametrize("shift", SHIFTS.values(), ids=SHIFTS.keys())
def test_the_update_after_acting_is_autograds(space, acted_steps, shift):
    torch.manual_seed(3)
    model, grads = built(space)
    model.actor.shift = shift
    gen = torch.Generator().manual_seed(5)
    obs = observations(space, gen)
    dparams = torch.randn(T * K, 4, generator=gen)
    dvalues = torch.randn(T * K, generator=gen)

    expected = by_autograd(model, grads, obs, dparams, dvalues)
    params, values, got_grads, acted = by_hand(recording(model), grads, obs, dparams, dvalues, list(acted_steps))

    assert_near(params, expected[0], "params")
    assert_near(values, expected[1], "values")
    assert_near(got_grads, expected[2], "gradient")
    assert expected[2].abs().sum() > 0 and torch.isfinite(got_grads).all()
    with torch.no_grad():  # acting: the model's policy
        for t, logits in zip(acted_steps, acted, strict=True):
            assert_near(logits, model.policy(obs[t])[0], "acting params")


def test_rollout_after_rollout_each_update_uses_its_own_acting_passes():
    """The record is reused: the second rollout's update must see the second rollout's activations."""
    space = SPACES["frames [4, 84, 84] uint8"]
    torch.manual_seed(4)
    model, grads = built(space)
    backprop = recording(model)  # one for both rollouts, as in a worker
    gen = torch.Generator().manual_seed(6)
    for _ in range(2):
        obs = observations(space, gen)
        dparams, dvalues = torch.randn(T * K, 4, generator=gen), torch.randn(T * K, generator=gen)
        params, _, got, _ = by_hand(backprop, grads, obs, dparams, dvalues, range(T))
        expected = by_autograd(model, grads, obs, dparams, dvalues)
        assert_near(params, expected[0], "params")
        assert_near(got, expected[2], "gradient")


def test_final_observation_values_are_the_models():
    space = SPACES["grid [10, 10, 2] uint8, channels last"]
    torch.manual_seed(8)
    model, _ = built(space)
    backprop = recording(model)
    gen = torch.Generator().manual_seed(9)
    obs, final = observations(space, gen), observations(space, gen)[:T]
    _, _, final_values, _ = backprop.unroll(obs.numpy(), final.numpy())
    with torch.no_grad():
        expected = model(final.reshape(T * K, *space.shape))[1].view(T, K)
    assert final_values is not None
    assert_near(torch.from_numpy(final_values), expected, "final values")


def test_models_it_does_not_cover_are_left_to_autograd():
    frames = SPACES["frames [4, 84, 84] uint8"]
    lstm, _ = built(frames, lstm=8)
    gaussian, _ = built(frames, gym.spaces.Box(-1.0, 1.0, (2,), np.float32))
    mlp, _ = built(gym.spaces.Box(-1.0, 1.0, (4,), np.float32))
    unflattened, _ = build_model(EnvSpec("T-v0", frames, gym.spaces.Discrete(3), None, None), Config())

    for model in (lstm, gaussian, mlp, unflattened):
        assert CnnBackprop.of(model) is None
    assert CnnBackprop.of(built(frames, gym.spaces.MultiDiscrete([2, 3]))[0]) is not None  # a linear head too


def test_a_float64_model_keeps_its_activations_in_float64():
    """The record takes the model's dtype: in float64 the update after acting is autograd's to 1e-10."""
    space = SPACES["grid [10, 10, 4] bool, channels last"]
    torch.manual_seed(10)
    model, grads = built(space, dtype=torch.float64)
    gen = torch.Generator().manual_seed(11)
    obs = observations(space, gen)
    dparams = torch.randn(T * K, 4, generator=gen, dtype=torch.float64)
    dvalues = torch.randn(T * K, generator=gen, dtype=torch.float64)

    expected = by_autograd(model, grads, obs, dparams, dvalues)
    params, values, got_grads, _ = by_hand(recording(model), grads, obs, dparams, dvalues, range(T))

    assert params.dtype == torch.float64
    for name, got, want in zip(("params", "values", "gradient"), (params, values, got_grads), expected, strict=True):
        assert_near(got, want, name, tol=1e-10)


@pytest.mark.parametrize("space", SPACES.values(), ids=SPACES.keys())
@pytest.mark.parametrize("shift", SHIFTS.values(), ids=SHIFTS.keys())
def test_bf16_updates_by_hand_are_autocasts_and_follow_each_rollouts_weights(space, shift):
    """--bf16: the torso computes in bfloat16 on copies of its weights made at each rollout's first acting pass;
    the params, values and gradients are as near float32 autograd's as autograd's through CnnTorso.forward's
    autocast to bfloat16 is (within twice its distance, which is 0.1-8% of the norm here), and the same as autocast's
    to 0.5% of the largest entry where the frames are not uint8 (the same products, rounded alike). With uint8
    frames the input scale is in the first layer's bfloat16 copy instead (the frames go in unscaled, exact), so the
    roundings differ from autocast's (which rounds the scaled frames), not their size. After the weights change (a
    pull) the next rollout's update follows the new weights, not the old copies (which would be ~50% off). The
    record holds bfloat16; the gradients and params come back float32. With the frames' background level taken off
    the input (exact for uint8 frames) the same holds."""
    torch.manual_seed(12)
    model, grads = built(space, bf16=True)
    model.actor.shift = shift
    backprop = recording(model)
    assert backprop.compute_dtype == torch.bfloat16 and backprop.recorded.conv_outs[0].dtype == torch.bfloat16
    assert backprop.scale_in_weights == (space.dtype == np.uint8)
    gen = torch.Generator().manual_seed(13)
    flat = torch.nn.utils.parameters_to_vector(model.parameters())
    for rollout in range(2):
        if rollout:  # a pull: the worker's weights change between two rollouts
            with torch.no_grad():
                for p in model.parameters():
                    p.mul_(1.5).add_(0.01)  # (in place, as a pull copies into the flat buffer)
        obs = observations(space, gen)
        dparams = torch.randn(T * K, 4, generator=gen)
        dvalues = torch.randn(T * K, generator=gen)
        autocast = by_autograd(model, grads, obs, dparams, dvalues)
        model.actor.bf16 = False
        float32 = by_autograd(model, grads, obs, dparams, dvalues)
        model.actor.bf16 = True
        params, values, got_grads, _ = by_hand(backprop, grads, obs, dparams, dvalues, range(T))
        assert params.dtype == values.dtype == got_grads.dtype == torch.float32
        names = ("params", "values", "gradient")
        for name, got, want, exact in zip(names, (params, values, got_grads), autocast, float32, strict=True):
            off, autocast_off = (float((x - exact).norm() / exact.norm()) for x in (got, want))
            assert off <= 2 * autocast_off + 1e-3, (
                f"{name}, rollout {rollout}: {off:.4f} from float32, {autocast_off:.4f}"
            )
            if not backprop.scale_in_weights:
                assert_near(got, want, f"{name}, rollout {rollout}", tol=5e-3)
    assert not torch.equal(torch.nn.utils.parameters_to_vector(model.parameters()), flat)
