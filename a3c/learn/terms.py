"""The names of the terms an update reports, in order, kept free of torch so that the record layer (and a new run's
settings and checks, which must not import torch) can name its columns: A3C's loss and its three parts, then PPO's
diagnostics. An objective's learner reports a prefix of ``PPO_TERMS``."""

from __future__ import annotations

A3C_TERMS: tuple[str, ...] = ("loss", "policy_loss", "value_loss", "entropy")
# the loss's terms, then PPO's diagnostics
PPO_TERMS: tuple[str, ...] = (*A3C_TERMS, "approx_kl", "clip_fraction", "explained_variance")
