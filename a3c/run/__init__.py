"""The processes of a run: the start-up's one resolve step, the trainer (the main process), the workers, their
supervisor, the evaluator, the episode board's shared tensors, the fork server's preload, --workers auto, and the
backends (shared memory, serial, Ray)."""
