"""The checks of a training configuration, run in the main process before any worker starts: every setting in its
range, and no setting given where it does nothing (a PPO flag under --algo a3c, a Ray flag without --backend ray, a
W&B flag without --track, --clip-obs without --normalize-obs, a V-trace clip without --targets vtrace, --start-method
under --backend serial, --push-every on a local Ray whose workers all use shared memory).
``check(config)`` raises a UserError naming the first problem and its fix; a3c/spec/config.py's ``Config.validate``
calls it."""

from __future__ import annotations

import math
import multiprocessing
from typing import TYPE_CHECKING, Any

from a3c.spec.errors import UserError
from a3c.spec.flags import (
    ALGOS,
    BACKENDS,
    ENV_BACKENDS,
    LR_SCHEDULES,
    OPTIMIZERS,
    PPO_ONLY_SETTINGS,
    RAY_SAME_NODE,
    SWITCHED_SETTINGS,
    TARGETS,
    VTRACE_SETTINGS,
    seed_check,
)

if TYPE_CHECKING:
    from a3c.spec.config import Config


def flag_name(field_name: str) -> str:
    """A Config field's flag: ``n_epochs`` -> ``--n-epochs``."""
    return "--" + field_name.replace("_", "-")


def ppo_only(name: str, value: Any) -> str:
    """The message for PPO's setting ``name`` (=``value``) in a run of --algo a3c, given or away from its default."""
    return (
        f"{flag_name(name)} {value} is for --algo ppo (A3C takes one gradient of each whole rollout: no epochs, "
        "minibatches or clipping); drop it, or add --algo ppo"
    )


def vtrace_only(name: str, value: Any) -> str:
    """The message for V-trace's setting ``name`` (=``value``) in a run of --targets gae."""
    return (
        f"{flag_name(name)} {value} is for --targets vtrace (GAE has no importance weights); drop it, or add "
        "--targets vtrace"
    )


def switched_only(name: str, config: Config, switch: str, on: Any) -> str:
    """The message for setting ``name`` given where its switch (``switch`` = ``on``) is off: it would do nothing."""
    given = flag_name(switch) if on is True else f"{flag_name(switch)} {on}"
    return f"{flag_name(name)} {getattr(config, name)} is for {given}; drop it, or add {given}"


# what each setting inert_settings may name needs, to count (said where a resumed run takes its default)
INERT_NEEDS = {
    "start_method": "worker processes (a --backend other than serial)",
    "push_every": "workers that reach the server by actor calls (--ray-same-node ray, or a --ray-address)",
}


def inert_settings(c: Config) -> dict[str, str]:
    """The settings given (away from their defaults) that two other settings together leave nothing to do, beyond
    SWITCHED_SETTINGS' one switch each, with the message that refuses each: --start-method under --backend serial (no
    process is started), --push-every on a local Ray whose workers all reach the server through shared memory."""
    inert = {}
    if c.backend == "serial" and c.start_method is not None:
        inert["start_method"] = (
            f"--start-method {c.start_method} is how worker processes start, and --backend serial starts none (every "
            "worker takes turns in this process); drop it, or use --backend shared-memory"
        )
    if c.backend == "ray" and c.ray_address is None and c.ray_same_node == "shared-memory" and c.push_every != 1:
        inert["push_every"] = (
            f"--push-every {c.push_every} is for workers that reach the server by actor calls, and a local Ray's (no "
            "--ray-address) are all on the server's node, where they use shared memory (--ray-same-node "
            "shared-memory); drop it, or add --ray-same-node ray"
        )
    return inert


def _positive(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0.0


def check(config: Config) -> None:
    """Raise UserError naming the first out-of-range setting of ``config`` and its valid range, or the first setting
    that does nothing in this run and how to drop it or make it count."""
    c, defaults = config, type(config)()
    checks: list[tuple[bool, str]] = [
        (
            c.workers == "auto" or (isinstance(c.workers, int) and c.workers >= 1),
            f"--workers must be at least 1 (got {c.workers}), or auto",
        ),
        (c.envs_per_worker >= 1, f"--envs-per-worker must be at least 1 (got {c.envs_per_worker})"),
        (c.total_steps >= 1, f"--total-steps must be at least 1 (got {c.total_steps})"),
        (
            c.run_dir is None or bool(c.run_dir.strip()),
            "--run-dir is empty; give a directory, or leave --run-dir out for runs/<env>__<exp-name>__<seed>__<time>",
        ),
        seed_check(c.seed),
        (c.n_steps >= 1, f"--n-steps must be at least 1 (got {c.n_steps})"),
        (0.0 < c.gamma <= 1.0, f"--gamma must be in (0, 1] (got {c.gamma})"),
        (0.0 <= c.gae_lambda <= 1.0, f"--gae-lambda must be in [0, 1] (got {c.gae_lambda})"),
        (math.isfinite(c.lr) and c.lr > 0.0, f"--lr must be a positive number (got {c.lr})"),
        (math.isfinite(c.ent_coef) and c.ent_coef >= 0.0, f"--ent-coef must be >= 0 (got {c.ent_coef})"),
        (math.isfinite(c.vf_coef) and c.vf_coef >= 0.0, f"--vf-coef must be >= 0 (got {c.vf_coef})"),
        (c.max_grad_norm > 0.0, f"--max-grad-norm must be > 0 (got {c.max_grad_norm})"),
        (c.algo in ALGOS, f"--algo must be one of {', '.join(ALGOS)} (got {c.algo!r})"),
        (c.n_epochs >= 1, f"--n-epochs must be at least 1 (got {c.n_epochs})"),
        (c.minibatch_size >= 1, f"--minibatch-size must be at least 1 (got {c.minibatch_size})"),
        (_positive(c.clip_range), f"--clip-range must be a positive number (got {c.clip_range})"),
        (
            c.clip_range_vf is None or _positive(c.clip_range_vf),
            f"--clip-range-vf must be a positive number, or none for no value clipping (got {c.clip_range_vf})",
        ),
        (c.max_policy_lag >= 0, f"--max-policy-lag must be >= 0 (0: no limit; got {c.max_policy_lag})"),
        *(
            (c.algo == "ppo" or getattr(c, name) == getattr(defaults, name), ppo_only(name, getattr(c, name)))
            for name in PPO_ONLY_SETTINGS
        ),
        (
            c.algo != "ppo" or c.minibatch_size <= c.n_steps * c.envs_per_worker,
            f"--minibatch-size {c.minibatch_size} is more than a worker's rollout (--n-steps {c.n_steps} x "
            f"--envs-per-worker {c.envs_per_worker} = {c.n_steps * c.envs_per_worker} samples) with "
            "--algo ppo; give a longer --n-steps or a smaller --minibatch-size",
        ),
        (c.targets in TARGETS, f"--targets must be one of {', '.join(TARGETS)} (got {c.targets!r})"),
        *(
            (_positive(getattr(c, name)), f"{flag_name(name)} must be a positive number (got {getattr(c, name)})")
            for name in VTRACE_SETTINGS
        ),
        *(
            (c.targets == "vtrace" or getattr(c, name) == getattr(defaults, name), vtrace_only(name, getattr(c, name)))
            for name in VTRACE_SETTINGS
        ),
        (
            c.lr_schedule in LR_SCHEDULES,
            f"--lr-schedule must be one of {', '.join(LR_SCHEDULES)} (got {c.lr_schedule!r})",
        ),
        (_positive(c.clip_obs), f"--clip-obs must be a positive number (got {c.clip_obs})"),
        (_positive(c.clip_reward), f"--clip-reward must be a positive number (got {c.clip_reward})"),
        (
            len(c.hidden_sizes) >= 1 and all(h >= 1 for h in c.hidden_sizes),
            f"--hidden-sizes must be one or more positive integers (got {list(c.hidden_sizes)})",
        ),
        (c.lstm >= 0, f"--lstm takes a size >= 1, or 0 for none (got {c.lstm})"),
        (math.isfinite(c.log_std_init), f"--log-std-init must be a finite number (got {c.log_std_init})"),
        (
            c.stop_at is None or math.isfinite(c.stop_at),
            f"--stop-at must be a finite return, or none (got {c.stop_at})",
        ),
        (c.checkpoint_every >= 0, f"--checkpoint-every must be >= 0 (got {c.checkpoint_every})"),
        (c.eval_every >= 0, f"--eval-every must be >= 0 (0: no evaluation; got {c.eval_every})"),
        (c.eval_episodes >= 0, f"--eval-episodes must be >= 0 (0: no evaluation; got {c.eval_episodes})"),
        (
            math.isfinite(c.checkpoint_every_s) and c.checkpoint_every_s >= 0.0,
            f"--checkpoint-every-s must be a number of seconds >= 0 (got {c.checkpoint_every_s})",
        ),
        (c.keep_checkpoints >= 0, f"--keep-checkpoints must be >= 0 (got {c.keep_checkpoints})"),
        (
            math.isfinite(c.tb_episode_points_per_s) and c.tb_episode_points_per_s >= 0.0,
            f"--tb-episode-points-per-s must be a number >= 0 (got {c.tb_episode_points_per_s})",
        ),
        (
            c.tensorboard is None or 0 <= c.tensorboard <= 65535,
            f"--tensorboard takes a port in 0..65535 (got {c.tensorboard})",
        ),
        (
            _positive(c.worker_timeout),
            f"--worker-timeout must be a positive number of seconds (got {c.worker_timeout})",
        ),
        (c.max_restarts >= 0, f"--max-restarts must be >= 0 (got {c.max_restarts})"),
        (c.max_skipped_in_row >= 1, f"--max-skipped-in-row must be at least 1 (got {c.max_skipped_in_row})"),
        (c.optimizer in OPTIMIZERS, f"--optimizer must be one of {', '.join(OPTIMIZERS)} (got {c.optimizer!r})"),
        (
            c.optimizer_eps is None or _positive(c.optimizer_eps),
            f"--optimizer-eps must be a positive number, or none for the optimizer's own (got {c.optimizer_eps})",
        ),
        (c.backend in BACKENDS, f"--backend must be one of {', '.join(BACKENDS)} (got {c.backend!r})"),
        (c.push_every >= 1, f"--push-every must be at least 1 (got {c.push_every})"),
        (
            c.env_backend in ENV_BACKENDS,
            f"--env-backend must be one of {', '.join(ENV_BACKENDS)} (got {c.env_backend!r})",
        ),
        (
            c.env_backend != "ale-vector" or c.env.split(":")[-1].startswith("ALE/"),
            f"--env-backend ale-vector steps ALE games (ALE/Name-v5 ids), not {c.env}; drop it",
        ),
        (
            c.ray_same_node in RAY_SAME_NODE,
            f"--ray-same-node must be one of {', '.join(RAY_SAME_NODE)} (got {c.ray_same_node!r})",
        ),
        (
            math.isfinite(c.ray_cpus_per_worker) and c.ray_cpus_per_worker >= 0.0,
            f"--ray-cpus-per-worker must be a number >= 0 (got {c.ray_cpus_per_worker})",
        ),
        *(
            (
                getattr(c, switch) == on or getattr(c, name) == getattr(defaults, name),
                switched_only(name, c, switch, on),
            )
            for switch, on, names in SWITCHED_SETTINGS
            for name in names
        ),
    ]
    for ok, message in checks:
        if not ok:
            raise UserError(message)
    for message in inert_settings(c).values():
        raise UserError(message)
    methods = multiprocessing.get_all_start_methods()
    if c.start_method is not None and c.start_method not in methods:
        raise UserError(f"--start-method {c.start_method} is not available here; use one of {', '.join(methods)}")
