"""The actor-critic network, built from the env's spaces in one place (``build_model``), and its flat parameter buffer.

ActorCritic = torso (chosen from the observation space: an MLP for vectors, a CNN for images) -> optional recurrent
core (``--lstm``) -> heads (the policy head chosen by the action space's distribution, a3c.learn.distributions; a linear
value head). By default the actor and the critic are separate networks (as SB3's MlpPolicy): a value loss that
dominates early cannot drag the policy's features around (Acrobot-v1, contextual bandits). ``--shared-torso`` gives
them one torso (and one core), the A3C paper's shape; a CNN torso is always shared. With separate networks and
``--lstm`` each has its own LSTM.

Two entry points: ``forward``/``policy`` take one step for a batch of envs (acting), carrying the recurrent state;
``unroll`` takes a whole rollout [T+1, K] from the state stored at its start, resetting the state of an env where its
episode ended inside the rollout (the update). The model without a core has an empty state ``()`` and its unroll is
one batched forward, so the worker never asks which kind it has.

``flatten_parameters`` moves every parameter (and its gradient) into one contiguous tensor, the parameters becoming
views into it: pulling the global weights, handing over a gradient and the optimizer step then each cost one tensor
operation, not one per layer.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeVar, cast

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from a3c.learn.distributions import Distribution, make_distribution
from a3c.spec.background import NATURE_CNN_MIN_SIDE, shifts_input
from a3c.spec.environment import is_image

if TYPE_CHECKING:
    from a3c.spec.config import Config
    from a3c.spec.environment import EnvSpec

State = tuple[torch.Tensor, ...]  # a recurrent core's state; () for a model without one
Layer = TypeVar("Layer", bound=nn.Linear | nn.Conv2d)


def mlp(in_dim: int, hidden_sizes: Sequence[int]) -> nn.Sequential:
    """Linear + tanh layers with orthogonal init (gain sqrt 2); the output width is hidden_sizes[-1]."""
    layers: list[nn.Module] = []
    width = in_dim
    for hidden in hidden_sizes:
        layers += [_init(nn.Linear(width, hidden), math.sqrt(2)), nn.Tanh()]
        width = hidden
    return nn.Sequential(*layers)


class Torso(nn.Module):
    """What a torso is to the rest of the model: observations [B, *obs_shape] -> features [B, width]."""

    width: int


class MlpTorso(Torso):
    """Observations of any shape, flattened (uint8 scaled to [0, 1]), through an MLP. ``width``: the output width."""

    def __init__(self, obs_dim: int, hidden_sizes: Sequence[int], scale: float = 1.0) -> None:
        super().__init__()
        self.obs_dim, self.width, self.scale = obs_dim, hidden_sizes[-1], scale
        self.net = mlp(obs_dim, hidden_sizes)

    def inputs(self, obs: torch.Tensor) -> torch.Tensor:
        """What the first layer reads: the observations flattened, in the weights' dtype, scaled."""
        x = obs.reshape(obs.shape[0], self.obs_dim)
        dtype = cast(nn.Linear, self.net[0]).weight.dtype  # (nn.Sequential's items are typed as Modules)
        if x.dtype != dtype:  # uint8 observations; float32 observations for a float64 copy of the model (tests)
            x = x.to(dtype)
        if self.scale != 1.0:
            x = x * self.scale
        return x

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.net(self.inputs(obs))


class CnnTorso(Torso):
    """Images [B, C, H, W] or [B, H, W, C] (or [B, H, W]: one channel), uint8 scaled to [0, 1] here, through convs
    and a ReLU layer of ``width``. 36 pixels or more on the short side: the Nature CNN (Mnih et al. 2015: 8x8/4,
    4x4/2, 3x3/1); smaller images (grids from about 3x3): two 3x3 convs (the second of stride 2) that keep the
    picture. Sized with a dummy forward pass."""

    def __init__(
        self,
        shape: tuple[int, ...],
        channels_last: bool,
        scale: float,
        width: int = 512,
        bf16: bool = False,
        shift: float = 0.0,
    ) -> None:
        super().__init__()
        self.channels_last, self.scale, self.width, self.bf16 = channels_last, scale, width, bf16
        # subtracted from the scaled input: the frames' background level (a3c.spec.background), so that it is 0
        self.shift = shift
        self.add_channel = len(shape) == 2
        c, h, w = (1, *shape) if self.add_channel else ((shape[2], shape[0], shape[1]) if channels_last else shape)
        self.image_shape = (c, h, w)  # what the convolutions take: [C, H, W]
        if min(h, w) >= NATURE_CNN_MIN_SIDE:
            convs = [nn.Conv2d(c, 32, 8, 4), nn.ReLU(), nn.Conv2d(32, 64, 4, 2), nn.ReLU(), nn.Conv2d(64, 64, 3, 1)]
        else:
            convs = [nn.Conv2d(c, 32, 3, 1, padding=1), nn.ReLU(), nn.Conv2d(32, 64, 3, 2, padding=1)]
        self.convs = nn.Sequential(*convs, nn.ReLU(), nn.Flatten())
        with torch.no_grad():
            flat = self.convs(torch.zeros(1, c, h, w)).shape[1]
        self.fc = nn.Sequential(nn.Linear(flat, width), nn.ReLU())
        for layer in self.modules():
            if isinstance(layer, (nn.Conv2d, nn.Linear)):
                _init(layer, math.sqrt(2))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = obs.to(cast(nn.Linear, self.fc[0]).weight.dtype) * self.scale
        if self.shift:
            x = x - self.shift
        if self.add_channel:
            x = x.unsqueeze(1)
        elif self.channels_last:
            x = x.permute(0, 3, 1, 2)  # (a view: already laid out channels-last)
        if torch.is_grad_enabled():
            # the update (a whole rollout, with autograd): oneDNN's convolution backward is 20-35% cheaper on
            # channels-last input (docs/benchmarks/atari.md; the weights stay views of the flat buffer, in their own
            # layout).
            # Acting (no autograd, 1-8 observations) gains nothing from it, so pays no copy.
            x = x.contiguous(memory_format=torch.channels_last)
        if self.bf16:
            # --bf16: the convolutions and the dense layer compute in bfloat16 (oneDNN's AVX-512 BF16 / AMX kernels);
            # the weights, their gradients (autocast casts a float32 weight per use, and its backward casts the
            # gradient back) and everything after the torso stay float32
            with torch.autocast("cpu", dtype=torch.bfloat16):
                return self.fc(self.convs(x)).float()
        return self.fc(self.convs(x))


def input_scale(observation_space: gym.spaces.Box, config: Config) -> float:
    """What the torso multiplies its input by: ``config.input_scale`` where set (a model rebuilt from a checkpoint
    keeps the scale it was trained with), else decided from what it is fed: raw uint8 observations (pixels in
    0..255) are scaled by 1/255 inside the model; with --normalize-obs the worker, the evaluator and a loaded agent
    feed it observations already normalised to about mean 0, std 1 (float32), and a second 1/255 would make the first
    layer's inputs ~255x too small. (An a3c before this rule applied 1/255 to uint8 observations with --normalize-obs
    too: a3c.record.checkpoint.saved_input_scale gives its checkpoints that scale back.)"""
    if config.input_scale is not None:
        return float(config.input_scale)
    return 1.0 / 255.0 if observation_space.dtype == np.uint8 and not config.normalize_obs else 1.0


def input_shift(observation_space: gym.spaces.Box, config: Config) -> float:
    """What the CNN subtracts from its scaled input: ``config.input_shift`` (the frames' background level, measured
    when the run started) for the observations a3c.spec.background measures one for, else 0."""
    return float(config.input_shift or 0.0) if shifts_input(observation_space, config) else 0.0


def make_torso(observation_space: gym.spaces.Box, config: Config) -> Torso:
    """The torso for an observation space (the one place that chooses it). Images: channels-last when the last
    dimension is smaller than the first ([84, 84, 4], [10, 12, 3]), channels-first otherwise ([4, 84, 84],
    [3, 10, 12])."""
    scale = input_scale(observation_space, config)
    shape = tuple(observation_space.shape)
    if is_image(observation_space):
        channels_last = len(shape) == 3 and shape[-1] < shape[0]
        return CnnTorso(shape, channels_last, scale, bf16=config.bf16, shift=input_shift(observation_space, config))
    return MlpTorso(int(np.prod(shape)), config.hidden_sizes, scale)


class ActorCritic(nn.Module):
    """obs [B, *obs_shape] -> (policy params [B, param_dim], value [B], state)."""

    def __init__(
        self,
        torso: Torso,
        critic_torso: Torso | None,
        policy_head: nn.Module,
        lstm: int = 0,
    ) -> None:
        """``critic_torso`` None: the critic shares ``torso`` (and its core). ``lstm`` > 0: an LSTM core of that
        size after each torso."""
        super().__init__()
        self.actor = torso
        self.critic = critic_torso
        self.lstm = lstm
        width = torso.width
        self.actor_core = nn.LSTMCell(width, lstm) if lstm else None
        self.critic_core = nn.LSTMCell(width, lstm) if lstm and critic_torso is not None else None
        if lstm:
            width = lstm
            for core in (self.actor_core, self.critic_core):
                if core is not None:
                    _init_lstm(core)
        self.policy_head = policy_head
        self.value_head = _init(nn.Linear(width, 1), 1.0)

    # -- one step -------------------------------------------------------------------------------------------------
    def forward(self, obs: torch.Tensor, state: State = ()) -> tuple[torch.Tensor, torch.Tensor, State]:
        features = self.actor(obs)
        value_features = features if self.critic is None else self.critic(obs)
        if self.lstm:
            features, value_features, state = self._core_step(features, value_features, state)
        return self.policy_head(features), self.value_head(value_features).squeeze(-1), state

    def policy(self, obs: torch.Tensor, state: State = ()) -> tuple[torch.Tensor, State]:
        """The policy alone (acting): without a core, the separate critic's forward pass is not paid per env step
        (with one, the critic's LSTM must still advance, so the whole forward runs)."""
        if self.lstm:
            params, _, state = self(obs, state)
            return params, state
        return self.policy_head(self.actor(obs)), state

    def initial_state(self, batch: int) -> State:
        """The recurrent state at the start of an episode, for ``batch`` envs: (h, c) per core, zeros."""
        cores = 1 if self.critic_core is None else 2
        return tuple(torch.zeros(batch, self.lstm) for _ in range(2 * cores)) if self.lstm else ()

    @staticmethod
    def reset_state(state: State, keep: torch.Tensor) -> State:
        """The state with the rows of envs whose episode ended zeroed: ``keep`` [B] is 0 there, 1 elsewhere."""
        return tuple(s * keep.unsqueeze(-1) for s in state)

    def _core_step(
        self, features: torch.Tensor, value_features: torch.Tensor, state: State
    ) -> tuple[torch.Tensor, torch.Tensor, State]:
        assert self.actor_core is not None, "a model with an LSTM core"
        h, c = self.actor_core(features, (state[0], state[1]))
        if self.critic_core is None:
            return h, h, (h, c)
        hv, cv = self.critic_core(value_features, (state[2], state[3]))
        return h, hv, (h, c, hv, cv)

    # -- a rollout ------------------------------------------------------------------------------------------------
    def unroll(
        self,
        obs: torch.Tensor,
        state: State,
        dones: torch.Tensor,
        final_obs: torch.Tensor | None = None,
        truncated: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """A rollout's forward pass with autograd: obs [T+1, K, ...] (obs[T] is the boundary observation), ``state``
        the state before obs[0], dones [T, K] (1 where the episode ended at step t: the state is reset before
        obs[t+1]). With ``final_obs`` [T, K, ...] and ``truncated`` [T, K]: also V(final observation) of the
        episodes truncated at step t, from the state that episode reached (no gradient).
        Returns (params [T*K, P], values [T+1, K], final_values [T, K] or None)."""
        T, K = dones.shape
        flat_obs = obs.reshape((T + 1) * K, *obs.shape[2:])
        if not self.lstm:
            params, values, _ = self(flat_obs)
            final_values = None
            if final_obs is not None:
                with torch.no_grad():
                    final_values = self(final_obs.reshape(T * K, *obs.shape[2:]))[1].view(T, K)
            return params[: T * K], values.view(T + 1, K), final_values
        # the torsos run batched over the whole rollout; only the cores step through it
        features = self.actor(flat_obs).view(T + 1, K, -1)
        value_features = features if self.critic is None else self.critic(flat_obs).view(T + 1, K, -1)
        final_values = torch.zeros(T, K) if final_obs is not None else None
        keep = 1.0 - dones.to(features.dtype)
        outs, value_outs = [], []
        for t in range(T + 1):
            out, value_out, state = self._core_step(features[t], value_features[t], state)
            outs.append(out)
            value_outs.append(value_out)
            if t == T:
                break
            if (
                final_obs is not None
                and final_values is not None
                and truncated is not None
                and bool(truncated[t].any())
            ):
                with torch.no_grad():  # the final observation continues the truncated episode's state
                    final_values[t] = self.forward(final_obs[t], tuple(s.detach() for s in state))[1]
            if bool(dones[t].any()):
                state = self.reset_state(state, keep[t])
        params = self.policy_head(torch.stack(outs[:T]).view(T * K, -1))
        values = self.value_head(torch.stack(value_outs)).squeeze(-1)
        return params, values, final_values


def mlp_actor_critic(
    obs_dim: int, param_dim: int, hidden_sizes: Sequence[int] = (64, 64), shared_torso: bool = False, lstm: int = 0
) -> ActorCritic:
    """An MLP actor-critic with a plain linear policy head (tests and scripts that need no env)."""
    critic = None if shared_torso else MlpTorso(obs_dim, hidden_sizes)
    head = _init(nn.Linear(lstm or hidden_sizes[-1], param_dim), 0.01)
    return ActorCritic(MlpTorso(obs_dim, hidden_sizes), critic, head, lstm)


def build_model(spec: EnvSpec, config: Config) -> tuple[ActorCritic, Distribution]:
    """The network and its policy distribution for an env's spaces: the one place that chooses them."""
    torso = make_torso(spec.observation_space, config)
    width = config.lstm or torso.width  # what the heads see
    dist = make_distribution(
        spec.action_space, config.log_std_init, width if config.gsde else 0, config.clipped_log_prob
    )
    # a CNN is shared by actor and critic (the A3C paper's network; two would double the costliest part)
    shared = config.shared_torso or is_image(spec.observation_space)
    critic = None if shared else make_torso(spec.observation_space, config)
    model = ActorCritic(torso, critic, dist.make_head(width), config.lstm)
    if not config.ortho_init:
        # --no-ortho-init: every dense layer as PyTorch makes it (uniform in +-1/sqrt(fan_in), as SB3 with
        # ortho_init=False), in place of the orthogonal init each layer got above; the log-std and LSTM cells keep
        # theirs. Smaller torso weights give less saturated tanh features, and with gSDE (whose std is a function of
        # them) a smaller first exploration.
        for layer in model.modules():
            if isinstance(layer, nn.Linear):
                layer.reset_parameters()
    return model, dist


def _init(layer: Layer, gain: float) -> Layer:
    nn.init.orthogonal_(layer.weight, gain)
    if layer.bias is not None:  # (every layer built here has one)
        nn.init.zeros_(layer.bias)
    return layer


def _init_lstm(cell: nn.LSTMCell) -> None:
    """Orthogonal weights, zero biases except the forget gate's (1: remember by default, so that a cue survives
    the first updates)."""
    for name, p in cell.named_parameters():
        if name.startswith("weight"):
            nn.init.orthogonal_(p)
        else:
            nn.init.zeros_(p)
            if name == "bias_ih":
                p.data[cell.hidden_size : 2 * cell.hidden_size] = 1.0  # gates ordered input, forget, cell, output


def flatten_parameters(module: nn.Module, shared: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Move the module's parameters into one flat tensor, and give them one flat gradient buffer.

    Returns (flat_params, flat_grads); afterwards every ``p.data`` and ``p.grad`` is a view into them. Autograd
    accumulates into an existing ``.grad`` in place, so ``backward()`` fills ``flat_grads`` directly; clear it with
    ``flat_grads.zero_()``, never ``zero_grad(set_to_none=True)``, which would detach the views.
    With ``shared=True`` both buffers live in shared memory (for the global model).
    """
    params = list(module.parameters())
    total = sum(p.numel() for p in params)
    dtype = params[0].dtype
    flat_params = torch.zeros(total, dtype=dtype)
    flat_grads = torch.zeros(total, dtype=dtype)
    if shared:
        flat_params.share_memory_()
        flat_grads.share_memory_()
    offset = 0
    for p in params:
        n = p.numel()
        flat_params[offset : offset + n].copy_(p.data.reshape(-1))
        p.data = flat_params[offset : offset + n].view_as(p)
        p.grad = flat_grads[offset : offset + n].view_as(p)
        offset += n
    return flat_params, flat_grads


def parameter_count(spec: EnvSpec, config: Config) -> int:
    """How many parameters build_model(spec, config) has (to check a checkpoint against)."""
    return model_shape(spec, config)[0]


def model_shape(spec: EnvSpec, config: Config) -> tuple[int, int]:
    """(parameters, width of the policy head's output) of build_model(spec, config): what a checkpoint must match."""
    model, dist = build_model(spec, config)
    return sum(p.numel() for p in model.parameters()), dist.param_dim
