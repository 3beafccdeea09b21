#!/usr/bin/env bash
# The learning queue (benchmarks/queue.toml): every run not yet stored, one at a time; --dry-run lists them.
set -euo pipefail
cd "$(dirname "$0")/.."
python -m scripts.bench run --queue benchmarks/queue.toml "$@"
