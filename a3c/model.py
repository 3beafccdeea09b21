"""The actor-critic network and its flat parameter buffer.

ActorCritic is an MLP torso with a Categorical policy head and a value head. `flatten_parameters` moves every
parameter (and its gradient) into one contiguous tensor, the parameters becoming views into it: pulling the global
weights, handing over a gradient and the optimizer step then each cost one tensor operation, not one per layer.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from torch import nn


class ActorCritic(nn.Module):
    """obs [B, obs_dim] -> (logits [B, n_actions], value [B])."""

    def __init__(self, obs_dim: int, n_actions: int, hidden_sizes: Sequence[int] = (64, 64)) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        width = obs_dim
        for hidden in hidden_sizes:
            layers += [_init(nn.Linear(width, hidden), math.sqrt(2)), nn.Tanh()]
            width = hidden
        self.torso = nn.Sequential(*layers)
        self.policy_head = _init(nn.Linear(width, n_actions), 0.01)  # near-uniform initial policy
        self.value_head = _init(nn.Linear(width, 1), 1.0)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = self.torso(obs)
        return self.policy_head(features), self.value_head(features).squeeze(-1)


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


def sample_actions(logits: torch.Tensor, rng: np.random.Generator) -> np.ndarray:
    """Sample one action per row of logits [B, A] by inverse CDF, without torch.distributions.

    Constructing a Categorical per env step costs several times the forward pass itself; softmax + cumsum + one
    uniform draw per row is exact and cheap. Returns int64 actions [B].
    """
    probs = torch.softmax(logits, dim=-1).numpy()
    cdf = np.cumsum(probs, axis=-1)
    u = rng.random((cdf.shape[0], 1)) * cdf[:, -1:]  # scale by the last entry so rounding can never overflow
    actions = (u >= cdf).sum(axis=-1)
    return np.minimum(actions, probs.shape[-1] - 1).astype(np.int64)
