"""A trained policy as a Python object: ``a3c.load(path)`` -> ``Agent`` with ``act(obs)``, ``value(obs)`` and, for
discrete actions, ``action_probs(obs)``; ``predict``, Stable-Baselines3's protocol (its evaluate_policy and VecEnv
loops run an Agent unchanged); ``export``, the acting path as an ONNX or TorchScript file (a3c.record.policy_export);
and ``run_episodes``, the one episode loop that evaluation uses everywhere (the evaluator process during training,
``python -m a3c.evaluate``, and users' own scripts).

Loading is safe: the checkpoint is read by ``a3c.record.checkpoint.load_checkpoint`` (``torch.load(weights_only=True)``:
tensors and plain containers only, nothing that runs code), and the model is rebuilt from the env's spaces stored in
the checkpoint as plain data (no env is made, no module imported) and the run's config with
``a3c.learn.model.build_model``, exactly as training built it.

Observation normalisation and reward scaling have one place here: an Agent applies ``obs_transform`` to every
observation before the network, and multiplies the critic's output by ``value_scale`` to undo --normalize-reward's
scaling (values in the rewards the loss saw: the env's own, or Atari's sign-clipped ones). ``_normalisation(payload)``
builds both from a checkpoint's running statistics (--normalize-obs, --normalize-reward); a run without them gives
the identity and 1.0.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from a3c.learn.distributions import Categorical, Distribution
from a3c.learn.model import ActorCritic, build_model, flatten_parameters
from a3c.learn.running_stats import ObsNormalizer, RewardScaler
from a3c.record.checkpoint import (
    BEST,
    LATEST,
    check_settings_known,
    check_trained_spaces,
    load_checkpoint,
    resumable,
    saved_settings,
)
from a3c.spec.config import Config
from a3c.spec.environment import EnvSpec, describe_env, env_module, make_env, spec_of
from a3c.spec.errors import UserError
from a3c.spec.flags import seed_check
from a3c.spec.seeding import EVALUATOR_RANK, Role, env_seed, stream
from a3c.spec.setting_types import type_problem
from a3c.spec.wording import count

ObsTransform = Callable[[np.ndarray], np.ndarray]


def _identity(obs: np.ndarray) -> np.ndarray:
    return obs


class Agent:
    """A policy and its critic, for acting and valuing outside training.

    A recurrent policy (--lstm) carries its state from one ``act`` to the next: call ``reset()`` when an episode starts.
    ``act(obs)`` takes one observation (shaped like the env's) or a batch ``[B, *obs_shape]`` and returns one action
    as the env's ``step`` takes it, or an array of B of them. ``value(obs)`` returns the critic's estimate of the
    discounted return from ``obs`` (a float, or an array of B), in the rewards the critic was trained on: the env's
    own (--normalize-reward's scaling undone), or for Atari the sign-clipped rewards the loss sees."""

    def __init__(
        self,
        model: ActorCritic,
        dist: Distribution,
        spec: EnvSpec,
        config: Config,
        *,
        obs_transform: ObsTransform | None = None,
        value_scale: float = 1.0,
        global_step: int | None = None,
        evaluation: dict[str, Any] | None = None,
        path: Path | None = None,
        seed: int | None = None,
    ) -> None:
        self.model, self.dist, self.spec, self.config = model, dist, spec, config
        self.obs_transform = obs_transform or _identity
        self.value_scale = float(value_scale)
        self.global_step = global_step  # the training step the weights are from
        self.evaluation = evaluation  # best.pt's evaluation result (None for other checkpoints)
        self.path = path
        self.rng = np.random.default_rng(seed)  # for act(obs, deterministic=False)
        # predict's own gSDE noise, held from call to call as act's is (the distribution holds act's): a predict of
        # another batch size must not redraw the noise act holds over its episode (None: drawn at the next sample)
        self._predict_noise: np.ndarray | None = None
        self.state: tuple[torch.Tensor, ...] = ()  # a recurrent policy's state, carried from act to act
        model.eval()

    def reset(self, batch: int = 1, samplers: Sequence[np.random.Generator] | None = None) -> None:
        """Start new episodes (``batch`` of them, acted on together): a recurrent policy forgets what it has seen,
        and gSDE's exploration noise, held over an episode, is drawn anew: from each episode's own sampler
        (``samplers``, one per episode, as ``act_batch`` takes them), else from the agent's (``a3c.load(seed=...)``).
        Call it whenever an episode starts; other policies have nothing to forget."""
        self.state = self.model.initial_state(batch)
        self.dist.new_episodes(samplers if samplers is not None else [self.rng] * batch)
        self._predict_noise = None  # (predict's too: drawn again at its next sample)

    def _state_for(self, batch: int) -> tuple[torch.Tensor, ...]:
        if not self.state or self.state[0].shape[0] != batch:
            # the first call, another batch size (new episodes), or no recurrent core: the state alone (gSDE's noise
            # is drawn at its first sample and held until reset)
            self.state = self.model.initial_state(batch)
        return self.state

    def _state_to_look(self, batch: int) -> tuple[tuple[torch.Tensor, ...], bool]:
        """For value() and action_probs(): the carried state and True where it fits ``batch`` (the caller moves it
        on), else a fresh state for this batch alone and False: a look at another batch mid-episode must not wipe
        the episode's state."""
        if self.state and self.state[0].shape[0] != batch:
            return self.model.initial_state(batch), False
        return self._state_for(batch), True

    @property
    def observation_space(self) -> gym.Space:
        return self.spec.observation_space

    @property
    def action_space(self) -> gym.Space:
        return self.spec.action_space

    def _batch(self, obs: Any) -> tuple[torch.Tensor, bool]:
        """(the transformed observations as a [B, *obs_shape] float tensor, whether one observation was given)."""
        shape = self.spec.obs_shape
        try:
            x = np.asarray(obs, dtype=np.float32)
        except (TypeError, ValueError) as err:  # a dict, a tuple of arrays of other shapes: a Dict/Tuple space's
            raise UserError(
                f"an observation of type {type(obs).__name__} is not an array of shape {shape} ({err}); the agent "
                "takes the flattened observation the model saw: make the env with a3c.spec.environment.make_env(ID, "
                "training=False), or wrap it in gymnasium's FlattenObservation"
            ) from None
        if x.shape == shape:
            x, single = x[None], True
        elif x.ndim == len(shape) + 1 and x.shape[1:] == shape:
            single = False
        else:
            raise UserError(
                f"observation of shape {x.shape} does not fit the env's observations {shape}; give one observation "
                f"of shape {shape} or a batch of shape (B, {', '.join(map(str, shape))})"
            )
        return torch.from_numpy(np.ascontiguousarray(self.obs_transform(x), dtype=np.float32)), single

    def _actions(
        self, x: torch.Tensor, deterministic: bool, rng: np.random.Generator | Sequence[np.random.Generator] | None
    ) -> list[Any]:
        with torch.inference_mode():
            params, self.state = self.model.policy(x, self._state_for(len(x)))
        if deterministic:
            actions = self.dist.mode(params)
        elif isinstance(rng, Sequence):  # one sampler per row: a row's draw does not depend on the batch it is in
            actions = self.dist.sample_rows(params, rng)
        else:
            actions = self.dist.sample(params, rng or self.rng)
        return self.dist.env_actions(actions)

    def act(self, obs: Any, deterministic: bool = True) -> Any:
        """The action for one observation (or an array of actions for a batch): the most likely action by default
        (argmax for discrete actions), a sample from the policy with ``deterministic=False``."""
        x, single = self._batch(obs)
        actions = self._actions(x, deterministic, None)
        return actions[0] if single else np.asarray(actions)

    def act_batch(
        self,
        obs: np.ndarray,
        deterministic: bool = True,
        rng: np.random.Generator | Sequence[np.random.Generator] | None = None,
    ) -> list[Any]:
        """Actions for a batch [B, *obs_shape], as a list of B actions the env's step() takes (``rng``: the
        sampler for ``deterministic=False``, or B samplers, one per row; the agent's own by default)."""
        return self._actions(self._batch(obs)[0], deterministic, rng)

    def action_probs(self, obs: Any) -> np.ndarray:
        """The policy's probability of each action for one observation ([n]) or a batch ([B, n]); Discrete action
        spaces only (column i is the action ``start + i`` of a ``Discrete(n, start)``). Like ``act`` it moves a
        recurrent policy's state on: call one of the two per observation (to act on these, sample from them)."""
        if not isinstance(self.dist, Categorical):
            raise UserError(
                f"action_probs needs a Discrete action space (this agent's is {self.action_space}); "
                "act(obs, deterministic=False) samples from any policy"
            )
        x, single = self._batch(obs)
        state, carried = self._state_to_look(len(x))
        with torch.inference_mode():
            params, state = self.model.policy(x, state)
            probs = torch.softmax(params.double(), dim=-1).numpy()
        if carried:
            self.state = state
        return probs[0] if single else probs

    def value(self, obs: Any) -> float | np.ndarray:
        """The critic's value of one observation (a float) or a batch (an array), in the env's reward units."""
        x, single = self._batch(obs)
        with torch.inference_mode():
            values = self.model(x, self._state_to_look(len(x))[0])[1].double().numpy() * self.value_scale
        return float(values[0]) if single else values

    def predict(
        self,
        observation: Any,
        state: np.ndarray | None = None,
        episode_start: Any = None,
        deterministic: bool = False,
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """Stable-Baselines3's protocol (``model.predict``), for its tools (``evaluate_policy``, rl-zoo3's enjoy,
        VecEnv loops): ``(action, state)`` for one observation (shaped like the env's: the action as SB3 gives it,
        an array of the action's shape) or a VecEnv's batch [B, *obs_shape] (the actions [B, *action_shape]).

        A recurrent policy (--lstm) takes ``state`` back as it returned it (an array [S, B, H]: the LSTM's h and c,
        and the critic's with a separate one; None: every env starts an episode), and ``episode_start`` [B] (True
        where an env's episode just began: its state is reset); a policy without one returns ``state`` as given
        (None). The state given is never changed, nor is the state ``act`` carries. ``deterministic=False`` (SB3's
        default) samples from the policy (the agent's sampler, ``a3c.load(seed=...)``), True takes the most likely
        action, as ``act`` and evaluate_policy do. A gSDE policy's exploration noise is held from call to call until
        ``reset()`` draws it again (SB3's ``reset_noise``): predict's own, apart from the noise ``act`` holds."""
        x, single = self._batch(observation)
        batch = len(x)
        recurrent = bool(self.model.lstm)
        if recurrent:
            core = self.model.initial_state(batch)
            if state is not None:
                given = np.asarray(state, dtype=np.float32)
                if given.shape != (len(core), batch, self.model.lstm):
                    raise UserError(
                        f"state of shape {given.shape} does not fit this recurrent policy ({len(core)}, {batch}, "
                        f"{self.model.lstm}) for {count(batch, 'observation')}; pass back the "
                        "state predict returned, or None to start every episode"
                    )
                core = tuple(torch.from_numpy(given.copy()).unbind(0))
                if episode_start is not None:
                    starts = np.asarray(episode_start, dtype=bool).reshape(-1)
                    if starts.shape != (batch,):
                        raise UserError(
                            f"episode_start of shape {np.shape(episode_start)} does not fit "
                            f"{count(batch, 'observation')}; give one flag per observation"
                        )
                    core = self.model.reset_state(core, torch.from_numpy((~starts).astype(np.float32)))
        else:
            core = ()
        with torch.inference_mode():
            params, core = self.model.policy(x, core)
        actions = self.dist.mode(params) if deterministic else self._predict_sample(params)
        shaped = np.asarray(self.dist.env_actions(actions)).reshape(batch, *self.dist.action_shape)
        new_state = torch.stack(core).numpy() if recurrent else state
        return (shaped[0] if single else shaped), new_state

    def _predict_sample(self, params: torch.Tensor) -> np.ndarray:
        """A sample for predict, drawn with predict's own gSDE noise (held from call to call) in the distribution's
        place of act's, which is put back after: the two callers' noises never mix (other families hold none)."""
        if not hasattr(self.dist, "noise"):
            return self.dist.sample(params, self.rng)
        held = self.dist.noise
        self.dist.noise = self._predict_noise
        try:
            return self.dist.sample(params, self.rng)
        finally:
            self._predict_noise, self.dist.noise = self.dist.noise, held

    def export(self, path: str | Path, format: str = "onnx", with_dist_params: bool = False) -> Path:
        """Write the acting path (observation preprocessing and normalisation, the network, the deterministic
        action; the distribution's parameters too with ``with_dist_params``) as an ONNX or TorchScript file that
        runs without a3c (a3c.record.policy_export says what it takes and gives). Returns the path written."""
        from a3c.record.policy_export import export_policy

        return export_policy(self, path, format, with_dist_params)

    def __repr__(self) -> str:
        step = "?" if self.global_step is None else f"{self.global_step:,}"
        return f"Agent({self.config.env}, step {step}, from {self.path})"


# -- loading -------------------------------------------------------------------------------------------------------
def checkpoint_path(path: str | Path, best: bool = False) -> Path:
    """The checkpoint file a path names: a file as given, or a run directory's checkpoints/latest.pt (best.pt with
    ``best``). UserError naming the fix when there is none."""
    p = Path(path)
    if p.is_dir():
        name = BEST if best else LATEST
        file = p / "checkpoints" / name
        if file.is_file():
            return file
        if best:
            raise UserError(
                f"{p} has no checkpoints/{BEST}: the run did not evaluate during training (--eval-every 0, or it "
                "ended before its first evaluation); drop --best to use its newest checkpoint"
            )
        raise UserError(f"{p} has no checkpoints/{LATEST}; give an a3c run directory or a checkpoint file")
    if not p.exists():
        raise UserError(f"{p}: no such run directory or checkpoint file; give an a3c run directory or a .pt file")
    if best:
        raise UserError(f"--best takes a run directory, and {p} is a file; give the run directory (or drop --best)")
    return p


def _normalisation(
    payload: dict[str, Any], config: Config, spec: EnvSpec, source: Path | str
) -> tuple[ObsTransform | None, float]:
    """The frozen observation transform and the value scale of a checkpoint: the one place where observation
    normalisation and reward scaling plug into a loaded agent (and the evaluator). Statistics of another shape than
    the model's observations, or missing entries: a damaged checkpoint, one line."""
    try:
        return normalisation(payload.get("obs_stats"), payload.get("reward_stats"), config, spec.obs_shape)
    except (KeyError, TypeError, ValueError) as err:
        raise UserError(
            f"{source}'s normalisation statistics do not fit its model ({type(err).__name__}: {err}); the checkpoint "
            "is corrupt or from another a3c version"
        ) from None


def normalisation(
    obs_stats: dict[str, Any] | None,
    reward_stats: dict[str, Any] | None,
    config: Config,
    obs_shape: tuple[int, ...] | None = None,
) -> tuple[ObsTransform | None, float]:
    """From the running statistics' states (a3c.learn.running_stats state_dicts, or None where the run has none): the
    observation transform the model was trained with, frozen (--normalize-obs), and the factor that takes the
    critic's output to the env's reward units (--normalize-reward trains the critic on rewards divided by the
    std of the discounted return: values come back multiplied by it). ``obs_shape``: the model's observations,
    which the statistics must fit (a ValueError where they do not); None: the statistics' own."""
    transform = None
    if isinstance(obs_stats, dict):
        shape = tuple(np.asarray(obs_stats["mean"]).shape) if obs_shape is None else tuple(obs_shape)
        transform = ObsNormalizer.frozen_from(obs_stats, shape, config.clip_obs)
    scale = 1.0
    if isinstance(reward_stats, dict):
        scale = float(RewardScaler.frozen_from(reward_stats, 1, config.gamma, config.clip_reward).std)
    return transform, scale


def agent_from_payload(
    payload: dict[str, Any], source: Path | str, seed: int | None = None, *, may_make_env: bool = False
) -> Agent:
    """An Agent from a loaded checkpoint: the model rebuilt from the env's spaces (see ``checkpoint_spec``) and the
    run's config, its weights loaded. ``may_make_env``: the caller makes the run's env anyway (``python -m
    a3c.evaluate``), so a checkpoint without stored spaces may be described by making it, whatever its id."""
    if not isinstance(payload.get("model"), torch.Tensor) or not isinstance(payload.get("config"), dict):
        raise UserError(f"checkpoint {source} has no model or config (not written by a3c.train); use one that is")
    check_settings_known(payload, f"checkpoint {source}", "load")
    try:
        config = Config.from_dict(saved_settings(payload))  # (the model's input scale included)
    except TypeError as err:
        raise UserError(f"the checkpoint {source}'s config does not fit this a3c ({err}); use a newer a3c") from None
    problems = (type_problem(f.name, getattr(config, f.name)) for f in dataclasses.fields(config))
    problem = next((p for p in problems if p is not None), None)
    if problem is not None:  # (the model would be built from a value of another type: a traceback from inside torch)
        raise UserError(
            f"the checkpoint {source}'s config does not fit this a3c ({problem}); the checkpoint is corrupt or from "
            "another a3c version"
        )
    spec = checkpoint_spec(payload, config, source, may_make_env)
    model, dist = build_model(spec, config)
    params, _ = flatten_parameters(model)
    if params.numel() != payload["model"].numel():
        raise UserError(
            f"{source} holds {payload['model'].numel()} parameters but its config builds a model of {params.numel()};"
            " the checkpoint is corrupt or from another a3c version"
        )
    params.copy_(payload["model"])
    for p in model.parameters():
        p.requires_grad_(False)
    obs_transform, value_scale = _normalisation(payload, config, spec, source)
    step = payload.get("global_step")
    return Agent(
        model,
        dist,
        spec,
        config,
        obs_transform=obs_transform,
        value_scale=value_scale,
        global_step=int(step) if isinstance(step, int) else None,
        evaluation=payload.get("eval") if isinstance(payload.get("eval"), dict) else None,
        path=Path(source),
        seed=seed,
    )


def checkpoint_spec(payload: dict[str, Any], config: Config, source: Path | str, may_make_env: bool) -> EnvSpec:
    """The env description a checkpoint was trained on, from its ``env_spec`` entry (plain data): no env is made
    and nothing is imported, so loading runs no code the file names (a ``module:Name`` env id would import that
    module). Checkpoints written before that entry: the env is made to read its spaces (checked against the ones
    the checkpoint recorded), except for a ``module:`` id unless ``may_make_env``: a one-line UserError instead."""
    if "env_spec" in payload:
        return EnvSpec.from_data(payload["env_spec"], str(source))
    module = env_module(config.env)
    if module is not None and not may_make_env:
        raise UserError(
            f"{source} was written before checkpoints stored their spaces, and its env {config.env!r} could only be "
            f"described by importing module {module!r}, which a3c.load never does; evaluate it with python -m "
            "a3c.evaluate or --resume it (both make the env, running that module as training did), or retrain it"
        )
    spec = describe_env(config.env, config.env_kwargs)
    saved = payload.get("spaces")
    if isinstance(saved, dict):
        check_trained_spaces(saved, spec, source, "load it where the env is the one it was trained on")
    return spec


def check_env_fits(agent: Agent, env: gym.Env, variant: dict[str, Any] | None = None) -> None:
    """UserError when an env made for ``agent`` (``python -m a3c.evaluate``) has other spaces than the ones the
    agent was trained on: the keyword arguments given over the run's (``variant``, --env-kwargs) changed them, or
    the env's code changed since."""
    fix = "evaluate it where the env is the one it was trained on"
    if variant:
        given = " ".join(f"{key}={value!r}" for key, value in variant.items())
        fix = f"drop the --env-kwargs that change them ({given})"
    check_trained_spaces(agent.spec.describe(), spec_of(env, agent.config.env), str(agent.path), fix)


def load(path: str | Path, best: bool = False, seed: int | None = None) -> Agent:
    """The agent of a run directory (its newest intact checkpoint: ``run_checkpoint``; best.pt with ``best=True``) or
    of a checkpoint file.

    ``seed`` seeds the sampler of ``act(obs, deterministic=False)``. Raises ValueError (a3c.spec.errors.UserError) with
    the fix for a path that holds no usable checkpoint, or a seed numpy's generator cannot take."""
    if seed is not None and not seed_check(seed)[0]:
        raise UserError(f"seed must be an integer >= 0 (got {seed!r})")
    file, payload = run_checkpoint(path, best)
    return agent_from_payload(payload, file, seed)


def run_checkpoint(path: str | Path, best: bool = False) -> tuple[Path, dict[str, Any]]:
    """The checkpoint a path names, loaded, and its file: a file as given; a run directory's best.pt with ``best``;
    else the run's newest intact checkpoint, as --resume takes it (a3c.record.resume.newest_intact: latest.pt, or a
    newer step-N.pt where latest.pt is older, damaged or missing after a failed write), with a line on stderr naming
    what was passed over and why. Where none of a run directory's is intact and it has a best.pt, the error says so
    (--best)."""
    run = Path(path)
    if best or not run.is_dir() or not (run / "checkpoints" / BEST).is_file():
        return _run_checkpoint(run, best)
    try:
        return _run_checkpoint(run, best)
    except UserError as err:
        raise UserError(f"{err} (or give --best: this run's checkpoints/{BEST} may be intact)") from None


def _run_checkpoint(run: Path, best: bool) -> tuple[Path, dict[str, Any]]:
    from a3c.record.resume import newest_intact  # (the resume machinery: imported where a run directory is read)

    path = run
    if not best and run.is_dir() and resumable(run / "checkpoints"):
        file, payload, passed = newest_intact(run / "checkpoints", load_checkpoint)
        if passed:
            step = payload["global_step"]
            print(
                f"a3c: loading checkpoints/{file.name} (step {step:,}), the newest intact checkpoint: "
                + "; ".join(passed),
                file=sys.stderr,
            )
        return file, payload
    file = checkpoint_path(path, best)
    return file, load_checkpoint(file)


# -- episodes ------------------------------------------------------------------------------------------------------
def eval_seeds(seed: int, episodes: int) -> list[int]:
    """The env reset seeds of evaluation episodes 0 .. episodes-1 of a run with root seed ``seed``: the same for
    every evaluation of the run (so that evaluations differ by the weights alone, and best.pt is better, not luckier)
    and for ``python -m a3c.evaluate`` of the run, which thus reproduces the run's evaluations."""
    return [env_seed(seed, 0, EVALUATOR_RANK, 0, Role.ENV, i) for i in range(episodes)]


def eval_samplers(seed: int, episodes: int) -> list[np.random.Generator]:
    """The action samplers of stochastic evaluation episodes 0 .. episodes-1 of a run with root seed ``seed``, one per
    episode, so that an episode draws the same actions whether it is played in a batch or alone (``run_episodes``)
    and in every evaluation of the run (evaluations differ by the weights alone)."""
    return [np.random.default_rng(stream(seed, 0, EVALUATOR_RANK, 0, Role.SAMPLER, i)) for i in range(episodes)]


@dataclass
class EpisodeStats:
    returns: np.ndarray  # [episodes]
    lengths: np.ndarray  # [episodes]
    seconds: float

    def summary(self) -> dict[str, float]:
        return {
            "mean_return": float(self.returns.mean()),
            "std_return": float(self.returns.std()),
            "mean_length": float(self.lengths.mean()),
            "min_return": float(self.returns.min()),
            "max_return": float(self.returns.max()),
            "episodes": int(len(self.returns)),
            "eval_s": self.seconds,
        }


def run_episodes(
    agent: Agent,
    envs: Sequence[gym.Env],
    seeds: Sequence[int],
    deterministic: bool = True,
    samplers: Sequence[np.random.Generator] | np.random.Generator | None = None,
    on_step: Callable[[], None] | None = None,
    *,
    rng: np.random.Generator | None = None,
) -> EpisodeStats:
    """One episode per seed (``env.reset(seed=...)``), played by ``agent``, on ``envs`` in lockstep: the envs take
    the seeds in groups of len(envs), each group's observations go through the network as one batch (of a fixed
    size: an env whose episode is over keeps its row until the group is done, so the batch a given episode saw does
    not depend on when the others ended). ``samplers`` (``deterministic=False``): one per seed, episode i's actions
    drawn with samplers[i] (``eval_samplers``), so an episode's draws do not depend on the group it is played in;
    one Generator (or ``rng``, its name before a3c had per-episode samplers) draws for every row, and without either
    the agent's own sampler. ``on_step`` is called after every step of the group (a heartbeat)."""
    if isinstance(samplers, np.random.Generator):
        rng, samplers = samplers, None  # (one Generator in its place: every row draws from it)
    per_episode = None if rng is not None else samplers
    if per_episode is not None and len(per_episode) != len(seeds):
        raise ValueError(f"run_episodes: {len(per_episode)} samplers for {len(seeds)} episodes")
    returns, lengths = np.zeros(len(seeds)), np.zeros(len(seeds), dtype=np.int64)
    started = time.perf_counter()
    for first in range(0, len(seeds), len(envs)):
        group = list(seeds[first : first + len(envs)])
        obs = np.stack(
            [np.asarray(env.reset(seed=s)[0], dtype=np.float32) for env, s in zip(envs, group, strict=False)]
        )
        active = np.ones(len(group), dtype=bool)
        rows = None if per_episode is None else list(per_episode[first : first + len(group)])
        # new episodes: a recurrent policy starts from its initial state, gSDE's noise is drawn from each row's
        # sampler (or from the one sampler every row draws from)
        agent.reset(len(group), rows if rows is not None else [rng or agent.rng] * len(group))
        while active.any():
            actions = agent.act_batch(obs, deterministic, rng if rows is None else rows)
            for k in np.flatnonzero(active).tolist():
                o, reward, terminated, truncated, _ = envs[k].step(actions[k])
                returns[first + k] += float(reward)
                lengths[first + k] += 1
                if terminated or truncated:
                    active[k] = False
                else:
                    obs[k] = np.asarray(o, dtype=np.float32)
            if on_step is not None:
                on_step()
    return EpisodeStats(returns, lengths, time.perf_counter() - started)


def make_eval_envs(config: Config, count: int, **make_kwargs: Any) -> list[gym.Env]:
    """``count`` envs of the run's env id and kwargs (``make_kwargs`` on top, e.g. render_mode)."""
    return [make_env(config.env, {**config.env_kwargs, **make_kwargs}, training=False) for _ in range(count)]
