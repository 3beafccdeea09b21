"""The registered update paths (a3c.learn.update.protocol) and the choice of one, made once per worker at its start.

    path               network pass                    loss gradient
    mlp+kernel         MLP by hand (backprop.py)       the C kernel (fused_loss.py)        fast
    mlp+closed-form    MLP by hand                     closed form (closed_form.py)        fast
    cnn+kernel         CNN by hand (cnn_backprop.py)   the C kernel                        fast
    cnn+closed-form    CNN by hand                     closed form                         fast
    reference          autograd (reference.py)         autograd over the torch loss        every model
    ppo+reference      autograd (acting)               --algo ppo: a3c.learn.objectives.ppo            every model

``--algo ppo`` takes ``ppo+reference``: the network pass's ``act`` for acting, and a3c.learn.objectives.ppo's clipped objective
(autograd, over minibatches the worker pushes one at a time) for the update; no fast path covers it yet.

The first fast path, in this order, whose parts both cover the model (``UpdatePath.supports``) is taken; where none
does, the reference, and ``choose`` returns the one line that says so (which path, and why: e.g. ``--lstm``). Every
path here is held to the reference by one conformance test (tests/learn/update/test_paths.py): a fast path that does not
pass it is not registered. ``A3C_UPDATE_PATH=<name>`` forces a path (``reference`` for a comparison);
``A3C_UPDATE_KERNEL=0`` leaves out the kernel's.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from a3c.learn.distributions import Distribution
from a3c.learn.model import ActorCritic
from a3c.learn.update.closed_form import ClosedFormLoss
from a3c.learn.update.cnn import CnnByHand
from a3c.learn.update.kernel import KernelLoss
from a3c.learn.update.mlp import MlpByHand
from a3c.learn.update.protocol import UpdatePath
from a3c.learn.update.reference import AutogradLoss, AutogradNetwork
from a3c.spec.config import Config
from a3c.spec.errors import UserError

PATH_ENV = "A3C_UPDATE_PATH"  # a path's name: that path, where it covers the model (else an error)

REFERENCE = UpdatePath("reference", AutogradNetwork, AutogradLoss)
FAST_PATHS = (
    UpdatePath("mlp+kernel", MlpByHand, KernelLoss),
    UpdatePath("mlp+closed-form", MlpByHand, ClosedFormLoss),
    UpdatePath("cnn+kernel", CnnByHand, KernelLoss),
    UpdatePath("cnn+closed-form", CnnByHand, ClosedFormLoss),
)
PPO = UpdatePath("ppo+reference", AutogradNetwork, AutogradLoss)  # acting only: the update is a3c.learn.objectives.ppo's
PATHS = {path.name: path for path in (*FAST_PATHS, REFERENCE)}


@dataclass(frozen=True)
class Choice:
    """The path a worker runs, and the line to print before training where it is not the fast one it would be."""

    path: UpdatePath
    notice: str | None


def choose(config: Config, model: ActorCritic, dist: Distribution) -> Choice:
    """The update path for ``model`` (built from ``config``) and ``dist``, in this process's environment: what every
    worker of the run takes (they inherit it) and summary.json's ``update_path``."""
    if config.algo == "ppo":
        return Choice(PPO, None)  # the second objective is written on the reference path only
    forced = os.environ.get(PATH_ENV)
    if forced:
        path = PATHS.get(forced)
        if path is None:
            raise UserError(f"{PATH_ENV}={forced}: not an update path (one of {', '.join(PATHS)})")
        why_not = path.supports(config, model, dist)
        if why_not is not None:
            raise UserError(f"{PATH_ENV}={forced}: that path does not cover this model: {why_not}")
        return Choice(path, f"a3c: update path {path.name} ({PATH_ENV}={forced})")
    for path in FAST_PATHS:
        if path.supports(config, model, dist) is None:
            return Choice(path, None)
    # every fast path's loss gradient covers some distribution; it is their network passes that leave a model out
    reasons = dict.fromkeys(path.network.supports(config, model) or "" for path in FAST_PATHS)
    why = "; ".join(reason for reason in reasons if reason)
    return Choice(
        REFERENCE,
        f"a3c: update path reference (autograd through the model and the loss, slower): no fast path covers {why}",
    )
