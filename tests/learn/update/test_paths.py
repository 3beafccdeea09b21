"""a3c.learn.update.paths: the conformance test (every registered update path, on every model family the flags can
build,
pushes the gradient of the slow reference, the A3C gradient written like the maths in float64: tests/worker_rig.py),
and the choice of a path (the fast one where one covers the model, else the reference with one line that says why;
A3C_UPDATE_PATH forces one)."""

from __future__ import annotations

import pytest
import torch
from worker_rig import (
    BOX_ENV_ID,
    ENV_ID,
    IMAGE_ENV_ID,
    MULTI_ENV_ID,
    RecordingChannel,
    make_worker,
    slow_reference_gradient,
    worker_spec,
)

from a3c.learn.model import build_model
from a3c.learn.update.kernel import KERNEL_ENV, kernel_available
from a3c.learn.update.paths import FAST_PATHS, PATH_ENV, PATHS, REFERENCE, choose
from a3c.spec.config import Config
from a3c.spec.environment import describe_env
from a3c.spec.errors import UserError

# Every model family the flags can build, on scripted envs whose rollouts hold both kinds of episode end: the MLP
# with a separate or a shared torso, each action family (Categorical, MultiCategorical, the Gaussian, gSDE),
# normalised observations and advantages, GAE's lambda at 1 and below, the LSTM core, the CNN on uint8 frames, on
# normalised (float) ones and under --bf16, and the CNN with an LSTM core.
FAMILIES = {
    "mlp": dict(env=ENV_ID),
    "mlp-lambda-1": dict(env=ENV_ID, gae_lambda=1.0),
    "mlp-shared-torso": dict(env=ENV_ID, shared_torso=True),
    "mlp-normalize-obs": dict(env=ENV_ID, normalize_obs=True),
    "mlp-normalize-advantage": dict(env=ENV_ID, normalize_advantage=True),
    "multidiscrete": dict(env=MULTI_ENV_ID),
    "gaussian": dict(env=BOX_ENV_ID),
    "gaussian-shared-torso": dict(env=BOX_ENV_ID, shared_torso=True),
    "gsde": dict(env=BOX_ENV_ID, gsde=True),
    "lstm": dict(env=ENV_ID, lstm=6),
    "lstm-gaussian": dict(env=BOX_ENV_ID, lstm=5, normalize_advantage=True),
    "cnn-uint8": dict(env=IMAGE_ENV_ID),
    "cnn-normalize-obs": dict(env=IMAGE_ENV_ID, normalize_obs=True),
    "cnn-bf16": dict(env=IMAGE_ENV_ID, bf16=True),
    "cnn-lstm": dict(env=IMAGE_ENV_ID, lstm=4),
}
# what every family runs with: an entropy bonus and a value coefficient that show in the gradient, GAE's trace
# cut below 1, no clipping (the gradient itself is compared), a Gaussian's std away from 1
COMMON = dict(envs_per_worker=3, n_steps=9, gae_lambda=0.9, ent_coef=0.05, vf_coef=0.7, max_grad_norm=1e9)
COMMON.update(log_std_init=-0.3)

# Per parameter: float32 paths to 2e-4 of each entry and 1e-6 of the parameter's largest (at least 1e-6), as exact
# as float32 sums over a rollout allow (a convolution's weight gradient sums thousands of products, in an order of
# oneDNN's choosing); --bf16 (the torso's products in bfloat16, 8 bits of mantissa, on either path): 10% of the
# parameter gradient's norm (measured: up to 4% on the reference's autocast, 8% on the first convolution by hand, where
# the input scale sits in its bfloat16 weight copy)
RTOL, ATOL, BF16_NORM_TOL = 2e-4, 1e-6, 0.1

# the path each family takes by default, where the C kernel is built
CHOSEN = {
    **{name: "mlp+kernel" for name in FAMILIES if name.startswith("mlp")},
    "multidiscrete": "mlp+closed-form",
    "gaussian": "mlp+closed-form",
    "gaussian-shared-torso": "mlp+closed-form",
    "gsde": "mlp+closed-form",
    "lstm": "reference",
    "lstm-gaussian": "reference",
    "cnn-uint8": "cnn+kernel",
    "cnn-normalize-obs": "cnn+kernel",
    "cnn-bf16": "cnn+kernel",
    "cnn-lstm": "reference",
}


def config_of(settings):
    config = Config(workers=1, total_steps=10**6, seed=1)
    for key, value in {**COMMON, **settings}.items():
        setattr(config, key, value)
    return config


def model_of(settings):
    config = config_of(settings)
    model, dist = build_model(describe_env(config.env, config.env_kwargs), config)
    return config, model, dist


@pytest.mark.parametrize("path", PATHS.values(), ids=PATHS.keys())
@pytest.mark.parametrize("family", FAMILIES.values(), ids=FAMILIES.keys())
def test_every_path_pushes_the_reference_gradient(family, path, monkeypatch):
    """The conformance test: the gradient a worker pushes on ``path`` (forced with A3C_UPDATE_PATH) after its
    second rollout (which starts mid-episode, from the first's boundary observation) is the slow reference's for
    that rollout, and the reference path's. A path that does not cover the family says why, and is skipped with that
    reason."""
    why_not = path.supports(*model_of(family))
    if why_not is not None:
        pytest.skip(f"{path.name} does not cover this family: {why_not}")
    monkeypatch.setenv(PATH_ENV, path.name)
    worker, _ = make_worker(**{**COMMON, **family})
    assert worker.path.name == path.name
    worker.channel = RecordingChannel(worker.channel)
    worker.step()
    worker.step()
    assert worker.terminated.sum() > 0 and worker.truncated.sum() > 0  # both kinds of episode end are in it
    cfg = worker.config
    expected = slow_reference_gradient(
        worker, cfg.gamma, cfg.gae_lambda, cfg.ent_coef, cfg.vf_coef, normalize_advantage=cfg.normalize_advantage
    )
    sizes = [p.numel() for p in worker.model.parameters()]
    pushed = worker.channel.pushed[-1].double()
    assert_conforms(pushed, expected, sizes, bf16=cfg.bf16)
    # and the reference path's own gradient on the same rollout (what a new loss term, written once in the
    # reference's loss, changes first: a fast path that does not compute it fails here)
    reference = REFERENCE.build(worker.model, worker.dist, cfg, worker.grads)
    unrolled = reference.unroll(worker.batch)
    _, dparams, dvalues = reference.loss_grads(worker.batch, unrolled)
    reference.backward(unrolled, dparams, dvalues)
    assert_conforms(pushed, worker.grads.double(), sizes, bf16=cfg.bf16)


def assert_conforms(got, expected, sizes, bf16=False):
    """Each parameter's gradient (``sizes``: their lengths in the flat vector) to the tolerance, scaled by that
    parameter's own largest entry: a term that moves only a small head's gradient is not hidden by a large torso's."""
    for got_p, expected_p in zip(got.split(sizes), expected.split(sizes), strict=True):
        if bf16:
            assert float((got_p - expected_p).norm()) <= BF16_NORM_TOL * float(expected_p.norm()) + ATOL
        else:
            scale = max(1.0, float(expected_p.abs().max()))
            torch.testing.assert_close(got_p, expected_p, rtol=RTOL, atol=ATOL * scale)


def test_the_reference_gradient_sees_every_term():
    """What makes the conformance test able to fail: on one rollout, the slow reference's gradient moves with the
    entropy coefficient, the value coefficient, --normalize-advantage and GAE's lambda, each beyond the test's
    tolerance."""
    worker, _ = make_worker(**{**COMMON, "env": ENV_ID})
    worker.step()
    cfg, sizes = worker.config, [p.numel() for p in worker.model.parameters()]
    base = slow_reference_gradient(worker, cfg.gamma, cfg.gae_lambda, cfg.ent_coef, cfg.vf_coef)
    for changed in (
        slow_reference_gradient(worker, cfg.gamma, cfg.gae_lambda, 0.0, cfg.vf_coef),
        slow_reference_gradient(worker, cfg.gamma, cfg.gae_lambda, cfg.ent_coef, 0.5),
        slow_reference_gradient(worker, cfg.gamma, cfg.gae_lambda, cfg.ent_coef, cfg.vf_coef, True),
        slow_reference_gradient(worker, cfg.gamma, 1.0, cfg.ent_coef, cfg.vf_coef),
    ):
        with pytest.raises(AssertionError):
            assert_conforms(changed, base, sizes)


@pytest.mark.parametrize("family", FAMILIES.keys())
def test_each_family_takes_its_fast_path_or_the_reference_with_a_line_that_says_why(family, monkeypatch):
    monkeypatch.delenv(PATH_ENV, raising=False)
    monkeypatch.delenv(KERNEL_ENV, raising=False)
    choice = choose(*model_of(FAMILIES[family]))
    expected = CHOSEN[family]
    if not kernel_available():
        expected = expected.replace("+kernel", "+closed-form")
    assert choice.path.name == expected
    if expected == "reference":
        assert choice.notice is not None and "--lstm" in choice.notice and "reference" in choice.notice
        assert "\n" not in choice.notice
    else:
        assert choice.notice is None


def test_the_kernel_can_be_turned_off_and_a_path_forced(monkeypatch):
    cartpole = model_of(dict(env="CartPole-v1"))
    monkeypatch.setenv(KERNEL_ENV, "0")
    assert choose(*cartpole).path.name == "mlp+closed-form"
    monkeypatch.delenv(KERNEL_ENV)
    monkeypatch.setenv(PATH_ENV, "reference")
    choice = choose(*cartpole)
    assert choice.path is REFERENCE and choice.notice == f"a3c: update path reference ({PATH_ENV}=reference)"
    monkeypatch.setenv(PATH_ENV, "cnn+closed-form")
    with pytest.raises(UserError, match="does not cover this model: a MlpTorso"):
        choose(*cartpole)
    monkeypatch.setenv(PATH_ENV, "autograd")
    with pytest.raises(UserError, match="not an update path"):
        choose(*cartpole)


def test_the_reference_covers_every_family_and_every_fast_path_one():
    """The reference is the definition: it applies to every model the flags can build. Every fast path is there for
    some family (none registered that nothing takes)."""
    models = [model_of(family) for family in FAMILIES.values()]
    assert all(REFERENCE.supports(*m) is None for m in models)
    for path in FAST_PATHS:
        if "kernel" in path.name and not kernel_available():
            continue
        assert any(path.supports(*m) is None for m in models), path.name


def test_the_worker_spec_is_the_rig_s():
    """(The rig's envs describe as the families say: vector, image, each action space.)"""
    worker, _ = make_worker(**{**COMMON, "env": IMAGE_ENV_ID})
    assert worker_spec(worker).obs_shape == (10, 10, 2)
