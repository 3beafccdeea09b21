"""The registered update paths (a3c.learn.update.protocol) of each objective, and the choice of one, made once per
worker at its start.

    objective  path               network pass                  loss gradient
    a3c        mlp+kernel         MLP by hand (mlp.py)          the C kernel (kernel.py)                 fast
    a3c        mlp+closed-form    MLP by hand                   closed form (closed_form.py)             fast
    a3c        cnn+kernel         CNN by hand (cnn.py)          the C kernel                             fast
    a3c        cnn+closed-form    CNN by hand                   closed form                              fast
    a3c        reference          autograd (reference.py)       autograd over the torch loss             every model
    ppo        mlp+closed-form    MLP by hand                   the surrogate's closed form (ppo.py)     fast
    ppo        cnn+closed-form    CNN by hand                   the surrogate's closed form              fast
    ppo        reference          autograd                      autograd over the torch surrogate        every model

The first fast path of the run's objective (``--algo``), in this order, whose parts both cover the model
(``UpdatePath.supports``) is taken; where none does, the objective's reference, and ``choose`` returns the one line
that says so (which path, and why: e.g. ``--lstm``). Every path here is held to its objective's float64 reference by
one conformance test (tests/learn/update/test_paths.py): a fast path that does not pass it is not registered.
``A3C_UPDATE_PATH=<name>`` forces a path of the run's objective, under either objective (``reference`` for a
comparison; a name the objective has not, or a path that does not cover the model, is an error);
``A3C_UPDATE_KERNEL=0`` leaves out the kernel's.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from a3c.learn.distributions import Distribution
from a3c.learn.model import ActorCritic
from a3c.learn.objectives.a3c import A3C
from a3c.learn.objectives.ppo import PPO, AutogradSurrogate, ClosedFormSurrogate
from a3c.learn.update.closed_form import ClosedFormLoss
from a3c.learn.update.cnn import CnnByHand
from a3c.learn.update.kernel import KernelLoss
from a3c.learn.update.mlp import MlpByHand
from a3c.learn.update.protocol import UpdatePath
from a3c.learn.update.reference import AutogradLoss, AutogradNetwork
from a3c.spec.config import Config
from a3c.spec.errors import UserError

PATH_ENV = (
    "A3C_UPDATE_PATH"  # a path's name: that path of the run's objective, where it covers the model (else an error)
)

FAST_PATHS: dict[str, tuple[UpdatePath, ...]] = {
    "a3c": (
        UpdatePath("mlp+kernel", MlpByHand, KernelLoss, A3C),
        UpdatePath("mlp+closed-form", MlpByHand, ClosedFormLoss, A3C),
        UpdatePath("cnn+kernel", CnnByHand, KernelLoss, A3C),
        UpdatePath("cnn+closed-form", CnnByHand, ClosedFormLoss, A3C),
    ),
    "ppo": (
        UpdatePath("mlp+closed-form", MlpByHand, ClosedFormSurrogate, PPO),
        UpdatePath("cnn+closed-form", CnnByHand, ClosedFormSurrogate, PPO),
    ),
}
REFERENCES: dict[str, UpdatePath] = {
    "a3c": UpdatePath("reference", AutogradNetwork, AutogradLoss, A3C),
    "ppo": UpdatePath("reference", AutogradNetwork, AutogradSurrogate, PPO),
}
REFERENCE = REFERENCES["a3c"]
# every objective's paths by name: PATHS[objective][name]
PATHS: dict[str, dict[str, UpdatePath]] = {
    objective: {path.name: path for path in (*FAST_PATHS[objective], REFERENCES[objective])} for objective in REFERENCES
}


@dataclass(frozen=True)
class Choice:
    """The path a worker runs, and the line to print before training where it is not the fast one it would be."""

    path: UpdatePath
    notice: str | None


def choose(config: Config, model: ActorCritic, dist: Distribution) -> Choice:
    """The update path for ``model`` (built from ``config``) and ``dist`` under ``config.algo``, in this process's
    environment: what every worker of the run takes (they inherit it) and summary.json's ``update_path``."""
    objective = config.algo
    paths = PATHS[objective]
    forced = os.environ.get(PATH_ENV)
    if forced:
        path = paths.get(forced)
        if path is None:
            raise UserError(
                f"{PATH_ENV}={forced}: not an update path of --algo {objective} (one of {', '.join(paths)})"
            )
        why_not = path.supports(config, model, dist)
        if why_not is not None:
            raise UserError(f"{PATH_ENV}={forced}: that path does not cover this model: {why_not}")
        return Choice(path, f"a3c: update path {path.name} ({PATH_ENV}={forced})")
    for path in FAST_PATHS[objective]:
        if path.supports(config, model, dist) is None:
            return Choice(path, None)
    # every fast path's loss gradient covers some distribution; it is their network passes that leave a model out
    reasons = dict.fromkeys(path.network.supports(config, model) or "" for path in FAST_PATHS[objective])
    why = "; ".join(reason for reason in reasons if reason)
    return Choice(
        REFERENCES[objective],
        f"a3c: update path reference (autograd through the model and the loss, slower): no fast path covers {why}",
    )
