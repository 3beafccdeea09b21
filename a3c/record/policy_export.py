"""A trained policy's acting path as a file that runs without a3c: ONNX (onnxruntime, any language it serves) or
TorchScript (``torch.jit.load``). ``export_policy(agent, path, fmt)`` is what ``Agent.export`` and ``python -m
a3c.export`` call.

What the file computes is ``Agent.act(obs)`` with ``deterministic=True``, for a batch: the observation as the env gives
it (its own dtype: uint8 frames, bool grids, float vectors), cast to float32 as the Agent does, the run's frozen
observation normalisation ((obs - mean) / std in float64, clipped to +-clip_obs, cast to float32: the same arithmetic
as a3c.learn.running_stats.ObsNormalizer.apply, so the same floats), the network's policy (uint8 scaling and the
frames' background shift are inside the model already), and the deterministic action as the env's ``step`` takes it:
the argmax (+ the space's start) for Discrete and MultiDiscrete actions, the Gaussian's mean clipped to the bounds for
Box actions.

Inputs and outputs (named in both formats; the batch dimension is dynamic):
  obs        [B, *obs_shape]   the env's observation dtype
  state      [S, B, H] float32 (--lstm only): the recurrent state, zeros at an episode's start (S = 2, or 4 with a
                                separate critic, whose LSTM the policy's forward pass advances too)
  action     [B, *action_shape] the action space's dtype
  state_out  [S, B, H]          (--lstm only) the state to feed with the next observation
  with ``with_dist_params``: ``logits`` [B, sum(n)] (Discrete, MultiDiscrete), or ``mean`` and ``log_std`` [B, A]
  (Box: the Gaussian before clipping; with --gsde its state-dependent std)
The file also carries a description of these (ONNX: metadata_props; TorchScript: the ``a3c.json`` extra file).

ONNX is written by torch's default exporter (``torch.onnx.export(..., dynamo=True)``, the torch.export-based one,
which needs the ``onnxscript`` package: the ``onnx`` extra). What is not exported, each a one-line UserError: a --bf16
agent to ONNX (its CNN computes in bfloat16 under torch.autocast, which the ONNX graph would not reproduce; TorchScript
records the casts), and an agent whose observation transform is not a3c's normalisation (built by hand).
"""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import json
import logging
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from a3c.learn.distributions import Categorical, DiagGaussian, Distribution, MultiCategorical
from a3c.learn.model import ActorCritic
from a3c.learn.running_stats import ObsNormalizer
from a3c.spec.errors import UserError, install_extra

if TYPE_CHECKING:
    from a3c.record.agent import Agent

FORMATS = ("onnx", "torchscript")
# the file name suffixes of each format (the first: the one to suggest): an --out that ends in another format's is
# refused, as a TorchScript file named .onnx (or the reverse) fails where it is loaded, far from the export
FORMAT_SUFFIXES = {"onnx": (".onnx",), "torchscript": (".pt", ".pth", ".torchscript")}
ONNX_EXTRA = f"{install_extra('onnx')} (or: pip install onnx onnxruntime onnxscript)"
EXAMPLE_BATCH = 2  # the batch traced with (the exported batch dimension is dynamic; 1 would be specialised)


def _torch_dtype(dtype: np.dtype) -> torch.dtype:
    return torch.from_numpy(np.zeros(0, dtype=dtype)).dtype


class ActingPolicy(nn.Module):
    """The acting path of an agent as one module: observations [B, *obs_shape] (and the recurrent state [S, B, H]) ->
    the deterministic action (and the next state, and the distribution's parameters with ``with_dist_params``)."""

    # buffers (saved in the file): the normalisation's statistics, the discrete actions' start, the Box bounds
    obs_mean: torch.Tensor
    obs_std: torch.Tensor
    start: torch.Tensor
    low: torch.Tensor
    high: torch.Tensor

    def __init__(
        self, model: ActorCritic, dist: Distribution, normalizer: ObsNormalizer | None, with_dist_params: bool
    ) -> None:
        super().__init__()
        self.model, self.dist, self.with_dist_params = model, dist, with_dist_params
        self.recurrent = bool(model.lstm)
        self.normalize = normalizer is not None
        # float64, as ObsNormalizer.apply computes: the exported floats are the Agent's floats
        mean = np.zeros(0) if normalizer is None else np.asarray(normalizer.mean, dtype=np.float64)
        std = np.ones(0) if normalizer is None else np.asarray(normalizer.std, dtype=np.float64)
        self.register_buffer("obs_mean", torch.from_numpy(mean.copy()))
        self.register_buffer("obs_std", torch.from_numpy(std.copy()))
        self.clip = float(normalizer.clip) if normalizer is not None else 0.0
        if isinstance(dist, MultiCategorical):
            self.sizes = list(dist.sizes)
            self.register_buffer("start", torch.from_numpy(dist.start.copy()))
            self.action_dtype = _torch_dtype(np.dtype(dist.dtype))
        elif isinstance(dist, Categorical):
            self.register_buffer("start", torch.tensor(int(dist.start), dtype=torch.int64))
            self.action_dtype = torch.int64
        elif isinstance(dist, DiagGaussian):
            # a float64 space's bounds clipped in float64, as DiagGaussian.env_actions clips: bounds float32 cannot
            # hold (0.3) are met exactly, not rounded past (0.30000001, outside the space); a float32 space's in
            # float32, which gives the same floats and keeps the graph free of float64 (runtimes without it)
            self.clip_dtype = torch.float64 if np.dtype(dist.dtype) == np.float64 else torch.float32
            bound = np.float64 if self.clip_dtype == torch.float64 else np.float32
            self.register_buffer("low", torch.from_numpy(dist.low.astype(bound)))
            self.register_buffer("high", torch.from_numpy(dist.high.astype(bound)))
            self.action_dtype = _torch_dtype(np.dtype(dist.dtype))
        else:
            raise UserError(
                f"an agent whose policy is a {type(dist).__name__} cannot be exported; a3c exports "
                "Discrete, MultiDiscrete and Box policies"
            )
        self.action_shape = tuple(dist.action_shape)

    def forward(self, obs: torch.Tensor, state: torch.Tensor | None = None) -> tuple[torch.Tensor, ...]:
        x = obs.to(torch.float32)  # (Agent._batch: np.asarray(obs, dtype=np.float32))
        if self.normalize:
            y = ((x.to(torch.float64) - self.obs_mean) / self.obs_std).clamp(-self.clip, self.clip)
            # a non-finite entry stays non-finite (NaN), never clipped (ObsNormalizer.apply)
            y = torch.where(torch.isfinite(x), y, torch.full_like(y, float("nan")))
            x = y.to(torch.float32)
        if self.recurrent:
            assert state is not None, "a recurrent policy takes its state"
            params, new_state = self.model.policy(x, tuple(state.unbind(0)))
        else:
            params, _ = self.model.policy(x, ())
        outputs = [self._action(params)]
        if self.recurrent:
            outputs.append(torch.stack(new_state))
        if self.with_dist_params:
            outputs += self._dist_params(params)
        return tuple(outputs)

    def _action(self, params: torch.Tensor) -> torch.Tensor:
        """The distribution's mode as Distribution.mode and env_actions give it to the env."""
        rows = params.shape[0]
        if isinstance(self.dist, MultiCategorical):
            modes = torch.stack([p.argmax(-1) for p in params.split(self.sizes, dim=-1)], dim=-1) + self.start
            return modes.to(self.action_dtype).reshape(rows, *self.action_shape)
        if isinstance(self.dist, Categorical):
            return params.argmax(-1) + self.start
        dim = self.low.shape[0]
        # the float32 mean (Distribution.mode) clipped (in float64 for a float64 space), then the space's dtype
        mean = params[:, :dim].to(torch.float32).to(self.clip_dtype)
        clipped = torch.minimum(torch.maximum(mean, self.low), self.high)
        return clipped.to(self.action_dtype).reshape(rows, *self.action_shape)

    def _dist_params(self, params: torch.Tensor) -> list[torch.Tensor]:
        if isinstance(self.dist, DiagGaussian):
            mean, log_std = self.dist._mean_log_std(params)  # (with --gsde, the std given the state)
            return [mean, log_std]
        return [params]  # the logits

    def names(self) -> tuple[list[str], list[str]]:
        """(input names, output names) in the order forward takes and returns them."""
        inputs = ["obs", "state"] if self.recurrent else ["obs"]
        outputs = ["action", "state_out"] if self.recurrent else ["action"]
        if self.with_dist_params:
            outputs += ["mean", "log_std"] if isinstance(self.dist, DiagGaussian) else ["logits"]
        return inputs, outputs


def describe(agent: Agent, policy: ActingPolicy, fmt: str) -> dict[str, Any]:
    """What the exported file takes and gives, as plain data (stored in the file)."""
    inputs, outputs = policy.names()
    state = agent.model.initial_state(1)
    return {
        "format": fmt,
        "env": agent.config.env,
        "global_step": agent.global_step,
        "inputs": inputs,
        "outputs": outputs,
        "obs_shape": list(agent.spec.obs_shape),
        "obs_dtype": str(np.dtype(agent.observation_space.dtype)),
        "state_shape": [len(state), "batch", agent.model.lstm] if state else None,
        "action_space": repr(agent.action_space),
        "action": "deterministic: argmax (+ start) for discrete actions, the mean clipped to the bounds for Box",
        "obs_normalization": policy.normalize,
        "clip_obs": policy.clip if policy.normalize else None,
    }


def acting_policy(agent: Agent, with_dist_params: bool = False) -> ActingPolicy:
    """The agent's acting path as a module (UserError where it cannot be exported)."""
    transform = agent.obs_transform
    normalizer = transform if isinstance(transform, ObsNormalizer) else None
    from a3c.record.agent import _identity  # (agent.py imports this module's user: no import at the top)

    if normalizer is None and transform is not _identity:
        raise UserError(
            "this agent's observation transform is not a3c's observation normalisation (it was set by hand), so it "
            "cannot be exported; export an agent loaded with a3c.load"
        )
    model = copy.deepcopy(agent.model).requires_grad_(False)  # (the agent's own model is left as it is)
    return ActingPolicy(model, agent.dist, normalizer, with_dist_params).eval()


def example_inputs(agent: Agent, batch: int = EXAMPLE_BATCH) -> tuple[torch.Tensor, ...]:
    """Observations (zeros of the env's dtype) and, for a recurrent agent, the initial state, for tracing."""
    obs = torch.zeros((batch, *agent.spec.obs_shape), dtype=_torch_dtype(np.dtype(agent.observation_space.dtype)))
    state = agent.model.initial_state(batch)
    return (obs, torch.stack(state)) if state else (obs,)


def export_policy(agent: Agent, path: str | Path, fmt: str = "onnx", with_dist_params: bool = False) -> Path:
    """Write the agent's acting path to ``path`` in ``fmt`` (onnx or torchscript, in any case); returns the path."""
    fmt = fmt.lower()
    if fmt not in FORMATS:
        raise UserError(f"--format {fmt!r}: a3c exports {' or '.join(FORMATS)}")
    out = Path(path)
    other = next((other for other in FORMATS if other != fmt and out.suffix.lower() in FORMAT_SUFFIXES[other]), None)
    if other is not None:
        raise UserError(
            f"--out {out} ends in {out.suffix}, the suffix of {other}, but --format {fmt} writes {fmt}; give a file "
            f"name ending in {FORMAT_SUFFIXES[fmt][0]}, or --format {other}"
        )
    policy = acting_policy(agent, with_dist_params)
    if fmt == "onnx":
        _export_onnx(agent, policy, out)
    else:
        _export_torchscript(agent, policy, out)
    return out


def _export_torchscript(agent: Agent, policy: ActingPolicy, out: Path) -> None:
    with torch.inference_mode(False), torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.jit's notice that TorchScript is in maintenance mode
        traced = torch.jit.trace(policy, example_inputs(agent), check_trace=False)
        extra = {"a3c.json": json.dumps(describe(agent, policy, "torchscript"))}

        def save(target: Path) -> None:
            # into a file opened here: torch.jit.save given a path reports a failed open as a RuntimeError of its C++
            # writer, which _write would not know for the OSError it is
            with open(target, "wb") as file:
                torch.jit.save(traced, file, _extra_files=extra)

        _write(out, save)


def onnx_refusal(agent: Agent) -> str | None:
    """Why ``agent`` has no ONNX export, or None: the one rule that a3c.export and scripts/onnx_check (which refuses
    before it plays or writes anything) both say, each with its own fix."""
    if agent.config.bf16:
        return (
            "a --bf16 agent computes its CNN in bfloat16 under torch.autocast, which an ONNX graph does not reproduce"
        )
    return None


def _export_onnx(agent: Agent, policy: ActingPolicy, out: Path) -> None:
    missing = [name for name in ("onnx", "onnxscript") if importlib.util.find_spec(name) is None]
    if missing:
        raise UserError(f"--format onnx needs {' and '.join(missing)}, which is not installed; {ONNX_EXTRA}")
    refusal = onnx_refusal(agent)
    if refusal is not None:
        raise UserError(f"{refusal}; export it with --format torchscript")
    import onnx

    inputs, outputs = policy.names()
    example = example_inputs(agent)
    batch = torch.export.Dim("batch")
    shapes = {"obs": {0: batch}, **({"state": {1: batch}} if policy.recurrent else {})}
    with torch.no_grad(), warnings.catch_warnings(), _quiet_onnx_logs():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(
            policy,
            example,
            input_names=inputs,
            output_names=outputs,
            dynamic_shapes=shapes,
            dynamo=True,
            external_data=False,
            verbose=False,
        )
    assert program is not None, "torch.onnx.export(dynamo=True) returns the program"
    proto = program.model_proto
    onnx.helper.set_model_props(proto, {"a3c": json.dumps(describe(agent, policy, "onnx"))})
    _write(out, lambda target: onnx.save_model(proto, str(target)))


@contextlib.contextmanager
def _quiet_onnx_logs() -> Iterator[None]:
    """torch.onnx's exporter logs a warning for each torchvision operator it skips where torchvision is not installed
    (four lines on every export, through logging, which warnings.catch_warnings does not reach): errors only."""
    logger = logging.getLogger("torch.onnx")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _write(out: Path, save: Any) -> None:
    """Save through a temporary file beside ``out``, renamed into place (no half-written file on failure)."""
    tmp = out.with_name(out.name + ".tmp")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        save(tmp)
        tmp.replace(out)
    except OSError as err:
        with contextlib.suppress(OSError):  # (where the folder is not one, there is no temporary file either)
            tmp.unlink(missing_ok=True)
        raise UserError(f"cannot write {out} ({err.strerror or err}); give a writable --out PATH") from None
