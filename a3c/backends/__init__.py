"""Where the global parameters live. A backend implements ParameterStore: the only interface the worker loop uses to
pull weights, push gradients (with the shared optimizer step), count steps and publish episodes."""

from __future__ import annotations

from typing import Protocol

import torch

from a3c.board import EpisodeBoard


class ParameterStore(Protocol):
    board: EpisodeBoard

    def pull(self, dest: torch.Tensor) -> int:
        """Copy the global parameters into ``dest``; return the global update count at that moment."""

    def push(self, grad: torch.Tensor, rank: int, pulled_at: int) -> int:
        """Apply ``grad`` with the shared optimizer; return the policy lag (updates since ``pulled_at``)."""

    def should_stop(self) -> bool:
        """True once the run is over (step budget reached, or the main process asked to stop)."""

    def interval(self) -> int:
        """The main process's current logging interval (for per-interval maxima)."""
