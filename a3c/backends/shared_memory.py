"""The shared-memory parameter store (the default backend): global parameters, optimizer state, board and control
flags in shared tensors on this machine, reached by worker processes Hogwild-style, without locks."""

from __future__ import annotations

import torch

from a3c.board import EpisodeBoard
from a3c.optim import _SharedOptimizer

STOP, INTERVAL = 0, 1  # slots of the control tensor; the main process is their only writer


class SharedMemoryStore:
    """Everything a worker process shares with the others. Picklable: torch sends its tensors as shared memory."""

    def __init__(
        self, params: torch.Tensor, optimizer: _SharedOptimizer, board: EpisodeBoard, total_steps: int
    ) -> None:
        if not params.is_shared():
            raise ValueError("the global parameters must be in shared memory")
        self.params = params
        self.optimizer = optimizer
        self.board = board
        self.total_steps = total_steps
        self.control = torch.zeros(2, dtype=torch.int64).share_memory_()

    # -- worker side -------------------------------------------------------------------------------------------
    def pull(self, dest: torch.Tensor) -> int:
        dest.copy_(self.params)  # one memcpy of the whole model; other workers may be writing (Hogwild)
        return self.optimizer.step_count()

    def push(self, grad: torch.Tensor, rank: int, pulled_at: int) -> int:
        """The gradient handoff. The worker's gradient lives in its own (private) flat buffer; the shared optimizer
        reads it and updates the shared parameters and shared moments in place. No gradient tensor is ever shared,
        so there is no `.grad` of the global model to keep alive across processes (the usual Hogwild pitfall), and
        workers never see each other's half-written gradients: only parameter and moment updates interleave."""
        lag = self.optimizer.step_count() - pulled_at
        self.optimizer.step(grad, slot=rank)
        return lag

    def should_stop(self) -> bool:
        return bool(self.control[STOP]) or self.board.global_step() >= self.total_steps

    def interval(self) -> int:
        return int(self.control[INTERVAL])

    # -- main side ---------------------------------------------------------------------------------------------
    def request_stop(self) -> None:
        self.control[STOP] = 1

    def next_interval(self) -> None:
        self.control[INTERVAL] += 1
