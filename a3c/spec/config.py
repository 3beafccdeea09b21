"""The training configuration: one dataclass whose fields are the CLI flags (each with its help line), plus the
validation that runs in the main process before any worker starts."""

from __future__ import annotations

import argparse
import dataclasses
import math
import multiprocessing
from dataclasses import dataclass, field
from typing import Any

from a3c.spec.errors import UserError

LR_SCHEDULES = ("constant", "linear")
ALGOS = ("a3c", "ppo")  # --algo: the workers' objective (a3c.learn.losses: actor_critic_loss, clipped_surrogate_loss)
OPTIMIZERS = ("adam", "rmsprop", "rmsprop-tf")  # a3c.learn.optim.OPTIMIZERS' keys (checked by a test)
BACKENDS = ("shared-memory", "serial", "ray")
ENV_BACKENDS = ("gymnasium", "ale-vector")  # a3c.spec.env_batch.make_env_batch
RAY_SAME_NODE = ("shared-memory", "ray")  # --ray-same-node
# settings that validate() accepts away from their defaults only with --backend ray
RAY_ONLY_SETTINGS = ("push_every", "ray_same_node")
# settings that validate() accepts away from their defaults only with --track
WANDB_SETTINGS = ("wandb_project", "wandb_entity", "wandb_group")


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


# The groups of `python -m a3c.train --help`, in the order shown: (name, title, one line on what its flags are for).
# A flag names its group (``flag(group=...)``); one that names none is shown under OTHER_GROUP, at the end.
FLAG_GROUPS: tuple[tuple[str, str, str], ...] = (
    ("run", "run", "how long, from which seed and preset, and where the run goes (or which run goes on)"),
    ("env", "env", "the environment, and what a3c does to its observations and rewards"),
    ("algorithm", "algorithm", "the update: the objective, rollouts, returns, the loss and the shared optimizer"),
    ("model", "model", "the network built from the env's spaces"),
    ("evaluation", "evaluation", "the deterministic policy scored during training"),
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
        help="per-env hyperparameters from a3c/spec/presets.toml: by default the preset named like --env, if there is "
        "one; 'none' for the plain defaults. Flags given override the preset. config.json records the one applied",
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
    exp_name: str = flag("a3c", group="run", help="experiment name, used in the default run directory name")
    algo: str = flag(
        "a3c",
        group="algorithm",
        help="the workers' objective: a3c (one gradient of the actor-critic loss per rollout) or ppo (PPO's clipped "
        "surrogate against the policy that acted: --n-epochs over minibatches of --minibatch-size of the worker's "
        "rollout, each minibatch's gradient pushed to the shared optimizer and the weights pulled again before the "
        "next; DPPO / APPO in spirit)",
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
        help="with --algo ppo: clip the value's change from the acting one to +-this in the value loss (as SB3's "
        "clip_range_vf); default: no value clipping",
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
    max_grad_norm: float = flag(1.0, group="algorithm", help="clip each worker's gradient to this global L2 norm")
    optimizer: str = flag(
        "adam",
        group="algorithm",
        help="shared optimizer (rmsprop: PyTorch's; rmsprop-tf: TensorFlow's, as the A3C paper and SB3's A2C on Atari)",
        choices=OPTIMIZERS,
    )
    hidden_sizes: tuple[int, ...] = flag(
        factory=lambda: (64, 64), group="model", help="hidden layer sizes of the MLP torso(s)"
    )
    shared_torso: bool = flag(
        False,
        group="model",
        help="one MLP torso under both the policy and the value head (default: separate actor and critic MLPs)",
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
        help="with --backend ray: the cluster to join (auto: the one `ray start` runs here; or HOST:PORT); "
        "default: start a local Ray instance for this run",
        metavar="ADDR",
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
        help="multiprocessing start method (default: forkserver on Linux, spawn elsewhere)",
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
        help="stop once the 100-episode mean return reaches RETURN (also for envs without a reward threshold)",
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
        None, group="logging", help="serve the run with TensorBoard on 127.0.0.1 while training (no PORT: a free port)"
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
        None, group="logging", help="with --track: the W&B entity (team or user; default: yours)", metavar="NAME"
    )
    wandb_group: str | None = flag(
        None, group="logging", help="with --track: the W&B group the run belongs to", metavar="NAME"
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
        help="evaluate the deterministic policy every this many steps, in a separate process, on its own envs "
        "(eval.csv, eval/* tags, checkpoints/best.pt); 0: off",
    )
    eval_episodes: int = flag(10, group="evaluation", help="episodes per evaluation (0: no evaluation)")
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
        """Raise UserError naming the first out-of-range setting and its valid range; return self when all is well."""
        checks: list[tuple[bool, str]] = [
            (
                self.workers == "auto" or (isinstance(self.workers, int) and self.workers >= 1),
                f"--workers must be at least 1 (got {self.workers}), or auto",
            ),
            (self.envs_per_worker >= 1, f"--envs-per-worker must be at least 1 (got {self.envs_per_worker})"),
            (self.total_steps >= 1, f"--total-steps must be at least 1 (got {self.total_steps})"),
            seed_check(self.seed),
            (self.n_steps >= 1, f"--n-steps must be at least 1 (got {self.n_steps})"),
            (0.0 < self.gamma <= 1.0, f"--gamma must be in (0, 1] (got {self.gamma})"),
            (0.0 <= self.gae_lambda <= 1.0, f"--gae-lambda must be in [0, 1] (got {self.gae_lambda})"),
            (math.isfinite(self.lr) and self.lr > 0.0, f"--lr must be a positive number (got {self.lr})"),
            (math.isfinite(self.ent_coef) and self.ent_coef >= 0.0, f"--ent-coef must be >= 0 (got {self.ent_coef})"),
            (math.isfinite(self.vf_coef) and self.vf_coef >= 0.0, f"--vf-coef must be >= 0 (got {self.vf_coef})"),
            (self.max_grad_norm > 0.0, f"--max-grad-norm must be > 0 (got {self.max_grad_norm})"),
            (self.algo in ALGOS, f"--algo must be one of {', '.join(ALGOS)} (got {self.algo!r})"),
            (self.n_epochs >= 1, f"--n-epochs must be at least 1 (got {self.n_epochs})"),
            (self.minibatch_size >= 1, f"--minibatch-size must be at least 1 (got {self.minibatch_size})"),
            (
                math.isfinite(self.clip_range) and self.clip_range > 0.0,
                f"--clip-range must be a positive number (got {self.clip_range})",
            ),
            (
                self.clip_range_vf is None or (math.isfinite(self.clip_range_vf) and self.clip_range_vf > 0.0),
                f"--clip-range-vf must be a positive number, or left out for no value clipping (got "
                f"{self.clip_range_vf})",
            ),
            (self.max_policy_lag >= 0, f"--max-policy-lag must be >= 0 (0: no limit; got {self.max_policy_lag})"),
            (
                self.algo != "ppo" or self.lstm > 0 or self.minibatch_size <= self.n_steps * self.envs_per_worker,
                f"--minibatch-size {self.minibatch_size} is more than a worker's rollout (--n-steps {self.n_steps} x "
                f"--envs-per-worker {self.envs_per_worker} = {self.n_steps * self.envs_per_worker} samples) with "
                "--algo ppo; give a longer --n-steps or a smaller --minibatch-size",
            ),
            (
                self.lr_schedule in LR_SCHEDULES,
                f"--lr-schedule must be one of {', '.join(LR_SCHEDULES)} (got {self.lr_schedule!r})",
            ),
            (
                math.isfinite(self.clip_obs) and self.clip_obs > 0.0,
                f"--clip-obs must be a positive number (got {self.clip_obs})",
            ),
            (
                math.isfinite(self.clip_reward) and self.clip_reward > 0.0,
                f"--clip-reward must be a positive number (got {self.clip_reward})",
            ),
            (
                len(self.hidden_sizes) >= 1 and all(h >= 1 for h in self.hidden_sizes),
                f"--hidden-sizes must be one or more positive integers (got {list(self.hidden_sizes)})",
            ),
            (self.lstm >= 0, f"--lstm takes a size >= 1, or 0 for none (got {self.lstm})"),
            (math.isfinite(self.log_std_init), f"--log-std-init must be a finite number (got {self.log_std_init})"),
            (
                self.stop_at is None or math.isfinite(self.stop_at),
                f"--stop-at must be a finite return (got {self.stop_at})",
            ),
            (self.checkpoint_every >= 0, f"--checkpoint-every must be >= 0 (got {self.checkpoint_every})"),
            (self.eval_every >= 0, f"--eval-every must be >= 0 (0: no evaluation; got {self.eval_every})"),
            (self.eval_episodes >= 0, f"--eval-episodes must be >= 0 (0: no evaluation; got {self.eval_episodes})"),
            (
                math.isfinite(self.checkpoint_every_s) and self.checkpoint_every_s >= 0.0,
                f"--checkpoint-every-s must be a number of seconds >= 0 (got {self.checkpoint_every_s})",
            ),
            (self.keep_checkpoints >= 0, f"--keep-checkpoints must be >= 0 (got {self.keep_checkpoints})"),
            (
                math.isfinite(self.tb_episode_points_per_s) and self.tb_episode_points_per_s >= 0.0,
                f"--tb-episode-points-per-s must be a number >= 0 (got {self.tb_episode_points_per_s})",
            ),
            (
                self.tensorboard is None or 0 <= self.tensorboard <= 65535,
                f"--tensorboard takes a port in 0..65535 (got {self.tensorboard})",
            ),
            (
                math.isfinite(self.worker_timeout) and self.worker_timeout > 0.0,
                f"--worker-timeout must be a positive number of seconds (got {self.worker_timeout})",
            ),
            (self.max_restarts >= 0, f"--max-restarts must be >= 0 (got {self.max_restarts})"),
            (self.max_skipped_in_row >= 1, f"--max-skipped-in-row must be at least 1 (got {self.max_skipped_in_row})"),
            (
                self.optimizer in OPTIMIZERS,
                f"--optimizer must be one of {', '.join(OPTIMIZERS)} (got {self.optimizer!r})",
            ),
            (
                self.backend in BACKENDS,
                f"--backend must be one of {', '.join(BACKENDS)} (got {self.backend!r})",
            ),
            (self.push_every >= 1, f"--push-every must be at least 1 (got {self.push_every})"),
            (
                self.env_backend in ENV_BACKENDS,
                f"--env-backend must be one of {', '.join(ENV_BACKENDS)} (got {self.env_backend!r})",
            ),
            (
                self.env_backend != "ale-vector" or self.env.split(":")[-1].startswith("ALE/"),
                f"--env-backend ale-vector steps ALE games (ALE/Name-v5 ids), not {self.env}; drop it",
            ),
            (
                self.push_every == 1 or self.backend == "ray",
                f"--push-every {self.push_every} is for --backend ray (shared-memory and serial workers apply every "
                "update at once); drop it or add --backend ray",
            ),
            (
                self.ray_same_node in RAY_SAME_NODE,
                f"--ray-same-node must be one of {', '.join(RAY_SAME_NODE)} (got {self.ray_same_node!r})",
            ),
            (
                self.ray_same_node == "shared-memory" or self.backend == "ray",
                f"--ray-same-node {self.ray_same_node} is for --backend ray; drop it or add --backend ray",
            ),
            (
                math.isfinite(self.ray_cpus_per_worker) and self.ray_cpus_per_worker >= 0.0,
                f"--ray-cpus-per-worker must be a number >= 0 (got {self.ray_cpus_per_worker})",
            ),
            *(
                (
                    self.track or getattr(self, name) == getattr(Config, name),
                    f"--{name.replace('_', '-')} is for --track; add --track, or drop it",
                )
                for name in WANDB_SETTINGS
            ),
        ]
        for ok, message in checks:
            if not ok:
                raise UserError(message)
        methods = multiprocessing.get_all_start_methods()
        if self.start_method is not None and self.start_method not in methods:
            raise UserError(
                f"--start-method {self.start_method} is not available here; use one of {', '.join(methods)}"
            )
        return self


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


def parse_env_kwargs(items: list[str]) -> dict[str, Any]:
    """Parse ``key=value`` strings into typed keyword arguments for gymnasium.make."""
    kwargs: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.isidentifier():
            raise UserError(
                f"--env-kwargs takes key=value pairs with a Python name as key (got {item!r}); e.g. latency=0.01"
            )
        kwargs[key] = parse_scalar(value)
    return kwargs
