"""What every worker process needs loaded, loaded once before the workers are forked, so that its memory is shared
copy-on-write instead of paid again in every worker. The forkserver imports this module (its preload list); under
the ``fork`` start method the trainer imports it before forking.

- ``a3c.run.worker`` pulls in torch, gymnasium and the project's envs;
- ``torch.fx.experimental.symbolic_shapes``: ``torch.autograd.backward`` imports it, and with it sympy and mpmath
  (about 500 modules, 40+ MB), on its first call: every worker's first update would pay that privately.

The other half of the memory story is in ``a3c.run.worker.worker_main``: ``gc.freeze()`` first thing in the child.
"""

import torch.fx.experimental.symbolic_shapes  # noqa: F401

import a3c.run.worker  # noqa: F401
