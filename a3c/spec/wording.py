"""How a3c's lines to the user word a number of things: ``count(2, "worker")`` is "2 workers", ``count(1, "core")``
"1 core", ``count(10000, "episode")`` "10,000 episodes" (every noun a3c counts takes a plain -s)."""

from __future__ import annotations


def count(n: int, noun: str) -> str:
    """``n`` (with thousands separators) and ``noun``, plural unless ``n`` is 1."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"
