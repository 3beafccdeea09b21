"""a3c.learn.update.paths: the conformance test, every objective x every registered update path x every model family
the flags can build, against float64 references (A3C: the gradient written like the maths, tests/worker_rig.py; PPO:
AutogradSurrogate on AutogradNetwork in float64 on a copy of the model, for a minibatch at weights that moved since
acting, with the clips binding, the value clip and advantage normalisation on and off), and the choice of a path (the
fast one where one covers the model, else the reference with one line that says why; A3C_UPDATE_PATH forces one under
either objective, and an unknown name is one line, exit 2)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys

import numpy as np
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

from a3c.learn.losses import normalized_advantages
from a3c.learn.model import build_model, flatten_parameters
from a3c.learn.objectives.ppo import AutogradSurrogate, PPOUpdate
from a3c.learn.update.kernel import KERNEL_ENV, kernel_available
from a3c.learn.update.loop import learn_rollout
from a3c.learn.update.paths import FAST_PATHS, PATH_ENV, PATHS, REFERENCE, REFERENCES, choose
from a3c.learn.update.protocol import Minibatch, Rollout
from a3c.learn.update.reference import AutogradNetwork
from a3c.run.worker import Worker
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


@pytest.mark.parametrize("path", PATHS["a3c"].values(), ids=PATHS["a3c"].keys())
@pytest.mark.parametrize("family", FAMILIES.values(), ids=FAMILIES.keys())
def test_every_a3c_path_pushes_the_reference_gradient(family, path, monkeypatch):
    """The conformance test under --algo a3c: the gradient a worker pushes on ``path`` (forced with A3C_UPDATE_PATH)
    after its second rollout (which starts mid-episode, from the first's boundary observation) is the slow
    reference's for that rollout, and the reference path's. A path that does not cover the family says why, and is
    skipped with that reason."""
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
    reference.gradient(worker.batch, Minibatch())
    assert_conforms(pushed, worker.grads.double(), sizes, bf16=cfg.bf16)


def assert_conforms(got, expected, sizes, bf16=False, bf16_tol=BF16_NORM_TOL):
    """Each parameter's gradient (``sizes``: their lengths in the flat vector) to the tolerance, scaled by that
    parameter's own largest entry: a term that moves only a small head's gradient is not hidden by a large torso's."""
    for got_p, expected_p in zip(got.split(sizes), expected.split(sizes), strict=True):
        if bf16:
            assert float((got_p - expected_p).norm()) <= bf16_tol * float(expected_p.norm()) + ATOL
        else:
            scale = max(1.0, float(expected_p.abs().max()))
            torch.testing.assert_close(got_p, expected_p, rtol=RTOL, atol=ATOL * scale)


# -- PPO: each path's pushed minibatch gradient against the float64 reference ------------------------------------
# What PPO runs with on top of COMMON: minibatches of 9 of the 27 samples (an LSTM's: 9 // 9 = 1 whole env), one
# epoch a rollout. Between acting and the minibatch the shared model moves by MOVE (relative to each weight: others'
# pushes), so that the ratios leave 1; the clip range (and the value clip, where on) is then set for the minibatch
# (PPOReference.set_clips) so that it binds on some of its samples and not on others, whatever the family's scales,
# with no sample near its edge.
PPO_COMMON = dict(algo="ppo", minibatch_size=9, n_epochs=1)
MOVE = 0.6
# --bf16 under PPO: 20% of each parameter gradient's norm (measured: up to 14%, the first two convolutions with
# normalised advantages, on both paths: the clipped samples drop out, and what is left of the gradient cancels more)
PPO_BF16_NORM_TOL = 0.2


class PPOReference:
    """The float64 reference of a PPO worker's update: AutogradSurrogate on AutogradNetwork in float64 (and without
    --bf16) on a copy of the worker's model, on the worker's rollout."""

    def __init__(self, worker):
        self.config = dataclasses.replace(worker.config, bf16=False)
        self.model = build_model(worker_spec(worker), self.config)[0].double()
        self.params, self.grads = flatten_parameters(self.model)
        self.dist = worker.dist  # (gSDE's: this rollout's noise)
        b = worker.batch
        start_state = tuple(s.double() for s in b.start_state)
        self.rollout = Rollout(b.obs, b.final_obs, b.actions, b.rewards, b.terminated, b.truncated, start_state)
        network = AutogradNetwork(self.model, self.config, self.grads)
        surrogate = AutogradSurrogate(self.config, self.dist)
        self.learner = PPOUpdate("reference", network, surrogate, self.model, self.dist, self.config)

    def plan(self, weights):
        """The targets with the weights that acted, and the plan of the learn loop's rng."""
        self.params.copy_(weights)
        return self.learner.plan(self.rollout, np.random.default_rng(0))

    def set_clips(self, weights, minibatch, value_clip, configs):
        """The clip range (and with ``value_clip`` the value clip) in ``configs`` set for ``minibatch`` with
        ``weights``: each in the widest gap between its samples' moves (|r - 1|; |V - V_b|) where it binds on some
        sample (changes its gradient: the ratio moved past it in its advantage's direction; the clipped value error
        is the larger), none near its edge (where float32 and float64 could fall on either side)."""
        self.params.copy_(weights)
        index = minibatch.samples
        with torch.no_grad():
            out = self.learner.network.forward(self.rollout, minibatch)
            actions = self.rollout.actions.reshape(-1, *self.dist.action_shape)[torch.from_numpy(index)]
            log_probs = self.dist.log_prob_entropy(out.params, actions)[0].numpy()
        ratios = np.exp(log_probs - self.learner.log_probs[index])
        adv = self.learner.advantages[index]
        adv = normalized_advantages(adv) if self.config.normalize_advantage else adv

        def ratio_binds(c):  # (where the advantage is next to 0, the clip changes next to nothing: not counted)
            matters = np.abs(adv) > 0.1 * np.abs(adv).max()
            return matters & (((ratios > 1 + c) & (adv > 0)) | ((ratios < 1 - c) & (adv < 0)))

        old, returns = self.learner.values[index], self.learner.returns[index]
        change = out.values - old

        def value_binds(cv):  # (where V is next to its target, the clip changes next to nothing: not counted)
            errors = out.values - returns
            clipped = old + np.clip(change, -cv, cv) - returns
            matters = np.abs(errors) > 0.1 * np.abs(errors).max()
            return matters & (np.abs(change) > cv) & (clipped**2 > errors**2)

        clip = edge(np.abs(ratios - 1.0), ratio_binds)
        clip_vf = edge(np.abs(change), value_binds) if value_clip else None
        for config in configs:  # (the learners read them at each gradient)
            config.clip_range, config.clip_range_vf = clip, clip_vf

    def toward_returns(self, weights, minibatch):
        """``weights`` with the value head's bias moved so that the middle one of ``minibatch``'s values passes its
        target by half the way it was from it (V - R = (R - V_b) / 2): about half of the values moved past their
        targets, where a value clip binds. (A random move shifts every value about alike, often all away from
        their targets, where a value clip never binds.)"""
        self.params.copy_(weights.double())
        with torch.no_grad():
            values = self.learner.network.forward(self.rollout, minibatch).values
        old, returns = self.learner.values[minibatch.samples], self.learner.returns[minibatch.samples]
        offset = 0
        for name, parameter in self.model.named_parameters():
            if name == "value_head.bias":
                break
            offset += parameter.numel()
        moved = weights.clone()
        moved[offset] += float(np.median(returns + 0.5 * (returns - old) - values))
        return moved

    def gradient(self, weights, minibatch):
        self.params.copy_(weights)
        return self.grads, self.learner.gradient(self.rollout, minibatch)


def edge(moves, binds):
    """The middle of the widest gap between consecutive ``moves`` (and 0) where a clip there ``binds`` on some
    sample."""
    ordered = np.unique(np.append(moves, 0.0))
    candidates = [
        (high - low, (low + high) / 2.0)
        for low, high in zip(ordered, ordered[1:], strict=False)
        if binds((low + high) / 2.0).any()
    ]
    assert candidates, f"no clip binds on this minibatch (moves {moves}): move the weights another way"
    return float(max(candidates)[1])


def moved_weights(params, seed=0):
    """The weights moved by MOVE times each entry's size (plus a little, for the zero biases)."""
    noise = torch.randn(params.shape, generator=torch.Generator().manual_seed(seed), dtype=params.dtype)
    return params + MOVE * noise * (params.abs() + 0.05)


def ppo_case(family, path, value_clip, normalize, monkeypatch):
    """A PPO worker on ``path`` after one update (its next rollout starts mid-episode, an LSTM's from a state not
    zeros) and a second rollout; the shared model moved; the clips set (see PPO_COMMON); then the learn loop's first
    minibatch, on the pulled weights, pushed (recorded, not applied), and the reference's gradient of it."""
    settings = {**COMMON, **family, **PPO_COMMON, "normalize_advantage": normalize}
    monkeypatch.setenv(PATH_ENV, path.name)
    worker, coordinator = make_worker(**settings)
    assert worker.learner.name == path.name and isinstance(worker.learner, PPOUpdate)
    coordinator.params.copy_(worker.params)  # the worker's seeded initial weights (the rig's own are not seeded)
    worker.step()
    worker.acted_at = worker.channel.pull(worker.params)
    worker.rollout()
    assert worker.terminated.sum() > 0 and worker.truncated.sum() > 0  # both kinds of episode end are in it
    acting = worker.params.clone()
    moved = moved_weights(acting)
    reference = PPOReference(worker)
    first = reference.plan(acting.double())[0]
    if value_clip:
        moved = reference.toward_returns(moved, first)
    reference.set_clips(moved.double(), first, value_clip, (worker.config, reference.config))
    coordinator.params.copy_(moved)  # another worker's pushes, while this one acted
    channel = worker.channel = RecordingChannel(worker.channel)
    taken = []
    gradient = worker.learner.gradient

    def recording(rollout, minibatch):
        taken.append((minibatch, gradient(rollout, minibatch)))
        return taken[-1][1]

    worker.learner.gradient = recording
    worker.terminate = lambda: True  # the loop's first minibatch only: it stops before the second
    pushed = learn_rollout(
        worker.learner, worker.batch, np.random.default_rng(0), worker.gradient_step, worker.grads_np, worker, 0
    )
    assert pushed == 1 and len(channel.pushed) == 1 and len(taken) == 1
    assert torch.equal(worker.params, moved)  # the gradient was taken on the pulled, moved weights
    minibatch, terms = taken[0]
    np.testing.assert_array_equal(minibatch.samples, first.samples)  # (the reference's plan: the same draw)
    expected, expected_terms = reference.gradient(moved.double(), minibatch)
    return Case(
        worker,
        terms,
        channel.pushed[0].double(),
        expected_terms,
        expected.double().clone(),
        reference,
        minibatch,
        moved.double(),
    )


@dataclasses.dataclass
class Case:
    """What ``ppo_case`` ran: the worker, what it pushed (its terms and gradient), the reference's, the reference
    itself, the minibatch and the moved weights."""

    worker: Worker
    terms: np.ndarray
    pushed: torch.Tensor
    expected_terms: np.ndarray
    expected: torch.Tensor
    reference: PPOReference
    minibatch: Minibatch
    moved: torch.Tensor


@pytest.mark.parametrize("normalize", [False, True], ids=["raw-adv", "normalised-adv"])
@pytest.mark.parametrize("value_clip", [False, True], ids=["no-value-clip", "value-clip"])
@pytest.mark.parametrize("path", PATHS["ppo"].values(), ids=PATHS["ppo"].keys())
@pytest.mark.parametrize("family", FAMILIES.values(), ids=FAMILIES.keys())
def test_every_ppo_path_pushes_the_reference_gradient(family, path, value_clip, normalize, monkeypatch):
    """The conformance test under --algo ppo: the gradient a worker pushes on ``path`` for a minibatch taken on
    weights that moved since acting (ratios away from 1, the clip binding on some samples and not others, and so
    the value clip where on) is the float64 reference's, and so are its terms (the loss's, approx_kl, the clip fraction,
    the explained variance). A path that does not cover the family says why, and is skipped with that reason."""
    why_not = path.supports(*model_of({**family, **PPO_COMMON}))
    if why_not is not None:
        pytest.skip(f"{path.name} does not cover this family: {why_not}")
    if family.get("bf16") and value_clip:
        pytest.skip("bfloat16's values (1% off) cross the value clip's edge: it is held on the float32 CNN families")
    case = ppo_case(family, path, value_clip, normalize, monkeypatch)
    cfg = case.worker.config
    assert case.expected_terms[5] > 0.0  # some ratios are clipped
    sizes = [p.numel() for p in case.worker.model.parameters()]
    for name in ("clip_range", "clip_range_vf") if value_clip else ("clip_range",):  # each clip binds: lifted, the
        assert not clip_lifted_conforms(case, name, sizes)  # reference's gradient is another
    assert_conforms(case.pushed, case.expected, sizes, bf16=cfg.bf16, bf16_tol=PPO_BF16_NORM_TOL)
    if cfg.bf16:
        np.testing.assert_allclose(case.terms[:4], case.expected_terms[:4], rtol=BF16_NORM_TOL, atol=1e-3)
    else:
        np.testing.assert_allclose(case.terms, case.expected_terms, rtol=1e-4, atol=1e-6)


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


def clip_lifted_conforms(case, name, sizes):
    """Whether the reference's gradient with the clip ``name`` lifted conforms to its gradient with it."""
    cfg = case.reference.config
    kept = getattr(cfg, name)
    setattr(cfg, name, 1e9 if name == "clip_range" else None)
    lifted = case.reference.gradient(case.moved, case.minibatch)[0].double().clone()
    setattr(cfg, name, kept)
    try:
        assert_conforms(lifted, case.expected, sizes)
    except AssertionError:
        return False
    return True


def test_the_ppo_reference_gradient_sees_every_term(monkeypatch):
    """What makes the PPO conformance test able to fail: on one minibatch at moved weights, the float64 reference's
    gradient moves with the clip range, the value clip, the entropy coefficient and --normalize-advantage, each
    beyond the test's tolerance."""
    case = ppo_case(FAMILIES["mlp"], PATHS["ppo"]["mlp+closed-form"], True, False, monkeypatch)
    sizes = [p.numel() for p in case.worker.model.parameters()]
    cfg = case.reference.config
    for name, value in (
        ("clip_range", 10.0),  # no ratio clipped
        ("clip_range_vf", None),  # no value clip
        ("ent_coef", 0.0),
        ("normalize_advantage", True),
    ):
        kept = getattr(cfg, name)
        setattr(cfg, name, value)
        changed = case.reference.gradient(case.moved, case.minibatch)[0].double().clone()
        setattr(cfg, name, kept)
        with pytest.raises(AssertionError):
            assert_conforms(changed, case.expected, sizes)
    torch.testing.assert_close(case.reference.gradient(case.moved, case.minibatch)[0].double(), case.expected)


# the path each family takes by default under --algo ppo
CHOSEN_PPO = {
    name: ("reference" if "lstm" in name else "cnn+closed-form" if name.startswith("cnn") else "mlp+closed-form")
    for name in FAMILIES
}


@pytest.mark.parametrize("algo", ["a3c", "ppo"])
@pytest.mark.parametrize("family", FAMILIES.keys())
def test_each_family_takes_its_fast_path_or_the_reference_with_a_line_that_says_why(family, algo, monkeypatch):
    monkeypatch.delenv(PATH_ENV, raising=False)
    monkeypatch.delenv(KERNEL_ENV, raising=False)
    choice = choose(*model_of({**FAMILIES[family], "algo": algo}))
    expected = CHOSEN[family] if algo == "a3c" else CHOSEN_PPO[family]
    if not kernel_available():
        expected = expected.replace("+kernel", "+closed-form")
    assert choice.path.name == expected and choice.path is PATHS[algo][expected]
    if expected == "reference":
        assert choice.path is REFERENCES[algo]
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


def test_a_path_is_forced_under_ppo_too(monkeypatch):
    """A3C_UPDATE_PATH under --algo ppo: a path of PPO's is taken (or refused where it does not cover the model); a
    name PPO has not (A3C's kernel, a typo) is an error that names PPO's paths."""
    cartpole = model_of(dict(env="CartPole-v1", algo="ppo"))
    monkeypatch.setenv(PATH_ENV, "reference")
    choice = choose(*cartpole)
    assert choice.path is REFERENCES["ppo"] and choice.notice == f"a3c: update path reference ({PATH_ENV}=reference)"
    monkeypatch.setenv(PATH_ENV, "mlp+closed-form")
    assert choose(*cartpole).path is PATHS["ppo"]["mlp+closed-form"]
    monkeypatch.setenv(PATH_ENV, "cnn+closed-form")
    with pytest.raises(UserError, match="does not cover this model: a MlpTorso"):
        choose(*cartpole)
    for name in ("mlp+kernel", "bogus"):
        monkeypatch.setenv(PATH_ENV, name)
        with pytest.raises(UserError, match="not an update path of --algo ppo.*mlp[+]closed-form"):
            choose(*cartpole)


@pytest.mark.parametrize("algo", ["a3c", "ppo"])
def test_an_unknown_forced_path_is_one_line_and_exit_2_under_either_objective(algo, tmp_path):
    """Through the command line: ``A3C_UPDATE_PATH=bogus`` is refused in one line, exit code 2, no traceback (under
    --algo ppo it used to be ignored: the run trained and exited 0)."""
    env = {**os.environ, PATH_ENV: "bogus"}
    done = subprocess.run(
        [sys.executable, "-m", "a3c.train", "--env", "CartPole-v1", "--algo", algo, "--workers", "1"]
        + ["--n-steps", "64", "--total-steps", "3000", "--eval-every", "0", "--run-dir", str(tmp_path / "run")],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    errors = [line for line in done.stderr.splitlines() if f"{PATH_ENV}=bogus" in line]
    assert len(errors) == 1 and "not an update path" in errors[0], done.stderr
    assert "Traceback" not in done.stderr and "reached --total-steps" not in done.stderr


def test_the_reference_covers_every_family_and_every_fast_path_one():
    """The reference is the definition: it applies to every model the flags can build, under either objective.
    Every fast path is there for some family (none registered that nothing takes)."""
    for algo, reference in REFERENCES.items():
        models = [model_of({**family, "algo": algo}) for family in FAMILIES.values()]
        assert all(reference.supports(*m) is None for m in models)
        for path in FAST_PATHS[algo]:
            if "kernel" in path.name and not kernel_available():
                continue
            assert any(path.supports(*m) is None for m in models), (algo, path.name)
    assert set(PATHS) == set(REFERENCES) == set(FAST_PATHS) == {"a3c", "ppo"}


def test_the_worker_spec_is_the_rig_s():
    """(The rig's envs describe as the families say: vector, image, each action space.)"""
    worker, _ = make_worker(**{**COMMON, "env": IMAGE_ENV_ID})
    assert worker_spec(worker).obs_shape == (10, 10, 2)
