"""The actor-critic network, built from the env's spaces in one place (``build_model``), and its flat parameter buffer.

ActorCritic maps observations to (policy-distribution parameters, value, recurrent state). By default the actor and
the critic are separate MLPs (as SB3's MlpPolicy): a value loss that dominates early cannot drag the policy's
features around (Acrobot-v1, contextual bandits). ``--shared-torso`` gives them one MLP, the A3C paper's shape.
The recurrent state is carried through ``forward`` so that a recurrent core can be added without changing the
worker; the MLP model has none (``initial_state`` returns an empty tuple).

``flatten_parameters`` moves every parameter (and its gradient) into one contiguous tensor, the parameters becoming
views into it: pulling the global weights, handing over a gradient and the optimizer step then each cost one tensor
operation, not one per layer.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch
from torch import nn

from a3c.distributions import Distribution, make_distribution

if TYPE_CHECKING:
    from a3c.config import Config
    from a3c.environment import EnvSpec

State = tuple[torch.Tensor, ...]  # a recurrent core's state; () for a model without one


def mlp(in_dim: int, hidden_sizes: Sequence[int]) -> nn.Sequential:
    """Linear + tanh layers with orthogonal init (gain sqrt 2); the output width is hidden_sizes[-1]."""
    layers: list[nn.Module] = []
    width = in_dim
    for hidden in hidden_sizes:
        layers += [_init(nn.Linear(width, hidden), math.sqrt(2)), nn.Tanh()]
        width = hidden
    return nn.Sequential(*layers)


class ActorCritic(nn.Module):
    """obs [B, *obs_shape] -> (policy params [B, param_dim], value [B], state)."""

    def __init__(
        self, obs_dim: int, param_dim: int, hidden_sizes: Sequence[int] = (64, 64), shared_torso: bool = False
    ) -> None:
        super().__init__()
        self.obs_dim = obs_dim
        width = hidden_sizes[-1]
        self.actor = mlp(obs_dim, hidden_sizes)
        self.critic = None if shared_torso else mlp(obs_dim, hidden_sizes)
        self.policy_head = _init(nn.Linear(width, param_dim), 0.01)  # near-uniform initial policy
        self.value_head = _init(nn.Linear(width, 1), 1.0)

    def forward(self, obs: torch.Tensor, state: State = ()) -> tuple[torch.Tensor, torch.Tensor, State]:
        x = obs.reshape(obs.shape[0], self.obs_dim)
        features = self.actor(x)
        value_features = features if self.critic is None else self.critic(x)
        return self.policy_head(features), self.value_head(value_features).squeeze(-1), state

    def policy(self, obs: torch.Tensor, state: State = ()) -> tuple[torch.Tensor, State]:
        """The policy alone (acting): with separate networks, the critic's forward pass is not paid per env step."""
        x = obs.reshape(obs.shape[0], self.obs_dim)
        return self.policy_head(self.actor(x)), state

    def initial_state(self, batch: int) -> State:
        """The recurrent state at the start of an episode, for ``batch`` envs."""
        return ()


def build_model(spec: EnvSpec, config: Config) -> tuple[ActorCritic, Distribution]:
    """The network and its policy distribution for an env's spaces: the one place that chooses them."""
    dist = make_distribution(spec.action_space)
    model = ActorCritic(spec.obs_dim, dist.param_dim, config.hidden_sizes, config.shared_torso)
    return model, dist


def _init(layer: nn.Linear, gain: float) -> nn.Linear:
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.zeros_(layer.bias)
    return layer


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
    return sum(p.numel() for p in build_model(spec, config)[0].parameters())
