"""The benchmark and diagnostic scripts, a package so that they share scripts/_common.py, scripts/sb3_runner.py and
the benchmark driver's parts (scripts/benchmark/): run each from the repository root as ``python -m scripts.NAME``, or
as a file, ``python scripts/NAME.py`` (scripts/_root.py puts the root on sys.path then)."""
