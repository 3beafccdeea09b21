#!/usr/bin/env bash
# a3c against SB3's A2C on CartPole-v1 (docs/benchmarks/throughput.md): steps/s and the wall time at which the
# 100-episode mean first reached 475, the env's preset and rl-zoo3's settings, 3 seeds, runs alternating (seed by
# seed, a3c then SB3). The table: python -m scripts.bench table --env CartPole-v1 --arm preset sb3-a2c
# --seed 1 2 3 --budget 500000 --view ratio
set -euo pipefail
cd "$(dirname "$0")/.."
python -m scripts.bench run --env CartPole-v1 --arm preset= sb3-a2c --seeds 1-3 --budget 500000 "$@"
