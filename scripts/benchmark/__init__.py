"""The benchmark driver's parts (the command is scripts/bench.py, ``python -m scripts.bench``): the runs' episodes and
their one rolling-mean curve (curves.py), the results store and its row (store.py), arms and the commands they run
(arms.py), the queue file (queue.py), and one run's life: start, resume, record (runner.py)."""
