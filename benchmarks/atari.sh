#!/usr/bin/env bash
# Atari at the field's budget (docs/benchmarks/atari.md): 10M agent steps (40M frames) a run, the atari preset as a user
# runs it (--workers default: a3c's own --workers auto), both checkpoints (final, best) evaluated on 10 games. Hours a
# run on 2 cores: give the same command again after a stop and the run goes on from its last checkpoint (every 300 s).
# The atari preset is PPO's table (CleanRL's ppo_atari.py settings; its arms say --algo ppo, which is the preset's own):
# Breakout without sticky actions (seed 1), Pong without them, Breakout with them, Breakout seed 2.
# A run is skipped once the store holds it for this code's commit; --any-commit skips one stored from any commit
# (the stored runs are earlier commits': benchmarks/atari.sh --any-commit goes on from the first run not stored).
set -euo pipefail
cd "$(dirname "$0")/.."
ppo_nosticky="ppo-nosticky=--algo ppo --env-kwargs repeat_action_probability=0 --checkpoint-every-s 300"
ppo_sticky="ppo-sticky=--algo ppo --checkpoint-every-s 300"
common=(--budget 10000000 --workers default --evaluate 10)
python -m scripts.bench run --env ALE/Breakout-v5 --arm "$ppo_nosticky" --seeds 1 "${common[@]}" "$@"
python -m scripts.bench run --env ALE/Pong-v5 --arm "$ppo_nosticky" --seeds 1 "${common[@]}" "$@"
python -m scripts.bench run --env ALE/Breakout-v5 --arm "$ppo_sticky" --seeds 1 "${common[@]}" "$@"
python -m scripts.bench run --env ALE/Breakout-v5 --arm "$ppo_nosticky" --seeds 2 "${common[@]}" "$@"
# A3C's table (atari@a3c: --algo a3c), the atari preset when these four ran, under their stored arm names (which
# name no --algo): --any-commit keeps them from running again under those names with the preset of the day. To run
# A3C's table into a store without these rows, give it --algo a3c under arm names of its own.
nosticky="nosticky=--env-kwargs repeat_action_probability=0 --checkpoint-every-s 300"
sticky="sticky=--checkpoint-every-s 300"
a3c=("${common[@]}" --any-commit)
python -m scripts.bench run --env ALE/Breakout-v5 --arm "$nosticky" --seeds 1 "${a3c[@]}" "$@"
python -m scripts.bench run --env ALE/Pong-v5 --arm "$nosticky" --seeds 1 "${a3c[@]}" "$@"
python -m scripts.bench run --env ALE/Breakout-v5 --arm "$sticky" --seeds 1 "${a3c[@]}" "$@"
python -m scripts.bench run --env ALE/Breakout-v5 --arm "$nosticky" --seeds 2 "${a3c[@]}" "$@"
