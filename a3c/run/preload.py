"""What every worker process needs loaded, loaded once before the workers are forked, so that its memory is shared
copy-on-write instead of paid again in every worker. The forkserver imports this module (its preload list); under
the ``fork`` start method the trainer imports it before forking.

``a3c.run.worker`` pulls in torch, gymnasium and the project's envs; ``a3c.run.evaluator`` the evaluator process's
loop; ``a3c.run.backends.shared_memory`` what a child unpickles its channel with. Whatever a child imports after the
fork it imports alone, from source (the server runs with -B: no bytecode written) and into private memory: before
this list was complete each of 16 workers spent 0.2 s of CPU importing before its first line ran. The fork server's
preload list (a3c.run.resolve.preload_modules) adds the main module of ``python -m a3c.train``, which
multiprocessing runs again in every child as ``__mp_main__`` (that re-run then finds its imports loaded), and the
env's own module. Nothing beyond what a child needs: every module here is on the critical path of start-up (the
workers are forked only once the server has imported it). The first ``backward()`` used to import
torch.fx.experimental.symbolic_shapes (sympy, mpmath: about 500 modules, 40+ MB, half a second), so it was preloaded
here too; the update now hands autograd a scalar root (a3c.learn.update.protocol.backward_from), which never imports it
(tests/run/test_preload.py checks that no worker update does).

The other half of the memory story is in ``a3c.run.worker.worker_main``: ``gc.freeze()`` first thing in the child.
"""

import warnings

# Every child the server forks runs the main module again as __mp_main__ (runpy.run_module), and runpy warns
# ("'a3c.train' found in sys.modules after import of package 'a3c' ...") because the preload imported it already: the
# point of preloading it, not a fault. The filter is set here, in the server, before that import, and every child
# inherits it; without it each run printed the warning once (from the first child) to the user's terminal.
warnings.filterwarnings("ignore", message=r"'a3c\.[\w.]+' found in sys\.modules after import", category=RuntimeWarning)

import a3c.run.backends.shared_memory  # noqa: F401, E402 (after the filter, above)
import a3c.run.evaluator  # noqa: F401, E402
import a3c.run.worker  # noqa: F401, E402
