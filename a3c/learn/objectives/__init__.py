"""What an update optimises, one module an objective (``--algo``): a3c.py (A3C: one gradient a rollout, on the
weights that acted) and ppo.py (PPO's clipped surrogate: epochs of minibatches). Each says what its learner reports
(``terms``) and builds it on an update path (a3c.learn.update.paths). ``OBJECTIVES`` maps ``--algo`` to them."""

from __future__ import annotations

from a3c.learn.objectives.a3c import A3C
from a3c.learn.objectives.ppo import PPO
from a3c.learn.update.protocol import Objective

OBJECTIVES: dict[str, Objective] = {"a3c": A3C, "ppo": PPO}
