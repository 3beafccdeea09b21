#!/usr/bin/env bash
# Continuous control and MuJoCo (docs/benchmarks/continuous.md): each env's preset against SB3's A2C with rl-zoo3's
# settings, seeds 1-3, the presets' budgets. MuJoCo needs the mujoco extra, LunarLanderContinuous the box2d one.
set -euo pipefail
cd "$(dirname "$0")/.."
python -m scripts.bench run --env Pendulum-v1 LunarLanderContinuous-v3 --arm preset= sb3-a2c --seeds 1-3 \
    --budget 1000000 "$@"
python -m scripts.bench run --env MountainCarContinuous-v0 --arm preset= sb3-a2c --seeds 1-3 --budget 100000 "$@"
python -m scripts.bench run --env HalfCheetah-v5 Hopper-v5 Walker2d-v5 --arm preset= sb3-a2c --seeds 1-3 \
    --budget 1000000 "$@"
