"""The policy distributions (a3c.learn.distributions): log-probs and entropies against torch.distributions, the
closed-form policy gradients against autograd, sampling, the deterministic action, and the actions handed to the env."""

import gymnasium as gym
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from a3c.learn.distributions import Categorical, DiagGaussian, GSDEGaussian, MultiCategorical, make_distribution
from a3c.spec.errors import UserError


def gaussian(dim=3, low=-2.0, high=2.0, log_std_init=0.0, clipped_log_prob=False):
    return make_distribution(gym.spaces.Box(low, high, (dim,), np.float32), log_std_init, 0, clipped_log_prob)


def clipped_gaussian():
    """--clipped-log-prob on bounds [-1, 1], [-inf, 0.5] and [0, inf] (a bound may be infinite on either side)."""
    space = gym.spaces.Box(np.array([-1.0, -np.inf, 0.0]), np.array([1.0, 0.5, np.inf]), dtype=np.float32)
    return make_distribution(space, clipped_log_prob=True)


def gaussian_params(batch=7, dim=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.cat([torch.randn(batch, dim, generator=g), 0.5 * torch.randn(batch, dim, generator=g)], -1).double()


def test_gaussian_log_prob_and_entropy_match_torch_distributions():
    dist = gaussian()
    params = gaussian_params()
    actions = torch.randn(7, 3, generator=torch.Generator().manual_seed(1)).double() * 2
    log_prob, entropy = dist.log_prob_entropy(params, actions)
    reference = torch.distributions.Normal(params[:, :3], params[:, 3:].exp())
    torch.testing.assert_close(log_prob, reference.log_prob(actions).sum(-1))
    torch.testing.assert_close(entropy, reference.entropy().sum(-1))


def test_the_clipped_log_prob_is_the_probability_of_the_action_the_env_was_given():
    dist = clipped_gaussian()
    params = gaussian_params(batch=64)
    actions = 2 * torch.randn(64, 3, generator=torch.Generator().manual_seed(3)).double()
    log_prob, entropy = dist.log_prob_entropy(params, actions)
    normal = torch.distributions.Normal(params[:, :3], params[:, 3:].exp())
    low, high = torch.tensor([-1.0, -np.inf, 0.0]).double(), torch.tensor([1.0, 0.5, np.inf]).double()
    expected = torch.where(
        actions >= high,
        torch.log1p(-normal.cdf(high.expand_as(actions))),  # P(x >= high): the env was given high
        torch.where(actions <= low, torch.log(normal.cdf(low.expand_as(actions))), normal.log_prob(actions)),
    )
    assert ((actions >= high) | (actions <= low)).any(dim=0).tolist()[::2] == [True, True]  # both kinds occur
    torch.testing.assert_close(log_prob, expected.sum(-1))
    torch.testing.assert_close(entropy, normal.entropy().sum(-1))  # the Gaussian's, as without the option
    inside = torch.tensor([[0.0, 0.0, 0.25]] * 5).double()  # within every bound: the density, as without the option
    plain = make_distribution(gym.spaces.Box(-1.0, 1.0, (3,), np.float32))
    torch.testing.assert_close(dist.log_prob_entropy(params[:5], inside), plain.log_prob_entropy(params[:5], inside))


@settings(max_examples=200, deadline=None)
@given(
    mean=st.floats(-50, 50),
    log_std=st.floats(-8, 3),
    action=st.floats(-60, 60),
    advantage=st.floats(-10, 10),
)
def test_the_clipped_log_prob_and_its_gradient_stay_finite_far_beyond_a_bound(mean, log_std, action, advantage):
    """A mean 50 beyond a bound with a std of e^-8: log P(beyond) is ~0 or hugely negative, never inf or nan, and so
    is its closed-form gradient (float32, as the worker computes it)."""
    dist = make_distribution(gym.spaces.Box(-1.0, 1.0, (1,), np.float32), clipped_log_prob=True)
    params = torch.tensor([[mean, log_std]], dtype=torch.float32)
    log_prob, _, dparams = dist.policy_grad(params, torch.tensor([[action]]), torch.tensor([advantage]), 0.01)
    assert torch.isfinite(log_prob).all() and torch.isfinite(dparams).all()


def test_multicategorical_log_prob_and_entropy_match_torch_distributions():
    dist = make_distribution(gym.spaces.MultiDiscrete([3, 2, 4]))
    assert isinstance(dist, MultiCategorical) and dist.param_dim == 9 and dist.action_shape == (3,)
    params = torch.randn(6, 9, generator=torch.Generator().manual_seed(2)).double()
    actions = torch.tensor([[0, 1, 3], [2, 0, 0], [1, 1, 2], [0, 0, 1], [2, 1, 3], [1, 0, 0]])
    log_prob, entropy = dist.log_prob_entropy(params, actions)
    parts = [torch.distributions.Categorical(logits=p) for p in params.split([3, 2, 4], -1)]
    torch.testing.assert_close(log_prob, sum(c.log_prob(actions[:, j]) for j, c in enumerate(parts)))
    torch.testing.assert_close(entropy, sum(c.entropy() for c in parts))


@pytest.mark.parametrize(
    "dist, params, actions",
    [
        (gaussian(), gaussian_params(), torch.randn(7, 3).double()),
        (
            make_distribution(gym.spaces.MultiDiscrete([3, 2])),
            torch.randn(7, 5).double(),
            torch.stack([torch.randint(0, 3, (7,)), torch.randint(0, 2, (7,))], -1),
        ),
        (Categorical(4), torch.randn(7, 4).double(), torch.randint(0, 4, (7,))),
        (clipped_gaussian(), gaussian_params(), 2 * torch.randn(7, 3).double()),  # about half beyond a bound
    ],
    ids=["gaussian", "multidiscrete", "categorical", "gaussian-clipped-log-prob"],
)
def test_closed_form_policy_gradient_matches_autograd(dist, params, actions):
    advantages = torch.randn(7).double()
    log_prob, entropy, dparams = dist.policy_grad(params, actions, advantages, 0.03)
    leaf = params.clone().requires_grad_(True)
    ref_log_prob, ref_entropy = dist.log_prob_entropy(leaf, actions)
    (-(ref_log_prob * advantages).mean() - 0.03 * ref_entropy.mean()).backward()
    torch.testing.assert_close(dparams, leaf.grad)
    torch.testing.assert_close(log_prob, ref_log_prob.detach())
    torch.testing.assert_close(entropy, ref_entropy.detach())


def test_gaussian_samples_have_the_policy_mean_and_std_and_mode_is_the_mean():
    dist = gaussian(dim=2)
    params = torch.tensor([[0.5, -1.0, np.log(0.2), np.log(2.0)]]).repeat(40000, 1).float()
    draws = dist.sample(params, np.random.default_rng(0))
    assert draws.shape == (40000, 2) and draws.dtype == np.float32
    np.testing.assert_allclose(draws.mean(0), [0.5, -1.0], atol=0.03)
    np.testing.assert_allclose(draws.std(0), [0.2, 2.0], rtol=0.02)
    np.testing.assert_array_equal(dist.mode(params[:2]), [[0.5, -1.0], [0.5, -1.0]])


def test_gaussian_actions_are_clipped_for_the_env_only():
    dist = make_distribution(gym.spaces.Box(np.array([-1.0, 0.0], np.float32), np.array([1.0, 3.0], np.float32)))
    sampled = np.array([[-5.0, 1.0], [0.5, 7.0]], dtype=np.float32)
    stepped = dist.env_actions(sampled)
    np.testing.assert_array_equal(np.stack(stepped), [[-1.0, 1.0], [0.5, 3.0]])
    assert stepped[0].dtype == np.float32
    assert sampled[0, 0] == -5.0  # the buffer keeps the unclipped sample: its log-prob is the one trained on


def test_gaussian_head_learns_a_state_independent_log_std_from_its_initial_value():
    dist = gaussian(dim=2, log_std_init=-0.5)
    head = dist.make_head(4)
    params = head(torch.randn(5, 4))
    assert params.shape == (5, 4)
    torch.testing.assert_close(params[:, 2:], torch.full((5, 2), -0.5))
    params[:, 2:].sum().backward()
    torch.testing.assert_close(head.log_std.grad, torch.full((2,), 5.0))  # one parameter, every row's gradient


def test_multidiscrete_env_actions_add_the_start_and_keep_the_shape():
    space = gym.spaces.MultiDiscrete(np.array([[3, 2], [2, 2]]), start=np.array([[1, -1], [0, 5]]))
    dist = make_distribution(space)
    assert dist.action_shape == (2, 2) and dist.param_dim == 9
    draws = dist.sample(torch.zeros(4, 9), np.random.default_rng(0))
    assert draws.shape == (4, 2, 2)
    for action in dist.env_actions(draws):
        assert space.contains(action)
    assert dist.mode(torch.zeros(1, 9)).shape == (1, 2, 2)


def test_multidiscrete_samples_each_component_from_its_own_logits():
    dist = make_distribution(gym.spaces.MultiDiscrete([3, 2]))
    logits = torch.log(torch.tensor([[0.1, 0.2, 0.7, 0.9, 0.1]]))
    draws = dist.sample(logits.repeat(20000, 1), np.random.default_rng(1))
    np.testing.assert_allclose(np.bincount(draws[:, 0], minlength=3) / 20000, [0.1, 0.2, 0.7], atol=0.015)
    np.testing.assert_allclose(np.bincount(draws[:, 1], minlength=2) / 20000, [0.9, 0.1], atol=0.015)


@pytest.mark.parametrize(
    "space",
    [gym.spaces.MultiBinary(3), gym.spaces.Box(0, 5, (2,), np.int64), gym.spaces.Text(5)],
    ids=["multibinary", "int-box", "text"],
)
def test_unsupported_action_spaces_are_user_errors(space):
    with pytest.raises(UserError, match="not supported"):
        make_distribution(space)


def test_box_action_of_any_shape():
    dist = make_distribution(gym.spaces.Box(-1.0, 1.0, (2, 2), np.float32))
    assert isinstance(dist, DiagGaussian) and dist.param_dim == 8 and dist.action_shape == (2, 2)
    draws = dist.sample(torch.zeros(3, 8), np.random.default_rng(0))
    assert draws.shape == (3, 2, 2)
    log_prob, entropy = dist.log_prob_entropy(torch.zeros(3, 8), torch.from_numpy(draws))
    assert log_prob.shape == (3,) and entropy.shape == (3,)


def gsde(dim=2, width=5, log_std_init=-1.0):
    return make_distribution(gym.spaces.Box(-2.0, 2.0, (dim,), np.float32), log_std_init, gsde_width=width)


def gsde_params(dist, batch=6, seed=3):
    """Rows through the real head: [mean, detached features, log sigma]."""
    head = dist.make_head(dist.width)
    features = torch.tanh(torch.randn(batch, dist.width, generator=torch.Generator().manual_seed(seed)))
    return head, features, head(features)


def test_gsde_log_prob_and_entropy_are_the_gaussian_with_the_state_dependent_variance():
    dist = gsde()
    assert isinstance(dist, GSDEGaussian) and dist.param_dim == 2 + 5 + 5 * 2
    head, features, params = gsde_params(dist)
    actions = torch.randn(6, 2, generator=torch.Generator().manual_seed(4))
    log_prob, entropy = dist.log_prob_entropy(params, actions)
    sigma = head.log_std.exp()  # [W, A]
    std = torch.sqrt(features.pow(2) @ sigma.pow(2) + GSDEGaussian.VARIANCE_EPS)  # var_a = sum_j z_j^2 sigma_ja^2
    reference = torch.distributions.Normal(head.mean(features), std)
    torch.testing.assert_close(log_prob, reference.log_prob(actions).sum(-1))
    torch.testing.assert_close(entropy, reference.entropy().sum(-1))
    # the std is learned through sigma only: the features enter the variance detached, the mean not
    (log_prob.sum() + entropy.sum()).backward()
    assert head.log_std.grad is not None and head.log_std.grad.abs().sum() > 0
    assert head.mean.weight.grad is not None


def test_gsde_noise_is_a_function_of_the_state_held_over_a_rollout():
    dist = gsde(dim=1, width=4, log_std_init=0.0)
    params = gsde_params(dist, batch=3)[2].detach()
    rng = np.random.default_rng(0)
    dist.new_rollout(3, rng)
    first, again = dist.sample(params, rng), dist.sample(params, rng)
    np.testing.assert_array_equal(first, again)  # same state, same rollout: same action
    dist.new_rollout(3, rng)
    assert not np.allclose(dist.sample(params, rng), first)  # the next rollout explores differently
    np.testing.assert_array_equal(dist.mode(params), params[:, :1].numpy())
    # over many rollouts the noise has the variance the log-prob assumes
    samples = []
    for _ in range(4000):
        dist.new_rollout(3, rng)
        samples.append(dist.sample(params, rng))
    _, latent, log_sigma = dist._split(params)
    np.testing.assert_allclose(np.std(samples, axis=0), dist._std(latent, log_sigma).numpy(), rtol=0.06)


def test_gsde_on_a_discrete_env_is_a_user_error():
    from a3c.run.resolve import preflight
    from a3c.spec.config import Config

    with pytest.raises(UserError, match="--gsde is for continuous"):
        preflight(Config(env="CartPole-v1", gsde=True))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_the_gaussians_numpy_policy_gradient_is_its_torch_one(dtype):
    """PPO's update calls the numpy form twice a minibatch; it is the torch closed form (and so autograd's) in numbers,
    in the params' dtype; --clipped-log-prob and gSDE have none (None: the torch form or autograd serves them)."""
    dist = gaussian()
    params, actions = gaussian_params().to(dtype), torch.randn(7, 3, generator=torch.Generator().manual_seed(5))
    advantages = torch.randn(7, generator=torch.Generator().manual_seed(6)).to(dtype)
    closed = dist.policy_grad_np(params.numpy(), actions.to(dtype).numpy(), advantages.numpy(), 0.03)
    assert closed is not None
    expected = dist.policy_grad(params, actions.to(dtype), advantages, 0.03)
    tolerance = {"rtol": 1e-12, "atol": 1e-12} if dtype == torch.float64 else {"rtol": 1e-5, "atol": 1e-6}
    for ours, theirs in zip(closed, expected, strict=True):
        assert ours.dtype == params.numpy().dtype
        np.testing.assert_allclose(ours, theirs.numpy(), **tolerance)
    assert clipped_gaussian().policy_grad_np(params.numpy(), actions.to(dtype).numpy(), advantages.numpy(), 0.0) is None
    gsde = make_distribution(gym.spaces.Box(-1.0, 1.0, (2,), np.float32), gsde_width=4)
    assert gsde.policy_grad_np(np.zeros((3, gsde.param_dim)), np.zeros((3, 2)), np.zeros(3), 0.0) is None


@pytest.mark.parametrize("kind", ["categorical", "gaussian", "gaussian-float32"])
def test_the_numpy_log_prob_is_log_prob_entropy_s(kind):
    """PPO's ratio takes log pi(a|s) alone in numpy (a3c.learn.losses.action_log_probs): the same numbers as the torch
    log-probability the reference differentiates; --clipped-log-prob and gSDE have none (the fallback serves)."""
    g = torch.Generator().manual_seed(7)
    if kind == "categorical":
        dist, params, actions = Categorical(5), torch.randn(9, 5, generator=g).double(), torch.randint(0, 5, (9,))
    else:
        dist, params, actions = gaussian(), gaussian_params(batch=9).double(), torch.randn(9, 3, generator=g).double()
    if kind == "gaussian-float32":
        params, actions = params.float(), actions.float()
    ours = dist.log_prob_np(params.numpy(), actions.numpy())
    expected = dist.log_prob_entropy(params, actions)[0].numpy()
    assert ours is not None and ours.dtype == params.numpy().dtype
    tolerance = 1e-12 if params.dtype == torch.float64 else 1e-5
    np.testing.assert_allclose(ours, expected, rtol=tolerance, atol=tolerance)
    assert clipped_gaussian().log_prob_np(gaussian_params().numpy(), np.zeros((7, 3))) is None
    gsde = make_distribution(gym.spaces.Box(-1.0, 1.0, (2,), np.float32), gsde_width=4)
    assert gsde.log_prob_np(np.zeros((3, gsde.param_dim)), np.zeros((3, 2))) is None


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.floats(allow_nan=True, allow_infinity=True, width=32), min_size=6, max_size=6),
    st.sampled_from([(-1.0, 1.0), (-np.inf, 2.0), (0.0, np.inf), (-np.inf, np.inf)]),
)
def test_the_env_actions_are_np_clip_s_nan_and_infinities_too(values, bounds):
    """env_actions clips by two ufuncs (np.clip's wrapper is slow on every step): np.clip's numbers, NaN kept."""
    low, high = bounds
    dist = make_distribution(gym.spaces.Box(low, high, (2,), np.float32))
    actions = np.array(values, dtype=np.float32).reshape(3, 2)
    np.testing.assert_array_equal(np.stack(dist.env_actions(actions)), np.clip(actions, low, high).astype(np.float32))
