"""This project's gymnasium environments, registered under the `envs/` namespace when the package is imported.

  envs/SlowCartPole-v1  CartPole-v1 behind SlowEnv: 10 ms per step by default (envs/slow.py)
  envs/Classify-v0      the tutorial's classification task as a contextual bandit, optionally slow (envs/classify.py)
  envs/Memory-v0        a cue, a delay of blank observations, then the action must name the cue (envs/memory.py)
  envs/Catch-v0        a ball to catch with a paddle, the grid drawn as a small bool image (envs/catch.py)
  envs/Spaces-v0        a tiny task in every observation/action space a3c supports, for tests (envs/spaces.py)

Keyword arguments reach the entry points through gymnasium.make (from the CLI: --env-kwargs latency=0.02 mode=cpu); a
value out of range is a ValueError naming it, which a3c reports as one line naming the kwarg. The package imports
nothing of a3c (a3c.spec.environment imports it, to register these ids: the one arrow between them; pyproject's
import-linter contracts hold both).
"""

import gymnasium

gymnasium.register(
    id="envs/SlowCartPole-v1", entry_point="envs.slow:make_slow_cartpole", max_episode_steps=500, reward_threshold=475.0
)
gymnasium.register(id="envs/Classify-v0", entry_point="envs.classify:make_classify")
gymnasium.register(id="envs/Faulty-v0", entry_point="envs.faulty:FaultyEnv", max_episode_steps=500)  # tests
gymnasium.register(id="envs/Memory-v0", entry_point="envs.memory:MemoryEnv", reward_threshold=0.95)
gymnasium.register(id="envs/Catch-v0", entry_point="envs.catch:CatchEnv", max_episode_steps=200)
gymnasium.register(id="envs/Spaces-v0", entry_point="envs.spaces:SpacesEnv", max_episode_steps=8)  # tests
