"""a3c: a fast, correct, observable A3C trainer for gymnasium environments on PyTorch.

Entry points: ``python -m a3c.train`` (training), ``python -m a3c.plot`` (figures from a run directory).
"""

__version__ = "0.1.0"
