"""``python -m a3c.tune``: see a3c/tune/cli.py."""

import sys

from a3c.spec.errors import run_cli
from a3c.tune.cli import main

if __name__ == "__main__":
    sys.exit(run_cli(main, prog="a3c.tune"))
