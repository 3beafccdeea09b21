#!/usr/bin/env bash
# The classic suite (docs/benchmarks/suite.md): each env's preset against SB3's A2C with rl-zoo3's settings, seeds 1-3,
# the presets' budgets; CartPole-v1 on 5 seeds without a stop; the README's Quickstart command on 10 seeds, each
# final and best checkpoint evaluated. Every finished run goes to docs/data/results.jsonl; a stored run is skipped, a stopped
# one resumed: rerun this file to go on. The thresholds are the suite table's (MountainCar -130, LunarLander 100; the
# driver's default is the env's own). Tables: python -m scripts.bench table --env CartPole-v1 --arm preset sb3-a2c --seed 1 2 3
set -euo pipefail
cd "$(dirname "$0")/.."
python -m scripts.bench run --env CartPole-v1 Acrobot-v1 --arm preset= sb3-a2c --seeds 1-3 --budget 500000 "$@"
python -m scripts.bench run --env MountainCar-v0 --arm preset= sb3-a2c --seeds 1-3 --budget 1000000 --threshold -130 "$@"
python -m scripts.bench run --env LunarLander-v3 --arm preset= sb3-a2c --seeds 1-3 --budget 1000000 --threshold 100 "$@"
python -m scripts.bench run --env CartPole-v1 --arm preset= --seeds 1-5 --budget 500000 "$@"
python -m scripts.bench run --env CartPole-v1 --arm quickstart=--stop-when-solved --workers default --evaluate 10 \
    --seeds 1-10 --budget 500000 "$@"
