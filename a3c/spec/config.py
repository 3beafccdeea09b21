"""The training configuration: one dataclass whose fields are the CLI flags, each with its help line and group
(declared with a3c/spec/flags.py's ``flag``), the properties derived from them, and ``validate`` (the checks of
a3c/spec/validation.py, run in the main process before any worker starts)."""

from __future__ import annotations

import dataclasses
import multiprocessing
from dataclasses import dataclass
from typing import Any

from a3c.spec import validation
from a3c.spec.flags import (
    ALGOS,
    BACKENDS,
    ENV_BACKENDS,
    FLAG_GROUPS,
    LR_SCHEDULES,
    OPTIMIZERS,
    OTHER_GROUP,
    PPO_ONLY_SETTINGS,
    RAY_ONLY_SETTINGS,
    RAY_SAME_NODE,
    SWITCHED_SETTINGS,
    TARGETS,
    VTRACE_SETTINGS,
    WANDB_SETTINGS,
    flag,
    optional,
    parse_env_kwargs,
    parse_scalar,
    seed_check,
    workers_arg,
)

# (the names other modules have imported from here since before a3c/spec/flags.py held them)
__all__ = [
    "ALGOS",
    "BACKENDS",
    "ENV_BACKENDS",
    "FLAG_GROUPS",
    "LR_SCHEDULES",
    "OPTIMIZERS",
    "OTHER_GROUP",
    "PPO_ONLY_SETTINGS",
    "RAY_ONLY_SETTINGS",
    "SWITCHED_SETTINGS",
    "RAY_SAME_NODE",
    "TARGETS",
    "VTRACE_SETTINGS",
    "WANDB_SETTINGS",
    "Config",
    "flag",
    "parse_env_kwargs",
    "parse_scalar",
    "seed_check",
]


@dataclass
class Config:
    """Every setting of a training run: one field per flag of ``python -m a3c.train``, named like the flag without
    its leading ``--`` and with ``_`` in place of ``-`` (``--total-steps`` is ``total_steps``)."""

    env: str = flag(
        "CartPole-v1", group="env", help="gymnasium env id: a registered id, 'envs/Name-v0', or 'module:Name-v0'"
    )
    preset: str | None = flag(
        None,
        group="run",
        help="a table of hyperparameters from a3c/spec/presets.toml, each for one objective (--algo): by default the "
        "one named like --env for the run's objective (an ALE/ game: atari), else the plain defaults of the objective "
        "for the env's action space (the tables discrete and continuous, each for its family's default objective: "
        "a3c for discrete actions, ppo for continuous; discrete@ppo and continuous@a3c for the other); 'none': those "
        "plain defaults, even where --env has a table. NAME@OBJ is NAME's table for --algo OBJ. Flags given override "
        "the table. config.json records the one applied",
    )
    workers: int | str = flag(
        "auto",
        group="run",
        help="number of worker processes, or auto: measure the env's step time against the model's cost at start-up "
        "and run as many as keep every core busy (one per core for fast envs, more for slow ones)",
        type=workers_arg,
        metavar="N|auto",
    )
    envs_per_worker: int = flag(8, group="env", help="envs each worker steps together under one batched forward pass")
    total_steps: int = flag(
        500_000, group="run", help="stop after this many env steps, summed over all workers and envs"
    )
    seed: int = flag(
        1,
        group="run",
        help="the run's root seed: every random stream (each worker's envs and sampler, each restart, each resume) "
        "is derived from it",
    )
    run_dir: str | None = flag(
        None,
        group="run",
        help="run directory (default: runs/<env>__<exp-name>__<seed>__<unix-time>)",
        metavar="RUN_DIR",
    )
    exp_name: str | None = flag(
        None,
        group="run",
        help="experiment name, used in the default run directory name (default: the objective, a3c or ppo)",
        metavar="NAME",
    )
    algo: str = flag(
        "a3c",
        group="algorithm",
        help="the workers' objective: a3c (one gradient of the actor-critic loss per rollout) or ppo (PPO's clipped "
        "surrogate against the policy that acted: --n-epochs over minibatches of --minibatch-size of the worker's "
        "rollout, each minibatch's gradient pushed to the shared optimizer and the weights pulled again before the "
        "next; DPPO / APPO in spirit). Each has its own presets and plain defaults (--preset); the flags marked "
        "'with --algo ppo' are refused under a3c (default: the objective of the env's preset, else that of the "
        "plain defaults of the env's action-space family, a3c/spec/presets.toml)",
        choices=ALGOS,
    )
    n_epochs: int = flag(4, group="algorithm", help="with --algo ppo: passes over each rollout")
    minibatch_size: int = flag(
        64,
        group="algorithm",
        help="with --algo ppo: samples per minibatch (each one gradient pushed); with --lstm, whole envs' rollouts "
        "(minibatch-size // n-steps of them, at least one)",
    )
    clip_range: float = flag(
        0.2,
        group="algorithm",
        help="with --algo ppo: the probability ratio against the acting policy is clipped to [1 - clip, 1 + clip]",
    )
    clip_range_vf: float | None = flag(
        None,
        group="algorithm",
        help="with --algo ppo: value clipping: the value loss takes, per sample, the larger of the squared error of "
        "the value and that of the acting value plus the change clipped to +-CLIP (CleanRL's clip_vloss, PPO2's), "
        "a pessimistic bound; SB3's clip_range_vf takes the clipped error alone. none: no value clipping",
        metavar="CLIP",
    )
    max_policy_lag: int = flag(
        0,
        group="algorithm",
        help="with --algo ppo: stop a rollout's minibatches once the shared model has taken more than this many "
        "optimizer steps since the rollout's policy acted (Sample Factory's --max_policy_lag); 0: never, the clipped "
        "ratio against the acting policy alone handles the staleness",
    )
    n_steps: int = flag(5, group="algorithm", help="rollout length: env steps per env between two updates of a worker")
    gamma: float = flag(0.99, group="algorithm", help="discount factor, in (0, 1]")
    gae_lambda: float = flag(
        1.0, group="algorithm", help="GAE lambda in [0, 1]; 1.0 gives the classic n-step A3C returns"
    )
    lr: float = flag(1e-3, group="algorithm", help="learning rate of the shared optimizer")
    lr_schedule: str = flag(
        "constant",
        group="algorithm",
        help="learning-rate schedule: constant, or linear (from --lr down to 0 at --total-steps, as rl-zoo3's lin_)",
        choices=LR_SCHEDULES,
    )
    ent_coef: float = flag(0.01, group="algorithm", help="entropy bonus coefficient")
    vf_coef: float = flag(0.5, group="algorithm", help="value loss coefficient")
    normalize_advantage: bool = flag(
        False,
        group="algorithm",
        help="normalise each update's advantages to mean 0 and std 1 before the policy gradient (SB3's "
        "normalize_advantage); the value targets keep the raw ones",
    )
    targets: str = flag(
        "gae",
        group="algorithm",
        help="how the rollout's advantages and value targets are computed: gae (GAE with the truncation bootstrap) "
        "or vtrace (V-trace, IMPALA's, with truncated importance weights against the current policy, for samples "
        "the shared model has moved past); both objectives",
        choices=TARGETS,
    )
    vtrace_rho_bar: float = flag(
        1.0,
        group="algorithm",
        help="with --targets vtrace: the importance weights of the temporal differences are truncated at this "
        "(rho-bar; IMPALA's 1.0)",
    )
    vtrace_c_bar: float = flag(
        1.0,
        group="algorithm",
        help="with --targets vtrace: the importance weights of the traces are truncated at this (c-bar; IMPALA's 1.0)",
    )
    max_grad_norm: float = flag(1.0, group="algorithm", help="clip each worker's gradient to this global L2 norm")
    optimizer: str = flag(
        "adam",
        group="algorithm",
        help="shared optimizer (rmsprop: PyTorch's; rmsprop-tf: TensorFlow's, as the A3C paper and SB3's A2C on Atari)",
        choices=OPTIMIZERS,
    )
    optimizer_eps: float | None = flag(
        None,
        group="algorithm",
        help="the shared optimizer's eps, added to the root of its second moment (under it for rmsprop-tf); default: "
        "the optimizer's own, Adam 1e-8, RMSprop 1e-5 (PPO's plain defaults take 1e-5 for Adam, as SB3 and CleanRL "
        "do); none: the default",
        metavar="EPS",
    )
    hidden_sizes: tuple[int, ...] = flag(
        factory=lambda: (64, 64), group="model", help="hidden layer sizes of the MLP torso(s)"
    )
    shared_torso: bool = flag(
        False,
        group="model",
        help="one MLP torso under both the policy and the value head (default: separate actor and critic MLPs; image "
        "observations: one CNN torso for both, always)",
    )
    ortho_init: bool = flag(
        True,
        group="model",
        help="orthogonal initial weights (gain sqrt 2 in the torso, 0.01 for the policy head, 1 for the value head), "
        "as SB3's ortho_init; --no-ortho-init: PyTorch's default init of every dense layer (rl-zoo3's gSDE settings)",
    )
    bf16: bool = flag(
        False,
        group="model",
        help="image observations: the CNN torso computes in bfloat16 (the workers on bfloat16 copies of its weights "
        "made once a rollout, evaluation under CPU autocast; weights, gradients, optimizer and loss stay float32). "
        "Pays on CPUs with AVX-512 BF16 or AMX (oneDNN's bf16 kernels), costs elsewhere; the atari preset sets it "
        "on those CPUs only",
    )
    normalize_obs: bool = flag(
        False,
        group="env",
        help="normalise observations by running mean/std shared by all workers (saved in checkpoints)",
    )
    clip_obs: float = flag(
        10.0, group="env", help="with --normalize-obs: clip normalised observations to [-clip, clip]"
    )
    normalize_reward: bool = flag(
        False,
        group="env",
        help="scale rewards by the running std of the discounted return, shared by all workers (not centred)",
    )
    clip_reward: float = flag(10.0, group="env", help="with --normalize-reward: clip scaled rewards to [-clip, clip]")
    lstm: int = flag(
        0,
        group="model",
        help="an LSTM core of SIZE units after the torso (--lstm alone: 128); 0: none",
        nargs="?",
        const=128,
        metavar="SIZE",
    )
    log_std_init: float = flag(
        0.0, group="model", help="initial log standard deviation of the Gaussian policy (Box actions)"
    )
    gsde: bool = flag(
        False,
        group="algorithm",
        help="Box actions: generalized state-dependent exploration (noise a function of the state, redrawn every "
        "rollout, as SB3's use_sde) instead of independent noise at every step",
    )
    clipped_log_prob: bool = flag(
        False,
        group="algorithm",
        help="Box actions: the loss takes the log-probability of the action the env was given: a sample beyond a "
        "bound, which the env sees clipped to it, counts log P(beyond the bound) rather than its Gaussian density "
        "(the clipped action policy gradient, Fujita & Maeda 2018)",
    )
    backend: str = flag(
        "shared-memory",
        group="backend",
        help="where workers run: shared-memory (processes on this machine, the fast default), serial (all in this "
        "process, in turn: for pdb and cProfile) or ray (actors on a Ray cluster; the ray extra: "
        'pip install -e ".[ray]")',
        choices=BACKENDS,
    )
    ray_address: str | None = flag(
        None,
        group="backend",
        help="with --backend ray: the cluster to join (auto: the one `ray start` runs here; or HOST:PORT; none: "
        "unset); "
        "default: start a local Ray instance for this run",
        metavar="ADDR",
        type=optional(str),
    )
    ray_node_ip: str = flag(
        "127.0.0.1",
        group="backend",
        help="with --backend ray: this machine's address in the Ray cluster (on a multi-machine cluster, the one "
        "given to `ray start --node-ip-address`)",
        metavar="IP",
    )
    ray_cpus_per_worker: float = flag(
        1.0, group="backend", help="with --backend ray: CPUs each worker actor reserves (Ray's scheduling resource)"
    )
    ray_same_node: str = flag(
        "shared-memory",
        group="backend",
        help="with --backend ray: how workers on the parameter server's node (the driver's) reach the global model: "
        "shared-memory (in place, as --backend shared-memory's workers do; Ray only starts and restarts them) or "
        "ray (actor calls, as workers on other nodes do)",
        choices=RAY_SAME_NODE,
    )
    push_every: int = flag(
        1,
        group="backend",
        help="with --backend ray: a worker that reaches the server by actor calls (on another node, or with "
        "--ray-same-node ray) sums the gradients of this many rollouts and pushes them in one round trip (fewer "
        "round trips; the rollouts between share one set of weights)",
    )
    start_method: str | None = flag(
        None,
        group="backend",
        help="multiprocessing start method of the worker and evaluator processes (default: forkserver on Linux, spawn "
        "elsewhere; none under --backend serial)",
        choices=("fork", "forkserver", "spawn"),
    )
    env_kwargs: dict[str, Any] = flag(
        factory=dict, group="env", help="keyword arguments for gymnasium.make, as key=value ..."
    )
    env_backend: str = flag(
        "gymnasium",
        group="env",
        help="how a worker steps its envs: gymnasium (each env in turn, any env) or ale-vector (an ALE game's envs in "
        "ale-py's C++ vector env; its no-op starts differ from gymnasium's: docs/atari_speed.md)",
        choices=ENV_BACKENDS,
    )
    stop_when_solved: bool = flag(
        False,
        group="run",
        help="stop once the 100-episode mean return reaches the env's reward threshold (--stop-at: another one); the "
        "final checkpoint is the one of that moment",
    )
    stop_at: float | None = flag(
        None,
        group="run",
        help="stop once the 100-episode mean return reaches RETURN (also for envs without a reward threshold); "
        "none: no such stop (a resumed run's cleared)",
        metavar="RETURN",
    )
    checkpoint_every: int = flag(
        0,
        group="logging",
        help="also write checkpoints/step-N.pt and latest.pt every this many env steps (0: not by steps)",
    )
    checkpoint_every_s: float = flag(
        300.0,
        group="logging",
        help="write checkpoints/step-N.pt and latest.pt every this many seconds (0: not by time)",
    )
    keep_checkpoints: int = flag(
        5,
        group="logging",
        help="step-N.pt files kept (the newest; latest.pt and best.pt are always kept); 0: only latest.pt",
    )
    tensorboard: int | None = flag(
        None,
        group="logging",
        help="serve the run with TensorBoard on 127.0.0.1 while training (no PORT: a free port; none: not served, "
        "a resumed run's cleared)",
    )
    tb_episode_points_per_s: float = flag(
        1.0,
        group="logging",
        help="per-episode TensorBoard points per second for each worker and for all workers (0: every episode); "
        "the mean, min and max of each interval's episodes are exact, episodes.csv keeps every episode",
    )
    # -- tracking and preset files (issue 28) --
    preset_file: str | None = flag(
        None,
        group="run",
        help="take the preset from this TOML file instead of a3c/spec/presets.toml (the same format: a table named "
        "like --env, or by --preset; e.g. the best.toml of python -m a3c.tune). Flags given override it",
        metavar="FILE",
    )
    track: bool = flag(
        False,
        group="logging",
        help="also log the run to Weights & Biases (scalars, config, final summary; pip install -e '.[wandb]'); "
        "WANDB_MODE=offline keeps it on this machine (wandb sync RUN_DIR/wandb/offline-run-* later)",
    )
    wandb_project: str = flag("a3c", group="logging", help="with --track: the W&B project", metavar="NAME")
    wandb_entity: str | None = flag(
        None,
        group="logging",
        help="with --track: the W&B entity (team or user; default: yours; none: unset)",
        metavar="NAME",
        type=optional(str),
    )
    wandb_group: str | None = flag(
        None,
        group="logging",
        help="with --track: the W&B group the run belongs to (none: unset)",
        metavar="NAME",
        type=optional(str),
    )
    resume: str | None = flag(
        None,
        group="run",
        help="continue the run in RUN_DIR from its checkpoints/latest.pt (flags given override); its env is made "
        "again, so a 'module:Name-v0' env id imports that module and runs its code, as training did",
        metavar="RUN_DIR",
    )
    eval_every: int = flag(
        50_000,
        group="evaluation",
        help="evaluate the policy every this many steps, in a separate process, on its own envs (eval.csv, eval/* "
        "tags, checkpoints/best.pt); an evaluation that comes due while the one before is still playing is skipped, "
        "not queued (the next is due at the following multiple), so a short interval on a fast env evaluates less "
        "often; 0: off",
    )
    eval_episodes: int = flag(10, group="evaluation", help="episodes per evaluation (0: no evaluation)")
    eval_stochastic: bool = flag(
        False,
        group="evaluation",
        help="evaluate the policy's sampled actions, not its most likely ones (the atari presets', as rl-zoo3 "
        "evaluates Atari: a most-likely policy that never presses FIRE after a lost life plays on to ALE's frame "
        "cap); python -m a3c.evaluate plays the run's choice unless told",
    )
    worker_timeout: float = flag(
        60.0, group="faults", help="restart a worker whose heartbeat (one per update) is older than this (s)"
    )
    max_restarts: int = flag(
        3, group="faults", help="restarts allowed per worker (after a crash or a hang) before the run fails"
    )
    max_skipped_in_row: int = flag(
        100,
        group="faults",
        help="stop the run when a worker skips this many updates in a row for a non-finite loss or gradient",
    )
    # not a flag: set by --workers auto (a3c/run/workers_auto.py), the measurement and the reason for the count chosen
    workers_auto: dict[str, Any] | None = flag(None, help="", internal=True)
    # not a flag: what the model multiplies its observations by (a3c.learn.model.input_scale); None: chosen from the
    # observation space. A resumed run or a loaded agent takes its checkpoint's (a3c.record.checkpoint.saved_settings)
    input_scale: float | None = flag(None, help="", internal=True)
    # not a flag: what the CNN subtracts from its scaled input, the frames' background level (a3c.spec.background);
    # None or 0: nothing. Measured when a new run starts; a resumed run or a loaded agent takes its checkpoint's
    input_shift: float | None = flag(None, help="", internal=True)
    # not a flag: the W&B run id of a run with --track (set by a3c.run.resolve; a resume goes on in the same W&B run)
    wandb_id: str | None = flag(None, help="", internal=True)

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["hidden_sizes"] = list(self.hidden_sizes)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Config:
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        if "hidden_sizes" in values:
            values["hidden_sizes"] = tuple(values["hidden_sizes"])
        return cls(**values)

    @property
    def evaluates(self) -> bool:
        """Whether the run evaluates its policy during training (--eval-every and --eval-episodes both > 0)."""
        return self.eval_every > 0 and self.eval_episodes > 0

    @property
    def stops_at_threshold(self) -> bool:
        """Whether the run stops once its 100-episode mean return meets a threshold (--stop-when-solved, --stop-at)."""
        return self.stop_when_solved or self.stop_at is not None

    def stop_threshold(self, reward_threshold: float | None) -> float | None:
        """The return that counts as solved: --stop-at, else the env's ``reward_threshold`` (None: the env has none)."""
        return self.stop_at if self.stop_at is not None else reward_threshold

    def resolved_start_method(self) -> str:
        if self.start_method is not None:
            return self.start_method
        return "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"

    def validate(self) -> Config:
        """Raise UserError naming the first out-of-range setting and its valid range, or a setting given where it
        does nothing (a3c/spec/validation.py); return self when all is well."""
        validation.check(self)
        return self
