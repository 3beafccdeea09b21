#!/usr/bin/env bash
# a3c's two objectives side by side (docs/ppo.md): A3C's (--algo a3c) and PPO's (--algo ppo) on each env's preset, with
# SB3's PPO, rl-zoo3's settings on LunarLander and CleanRL's on Hopper; returns against steps and against wall time
# (python -m scripts.bench figure --env LunarLander-v3 --arm algo-a3c algo-ppo sb3-ppo --seed 201 202 203 --out ppo.png).
set -euo pipefail
cd "$(dirname "$0")/.."
python -m scripts.bench run --env LunarLander-v3 --arm algo-a3c=--algo\ a3c algo-ppo=--algo\ ppo sb3-ppo \
    --seeds 201-203 --budget 1000000 --threshold 200 "$@"
python -m scripts.bench run --env CartPole-v1 --arm algo-a3c=--algo\ a3c algo-ppo=--algo\ ppo --seeds 301-304 \
    --budget 500000 "$@"
python -m scripts.bench run --env Hopper-v5 --arm algo-a3c=--algo\ a3c algo-ppo=--algo\ ppo sb3-ppo-cleanrl \
    --seeds 401 --budget 1000000 --threshold 2000 "$@"
