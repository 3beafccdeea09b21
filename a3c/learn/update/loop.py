"""The learn loop: one rollout's update, whatever the objective (a3c.learn.objectives) and the path
(a3c.learn.update.paths), written once. The worker (a3c.run.worker) runs it on its channel; ``--workers auto``
(a3c.run.workers_auto) times it on a stand-in; nothing else re-enacts it.

    plan <- the learner's minibatches (its targets first, with the weights that acted)
    for each minibatch:
        [between minibatches: the heartbeat, the stop; pull the shared weights; the policy lag, --max-policy-lag]
        gradient -> norm, skip if not finite, clip (a3c.learn.update.step) -> push with the scheduled lr -> record

A3C's plan is one minibatch taken on the weights that acted (no pull, nothing between): exactly the loop it always
ran. PPO's is epochs of minibatches, each after a pull; the worker stays alive and stoppable through an update of
any length, because the heartbeat and the stop are looked at before every pull.

The policy lag (``--max-policy-lag``; Sample Factory's max_policy_lag, learner.py ``_prepare_batch``: experience whose
policy version is more than the limit behind the learner's is left out, measured once, before the learner trains on
it, so the learner's own steps on that batch never count): here, the shared optimizer's steps since the rollout's
policy acted that were *not* this worker's own pushes of this rollout, measured before every minibatch (others push
while a worker goes through its epochs, which Sample Factory's single learner has no counterpart of). With one worker
it is always 0: synchronous PPO, nothing dropped. The minibatches not taken are counted (``dropped``). The lag each
pushed minibatch records (``perf/policy_lag``) is the same count at its push: the steps other workers took since the
weights that acted (A3C's: those between its rollout's pull and its push). On Ray the push's own part is the previous
push's (its reply arrives one push late, a3c.run.backends.ray.channel), so there the count is approximate by a push.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from a3c.learn.update.protocol import Learner, Rollout
from a3c.learn.update.step import GradientStep

LOSS_TERMS = 4  # every learner's first terms: the loss's [total, policy, value, entropy]; diagnostics follow


class Exchange(Protocol):
    """What the loop needs from around it: the worker's channel and record (a3c.run.worker), or a stand-in."""

    def alive(self) -> bool:
        """Between minibatches: a sign of life (the heartbeat); False once the run is stopping (the loop returns)."""
        ...

    def pull(self) -> int:
        """The shared weights into the model's parameters; their version (the shared optimizer's step count)."""
        ...

    def push(self, pulled_at: int, lr: float) -> int:
        """The gradient (clipped, in the flat buffer) to the shared optimizer at ``lr``; the policy lag."""
        ...

    def global_step(self) -> int: ...

    def record(self, terms: np.ndarray, grad_norm: float, lag: int) -> None:
        """A pushed minibatch's terms (the learner's ``terms`` order), its pre-clip norm and lag."""
        ...

    def skipped(self) -> None:
        """A minibatch whose gradient or loss was not finite: not pushed."""
        ...

    def dropped(self, minibatches: int) -> None:
        """``minibatches`` of the plan not taken: their rollout's lag passed --max-policy-lag."""
        ...


def learn_rollout(
    learner: Learner,
    rollout: Rollout,
    rng: np.random.Generator,
    step: GradientStep,
    grads: np.ndarray,
    exchange: Exchange,
    acted_at: int,
    max_policy_lag: int = 0,
) -> int:
    """One rollout's update (see the module docstring), ``acted_at`` the version of the weights that acted (pulled
    before the rollout). Returns how many minibatches were pushed."""
    plan = learner.plan(rollout, rng)
    pushed = 0
    for i, minibatch in enumerate(plan):
        pulled_at = acted_at
        if minibatch.pull:
            if i and not exchange.alive():
                return pushed  # the run is stopping: what was pushed is recorded, the rest is not taken
            pulled_at = exchange.pull()
            if max_policy_lag and pulled_at - acted_at - pushed > max_policy_lag:
                exchange.dropped(len(plan) - i)
                return pushed
        terms = learner.gradient(rollout, minibatch)  # into the flat gradient buffer (``grads``' memory)
        grad_norm = step.clip(grads, terms[:LOSS_TERMS])  # (the diagnostics after them may be NaN: not checked)
        if grad_norm is None:  # a non-finite update would poison the shared model for every worker: skip it
            exchange.skipped()
            continue
        # the policy lag of this gradient: the steps others took between the weights that acted and the push (its
        # pull-to-push lag, which the push returns, plus theirs between acting and its pull; not this worker's own)
        # (Ray's pipelined push answers with the previous push's lag, one push late: never below 0 here)
        lag = max(0, exchange.push(pulled_at, step.lr(exchange.global_step())) + pulled_at - acted_at - pushed)
        pushed += 1
        exchange.record(terms, grad_norm, lag)
    return pushed
