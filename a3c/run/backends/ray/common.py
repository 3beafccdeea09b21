"""What several files of the Ray backend read (kept here so that none of them imports another for it): the
driver's timeouts for its calls to the parameter server (a3c/run/backends/ray/launcher.py's RayCoordinator, and
backend.py's start of the server)."""

CALL_TIMEOUT_S = 120.0  # the driver's calls to the server (a server this slow is gone)
START_TIMEOUT_S = 600.0  # the server's start: a new Ray worker process imports torch (slow on a busy machine)
