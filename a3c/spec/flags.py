"""The vocabulary of the training flags: how a Config field declares its flag (``flag``: help text, group, argparse
options), the groups of ``--help``, the names each choice flag takes, and the parsers of the values that are more
than a number (``--workers N|auto``, an optional number's ``none``, ``--env-kwargs key=value``). No Config here:
a3c/spec/config.py declares the fields with these, a3c/spec/validation.py checks them."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from dataclasses import field
from typing import Any

from a3c.spec.errors import UserError

LR_SCHEDULES = ("constant", "linear")
ALGOS = ("a3c", "ppo")  # --algo: the workers' objective (a3c.learn.losses: actor_critic_loss, clipped_surrogate_loss)
# what each --algo trains with, in words (--show-config's header, the model card)
OBJECTIVES = {
    "a3c": "A3C's actor-critic loss, one gradient a rollout",
    "ppo": "PPO's clipped surrogate, --n-epochs x minibatches of each rollout, each pushed between pulls",
}
TARGETS = ("gae", "vtrace")  # --targets: the estimator of a rollout's advantages and value targets (both objectives)
OPTIMIZERS = ("adam", "rmsprop", "rmsprop-tf")  # a3c.learn.optim.OPTIMIZERS' keys (checked by a test)
BACKENDS = ("shared-memory", "serial", "ray")
ENV_BACKENDS = ("gymnasium", "ale-vector")  # a3c.spec.env_batch.ENV_BACKEND_MAKERS' keys (checked by a test)
RAY_SAME_NODE = ("shared-memory", "ray")  # --ray-same-node
# settings that validate() accepts away from their defaults only with --backend ray
RAY_ONLY_SETTINGS = ("push_every", "ray_same_node", "ray_address", "ray_node_ip", "ray_cpus_per_worker")
# settings that validate() accepts away from their defaults only with --track
WANDB_SETTINGS = ("wandb_project", "wandb_entity", "wandb_group")
# settings of the Gaussian policy alone: refused away from their defaults on an env whose actions are not Box
BOX_ONLY_SETTINGS = ("gsde", "log_std_init", "clipped_log_prob")
# Settings that count only where a switch turns them on: (the switch's field, the value that turns it on, the
# settings). validate() refuses one away from its default where its switch is off (it would be ignored: a typo or a
# forgotten switch trains silently without it), and a resumed run whose switch is off now takes their defaults in
# place of its checkpoint's, unless they are given again.
SWITCHED_SETTINGS: tuple[tuple[str, Any, tuple[str, ...]], ...] = (
    ("backend", "ray", RAY_ONLY_SETTINGS),
    ("track", True, WANDB_SETTINGS),
    ("normalize_obs", True, ("clip_obs",)),
    ("normalize_reward", True, ("clip_reward",)),
)
# settings of PPO's update alone: under --algo a3c a value away from the default, or a flag typed, is refused
PPO_ONLY_SETTINGS = ("n_epochs", "minibatch_size", "clip_range", "clip_range_vf", "max_policy_lag")
# settings of V-trace alone: refused the same way without --targets vtrace
VTRACE_SETTINGS = ("vtrace_rho_bar", "vtrace_c_bar")
# The settings a resumed run takes the defaults of, in place of its checkpoint's, where their switch is off now (a
# Ray run resumed on shared memory, a PPO run resumed under --algo a3c), unless given again: SWITCHED_SETTINGS and
# the objective's. validate() refuses the objective's with messages of their own (ppo_only, vtrace_only).
RESET_WHEN_OFF: tuple[tuple[str, Any, tuple[str, ...]], ...] = (
    *SWITCHED_SETTINGS,
    ("algo", "ppo", PPO_ONLY_SETTINGS),
    ("targets", "vtrace", VTRACE_SETTINGS),
)
NONE = "none"  # what an optional number's flag takes to mean "not set" (a resumed run's --stop-at cleared)


def seed_check(seed: Any) -> tuple[bool, str]:
    """The rule for a root seed (--seed of a3c.train, Config.validate, and of python -m a3c.evaluate) and its
    message: numpy's SeedSequence, which every random stream of a run comes from, takes no negative seeds."""
    return isinstance(seed, int) and seed >= 0, f"--seed must be an integer >= 0 (got {seed!r})"


def workers_arg(text: str) -> int | str:
    """--workers: 'auto' or a positive integer (the range is checked by Config.validate)."""
    if text == "auto":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"takes a number of workers or auto (got {text!r})") from None


def optional(convert: Callable[[str], Any]) -> Callable[[str], Any]:
    """The argparse type of an optional setting (``X | None``): ``none`` is None, anything else ``convert``\\ ed.
    A resumed run inherits its checkpoint's settings, so a setting that can be unset must be unsettable by a flag
    (``--stop-at none``)."""

    def parse(text: str) -> Any:
        if text.lower() == NONE:
            return None
        try:
            return convert(text)
        except ValueError:
            name = getattr(convert, "__name__", "value")
            raise argparse.ArgumentTypeError(f"invalid {name} value: {text!r} (or {NONE}: not set)") from None

    parse.__name__ = getattr(convert, "__name__", "value")
    return parse


# The groups of `python -m a3c.train --help`, in the order shown: (name, title, one line on what its flags are for).
# A flag names its group (``flag(group=...)``); one that names none is shown under OTHER_GROUP, at the end.
FLAG_GROUPS: tuple[tuple[str, str, str], ...] = (
    ("run", "run", "how long, from which seed and preset, and where the run goes (or which run goes on)"),
    ("env", "env", "the environment, and what a3c does to its observations and rewards"),
    ("algorithm", "algorithm", "the update: the objective, rollouts, returns, the loss and the shared optimizer"),
    ("model", "model", "the network built from the env's spaces"),
    ("evaluation", "evaluation", "the policy scored during training"),
    ("logging", "logging and checkpoints", "TensorBoard, Weights & Biases (--track) and the checkpoint files"),
    ("faults", "faults", "hung and failing workers, non-finite updates"),
    ("backend", "backend and Ray", "where the workers run: processes, one process, or a Ray cluster"),
)
OTHER_GROUP = ("other", "other options", "")


def flag(
    default: Any = dataclasses.MISSING,
    *,
    help: str,
    factory: Any = dataclasses.MISSING,
    internal: bool = False,
    group: str | None = None,
    **cli: Any,
) -> Any:
    """A dataclass field that carries its CLI help text (and extra argparse options) in its metadata; ``internal``:
    a setting the program resolves (recorded in config.json), not a flag; ``group``: the name of its group in
    --help (FLAG_GROUPS; None: OTHER_GROUP)."""
    metadata = {"help": help, "cli": cli, "internal": internal, "group": group}
    if factory is not dataclasses.MISSING:
        return field(default_factory=factory, metadata=metadata)
    return field(default=default, metadata=metadata)


def parse_scalar(text: str) -> Any:
    """'3' -> 3, '0.5' -> 0.5, 'true'/'false' -> bool, 'none' -> None, anything else stays a string."""
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("none", "null"):
        return None
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    return text


BARE = "\0bare"  # ExtendPairs' mark of a time given without pairs (no key=value pair holds a NUL)


class ExtendPairs(argparse.Action):
    """``--env-kwargs key=value ...`` given once or more: every time's pairs count (argparse's store would keep the
    last time's alone, without a word); a time with no pair (a bare ``--env-kwargs``, first or later) leaves ``BARE``
    in the list, which ``parse_env_kwargs`` refuses after the parse (not during it: a ``--help`` later on the line
    still prints the help)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option: Any = None):
        setattr(namespace, self.dest, [*(getattr(namespace, self.dest, None) or []), *(values or [BARE])])


def parse_env_kwargs(items: list[str]) -> dict[str, Any]:
    """Parse ``key=value`` strings into typed keyword arguments for gymnasium.make. A key given twice is refused (the
    second would win without a word: --env-kwargs given twice extends one list)."""
    if BARE in items:
        raise UserError("--env-kwargs needs key=value pairs (e.g. --env-kwargs latency=0.01), or leave it out")
    kwargs: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.isidentifier():
            raise UserError(
                f"--env-kwargs takes key=value pairs with a Python name as key (got {item!r}); e.g. latency=0.01"
            )
        if key in kwargs:
            raise UserError(f"--env-kwargs gives {key} twice ({key}={kwargs[key]!r} and {item}); give it once")
        kwargs[key] = parse_scalar(value)
    return kwargs
