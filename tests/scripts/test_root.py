"""Scripts run as files (scripts/_root.py): ``python scripts/NAME.py`` works as ``python -m scripts.NAME`` does, from
any directory, because every entry script puts the repository's root on sys.path first when it runs as a file."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BOOTSTRAP = "if not __package__:  # run as a file (python scripts/NAME.py): the repository's root on sys.path\n"
BOOTSTRAP += "    import _root  # noqa: F401\n"


def test_a_script_run_as_a_file_finds_the_scripts_package(tmp_path):
    for script in ("bench_tutorial.py", "bench.py"):
        done = subprocess.run(
            [sys.executable, str(ROOT / "scripts" / script), "--help"], cwd=tmp_path, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("usage: "), done.stdout


def test_every_entry_script_carries_the_bootstrap():
    entries = [
        p for p in (ROOT / "scripts").glob("*.py") if re.search(r"(?m)^if __name__ == .__main__.:", p.read_text())
    ]
    assert len(entries) > 15
    for path in entries:
        assert BOOTSTRAP in path.read_text(), path.name
