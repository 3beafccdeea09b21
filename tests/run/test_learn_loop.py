"""a3c.learn.update.loop.learn_rollout, the one learn loop, with a fake exchange (the worker's side: alive, pull, push,
record, skipped, dropped) that logs what the loop asks in order: A3C's plan taken without a pull or a heartbeat;
PPO's with alive() and a pull before every minibatch after the first (a pull before the first), stopping where
alive() says so; --max-policy-lag counting other workers' steps only, the rest of the plan dropped and counted; a
non-finite gradient or loss skipped, never pushed or recorded; the clip before the push and the scheduled lr.
(The worker is the exchange in a run: tests/run/test_worker.py.)"""

from __future__ import annotations

import math

import numpy as np
import pytest
from worker_rig import make_worker

from a3c.learn.objectives.a3c import A3CUpdate
from a3c.learn.objectives.ppo import PPOUpdate
from a3c.learn.update.loop import learn_rollout
from a3c.learn.update.protocol import Learner, Minibatch, Rollout
from a3c.learn.update.step import GradientStep
from a3c.spec.config import Config

GRADS = 6  # the fake learner's flat gradient buffer


class FakeExchange:
    """The loop's exchange, logging each call. ``version``: the shared optimizer's step count; each push adds one
    (this worker's), each pull after the first adds ``others`` (other workers' pushes since the last pull).
    ``alive_answers``: what alive() says, in turn (then True)."""

    def __init__(self, version=0, others=0, alive_answers=(), step=0):
        self.version, self.others, self.alive_answers = version, others, list(alive_answers)
        self.step = step
        self.calls: list[str] = []
        self.pushes: list[tuple[int, float, float]] = []  # (pulled_at, lr, the gradient's norm as pushed)
        self.recorded: list[tuple[np.ndarray, float, int]] = []
        self.dropped_counts: list[int] = []
        self.grads: np.ndarray | None = None
        self.pulls = 0

    def alive(self):
        self.calls.append("alive")
        return self.alive_answers.pop(0) if self.alive_answers else True

    def pull(self):
        self.calls.append("pull")
        if self.pulls:
            self.version += self.others
        self.pulls += 1
        return self.version

    def push(self, pulled_at, lr):
        self.calls.append("push")
        norm = float(np.linalg.norm(self.grads)) if self.grads is not None else math.nan
        self.pushes.append((pulled_at, lr, norm))
        lag = self.version - pulled_at
        self.version += 1
        return lag

    def global_step(self):
        return self.step

    def record(self, terms, grad_norm, lag):
        self.calls.append("record")
        self.recorded.append((terms.copy(), grad_norm, lag))

    def skipped(self):
        self.calls.append("skipped")

    def dropped(self, minibatches):
        self.calls.append("dropped")
        self.dropped_counts.append(minibatches)


class FakeLearner(Learner):
    """A plan of ``count`` minibatches (each with a pull before it or not); minibatch i's gradient is all
    ``gradients[i]`` (default 1) into ``grads``, its terms [i, 0, 0, 0, diagnostic]."""

    name, terms, act = "fake", ("loss", "policy_loss", "value_loss", "entropy", "approx_kl"), None

    def __init__(self, grads, count, pull=True, gradients=None, loss=None, diagnostic=0.0):
        self.grads, self.count, self.pull = grads, count, pull
        self.gradients = gradients or {}
        self.loss = loss or {}
        self.diagnostic = diagnostic
        self.taken: list[int] = []

    def plan(self, rollout, rng):
        return [Minibatch(np.array([i]), None, self.pull, i // 2) for i in range(self.count)]

    def gradient(self, rollout, minibatch):
        i = int(minibatch.samples[0])
        self.taken.append(i)
        self.grads[:] = self.gradients.get(i, 1.0)
        return np.array([self.loss.get(i, float(i)), 0.0, 0.0, 0.0, self.diagnostic])


def run_loop(learner, exchange, grads, acted_at=0, max_policy_lag=0, **settings):
    config = Config(**{"max_grad_norm": 1e9, "total_steps": 1000, **settings})
    exchange.grads = grads
    rollout = Rollout.allocate(2, 1, (1,), np.float32, _NoDist())
    return learn_rollout(
        learner, rollout, np.random.default_rng(0), GradientStep(config), grads, exchange, acted_at, max_policy_lag
    )


class _NoDist:
    """Enough of a distribution for Rollout.allocate: one scalar action."""

    action_shape: tuple[int, ...] = ()
    action_dtype = None


def test_a3c_s_plan_is_taken_without_a_pull_or_a_heartbeat():
    """A3C: one minibatch, the whole rollout, its gradient on the weights that acted (no pull, no alive()); pushed
    as acted_at's, recorded once."""
    worker, _ = make_worker()
    assert isinstance(worker.learner, A3CUpdate)
    worker.rollout()
    exchange = FakeExchange(version=7)
    exchange.grads = worker.grads_np
    pushed = learn_rollout(
        worker.learner, worker.batch, worker.rng, worker.gradient_step, worker.grads_np, exchange, 7, 3
    )
    assert pushed == 1 and exchange.calls == ["push", "record"]
    assert exchange.pushes[0][0] == 7  # pulled_at: the acting version
    assert np.isfinite(exchange.recorded[0][0]).all()


def test_a_plan_without_pulls_asks_nothing_between_its_minibatches():
    grads = np.zeros(GRADS, dtype=np.float32)
    exchange = FakeExchange()
    assert run_loop(FakeLearner(grads, 3, pull=False), exchange, grads, acted_at=5) == 3
    assert exchange.calls == ["push", "record"] * 3
    assert [pulled_at for pulled_at, _, _ in exchange.pushes] == [5, 5, 5]


def test_ppo_pulls_before_every_minibatch_and_looks_alive_before_each_after_the_first():
    grads = np.zeros(GRADS, dtype=np.float32)
    exchange = FakeExchange()
    assert run_loop(FakeLearner(grads, 4), exchange, grads) == 4
    assert exchange.calls == ["pull", "push", "record"] + ["alive", "pull", "push", "record"] * 3
    # each pushed as of its own pull: the version after this worker's earlier pushes
    assert [pulled_at for pulled_at, _, _ in exchange.pushes] == [0, 1, 2, 3]


def test_ppo_s_real_plan_goes_through_the_loop_the_same_way():
    """The PPO learner of a worker (2 epochs x 16 // 4 minibatches): a pull before each, alive() before each after
    the first, everything pushed and recorded with its diagnostics."""
    worker, _ = make_worker(algo="ppo", n_steps=8, envs_per_worker=2, minibatch_size=4, n_epochs=2)
    assert isinstance(worker.learner, PPOUpdate)
    worker.rollout()
    exchange = FakeExchange()
    exchange.grads = worker.grads_np
    pushed = learn_rollout(worker.learner, worker.batch, worker.rng, worker.gradient_step, worker.grads_np, exchange, 0)
    assert pushed == 8
    assert exchange.calls == ["pull", "push", "record"] + ["alive", "pull", "push", "record"] * 7
    assert all(len(terms) == len(worker.learner.terms) for terms, _, _ in exchange.recorded)


def test_the_loop_stops_where_alive_says_so_and_records_only_what_it_pushed():
    grads = np.zeros(GRADS, dtype=np.float32)
    learner = FakeLearner(grads, 6)
    exchange = FakeExchange(alive_answers=[True, False])
    assert run_loop(learner, exchange, grads) == 2
    assert exchange.calls == ["pull", "push", "record", "alive", "pull", "push", "record", "alive"]
    assert learner.taken == [0, 1] and len(exchange.recorded) == 2
    assert exchange.dropped_counts == []  # a stop is not a drop


def test_one_worker_s_own_pushes_are_no_policy_lag():
    """Alone (no other worker pushes), the shared version moves only by this worker's pushes: nothing is dropped at
    any --max-policy-lag, however long the plan."""
    grads = np.zeros(GRADS, dtype=np.float32)
    exchange = FakeExchange(version=100)
    assert run_loop(FakeLearner(grads, 10), exchange, grads, acted_at=100, max_policy_lag=1) == 10
    assert "dropped" not in exchange.calls and all(lag == 0 for _, _, lag in exchange.recorded)


@pytest.mark.parametrize("limit, taken", [(1, 1), (2, 2), (5, 5), (6, 6)])
def test_other_workers_steps_past_max_policy_lag_drop_the_rest_of_the_plan(limit, taken):
    """Others push 1 step before each pull after the rollout's (acted at version 10, the first minibatch's pull sees
    11): minibatch k's lag is k + 1, this worker's own k pushes not counted. The minibatches past the limit are not
    taken: dropped, counted once as the rest of the plan."""
    grads = np.zeros(GRADS, dtype=np.float32)
    learner = FakeLearner(grads, 6)
    exchange = FakeExchange(version=10, others=1)
    exchange.pulls = 1  # (the rollout's pull was the first)
    assert run_loop(learner, exchange, grads, acted_at=10, max_policy_lag=limit) == taken
    assert learner.taken == list(range(taken))
    if taken < 6:
        assert exchange.dropped_counts == [6 - taken] and exchange.calls[-2:] == ["pull", "dropped"]
    else:
        assert exchange.dropped_counts == []


def test_the_recorded_lag_is_others_steps_since_the_rollout_acted():
    """What perf/policy_lag shows (and --max-policy-lag limits): the optimizer steps other workers took between the
    weights that acted and the minibatch's push, this worker's own pushes of the rollout not counted. Others push 3
    before each pull after the rollout's, and 2 more between each pull and its push: by minibatch k's push they took
    5 (k + 1), where the push alone sees 2 (its pull-to-push, which is all an A3C update, taken on the weights that
    acted, has)."""
    grads = np.zeros(GRADS, dtype=np.float32)
    exchange = FakeExchange(version=10, others=3)
    exchange.pulls = 1  # (the rollout's pull was the first)
    push = exchange.push

    def push_after_others(pulled_at, lr):
        exchange.version += 2
        return push(pulled_at, lr)

    exchange.push = push_after_others
    assert run_loop(FakeLearner(grads, 4), exchange, grads, acted_at=10) == 4
    assert [lag for _, _, lag in exchange.recorded] == [5 * (k + 1) for k in range(4)]
    a3c_exchange = FakeExchange(version=10)
    a3c_exchange.push = lambda pulled_at, lr: 2  # an A3C plan: no pull; the push's own lag is the policy lag
    assert run_loop(FakeLearner(grads, 1, pull=False), a3c_exchange, grads, acted_at=10) == 1
    assert [lag for _, _, lag in a3c_exchange.recorded] == [2]


def test_no_max_policy_lag_drops_nothing_however_far_others_moved():
    grads = np.zeros(GRADS, dtype=np.float32)
    exchange = FakeExchange(version=10, others=50)
    assert run_loop(FakeLearner(grads, 4), exchange, grads, acted_at=10, max_policy_lag=0) == 4
    assert exchange.dropped_counts == []


def test_a_non_finite_gradient_or_loss_is_skipped_not_pushed_and_the_loop_goes_on():
    grads = np.zeros(GRADS, dtype=np.float32)
    learner = FakeLearner(grads, 5, gradients={1: math.nan, 3: math.inf}, loss={2: math.nan})
    exchange = FakeExchange()
    assert run_loop(learner, exchange, grads) == 2
    assert learner.taken == [0, 1, 2, 3, 4]
    assert exchange.calls.count("skipped") == 3 and exchange.calls.count("push") == 2
    assert [terms[0] for terms, _, _ in exchange.recorded] == [0.0, 4.0]  # only what was pushed is recorded
    # each skipped minibatch is followed by the next one's alive() and pull, never by a push
    for i, call in enumerate(exchange.calls):
        if call == "skipped":
            assert exchange.calls[i + 1 : i + 3] == ["alive", "pull"]


def test_a_non_finite_diagnostic_does_not_skip_the_update():
    """Terms after the loss's four (PPO's explained variance is NaN where the targets do not vary) are recorded,
    not checked: the gradient is pushed."""
    grads = np.zeros(GRADS, dtype=np.float32)
    exchange = FakeExchange()
    assert run_loop(FakeLearner(grads, 2, diagnostic=math.nan), exchange, grads) == 2
    assert "skipped" not in exchange.calls and all(math.isnan(terms[4]) for terms, _, _ in exchange.recorded)


def test_the_gradient_is_clipped_before_the_push_and_pushed_at_the_scheduled_lr():
    """A gradient of norm 10 with --max-grad-norm 1: pushed at norm 1, recorded with its norm before the clip; the
    lr is the schedule's at the exchange's global step (linear: half of --lr at half of --total-steps)."""
    grads = np.zeros(4, dtype=np.float32)
    exchange = FakeExchange(step=500)
    learner = FakeLearner(grads, 1, gradients={0: 5.0})  # [5, 5, 5, 5]: norm 10
    run_loop(learner, exchange, grads, max_grad_norm=1.0, lr=0.01, lr_schedule="linear")
    _, lr, pushed_norm = exchange.pushes[0]
    assert math.isclose(pushed_norm, 1.0, rel_tol=1e-5) and math.isclose(exchange.recorded[0][1], 10.0, rel_tol=1e-6)
    assert math.isclose(lr, 0.005, rel_tol=1e-9)
