"""a3c: a fast, correct, observable asynchronous actor-critic trainer for gymnasium environments on PyTorch, its
workers learning with A3C's objective or PPO's clipped surrogate (``--algo``; docs/guides/objective.md).

Entry points: ``python -m a3c.train`` (training), ``python -m a3c.evaluate`` (score, record), ``python -m a3c.plot``
(figures from a run directory); from Python, ``a3c.train(...)`` and ``a3c.load(path)`` (a3c/api.py,
a3c/record/agent.py). The Python API is imported on first use, so that ``import a3c`` (and the command line's input
checks) stay free of torch.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"
__all__ = ["Agent", "Config", "TrainResult", "load", "train"]

_EXPORTS = {
    "Agent": "a3c.record.agent",
    "load": "a3c.record.agent",
    "Config": "a3c.spec.config",
    "TrainResult": "a3c.api",
    "train": "a3c.api",
}


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'a3c' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
