"""The benchmark and diagnostic scripts, a package so that they share scripts/_common.py and scripts/sb3_runner.py
without touching sys.path: run each from the repository root as ``python -m scripts.NAME``."""
