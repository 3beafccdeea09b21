"""The Ray backend (``--backend ray``); see backend.py. Imports nothing, so that shm_reaper.py is importable (and
runnable by its path) without Ray."""
