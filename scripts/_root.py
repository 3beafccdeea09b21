"""The repository's root on ``sys.path`` for a script run as a file.

``python -m scripts.NAME`` (from the root) imports ``scripts.*`` and ``a3c`` from the working directory; ``python
scripts/NAME.py`` puts only the script's own folder first on ``sys.path``, where ``import scripts...`` fails ("No
module named 'scripts'"). Each entry script imports this module first when it runs as a file (``__package__`` is
empty then, and this file lies beside it), which puts the root in front, so both forms work from any directory:

    if not __package__:  # run as a file (python scripts/NAME.py): the repository's root on sys.path
        import _root  # noqa: F401
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[1])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
