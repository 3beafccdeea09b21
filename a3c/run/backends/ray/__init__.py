"""The Ray backend (``--backend ray``): the same trainer on a Ray cluster (or a local Ray instance).

- A **parameter-server actor** (``ParameterServer``), pinned to the driver's node, holds the global parameters, the
  optimizer state, the episode board, the control state and the running statistics, in shared memory on its node.
  It is the shared-memory backend's coordinator and channels, in the actor's process: Ray runs one method of an
  actor at a time, so the gradients that come by actor calls are applied one at a time, in arrival order; those of
  the workers on its node land in between, Hogwild-style, as worker processes' do under the default backend (and a
  checkpoint's snapshot is taken as that backend takes it: the step counters read once, the model while they run).
- **Worker actors** (``RayWorker``), spread over the nodes, run the same ``a3c.run.worker.Worker`` loop as worker
  processes do. A worker on the server's node (``--ray-same-node shared-memory``, the default) reaches the global
  state in place: the server keeps it in named shared memory, and the worker maps it and runs the shared-memory
  backend's own channel (Hogwild updates, no call to the server per update); Ray only places, watches and restarts
  it. A worker on another node (or every worker, with ``--ray-same-node ray``) uses ``RayChannel``, which turns
  the loop's calls into few actor calls. Per iteration: one
  round trip (``push``: the gradient goes, the lag, the new weights and the control state come back, so the next
  ``pull`` is local; pipelined: the reply is taken one push later, the round trip overlapping the next rollout),
  which also carries what the loop published since the last push (steps, episodes, stats:
  applied first, so a worker's steps, episodes and stats arrive in the order the loop made them; a publish waits at
  most PUBLISH_HOLD_S for a push before it is sent on its own, Ray running one caller's calls in order). With
  ``--push-every N`` the gradients of N rollouts are summed and pushed once (N times fewer round trips, N rollouts
  on the same weights).
- The **driver** (``RayCoordinator``) reads everything new in one call per dashboard tick (``tick``: episodes, stats,
  global step) and answers the trainer, dashboard and supervisor from that copy. ``RayLauncher`` starts a worker
  actor per rank; a dead actor (process killed, node lost) shows as an exit by SIGKILL, and the supervisor restarts
  the rank in a new actor (same rank, next incarnation: fresh seeds), which Ray places on a live node.

Checkpoints hold exactly what the shared-memory backend's hold, so a run started on one backend resumes on the other.

The files, by role: ``server.py`` (the parameter-server actor, and ``RemoteMoments``), ``channel.py`` (a worker's side:
``RayChannel`` and the ``RayWorker`` actor), ``launcher.py`` (the driver's side: ``RayCoordinator`` and
``RayLauncher``), ``backend.py`` (``RayBackend``: connect, start the server, close), ``common.py`` (the driver's
timeouts, read by the launcher and the backend) and ``shm_reaper.py`` (the safety net for the server's shared
memory, standard library only). This package's ``__init__`` imports nothing, so that the reaper is importable, and
runnable by its path, without Ray.
"""
