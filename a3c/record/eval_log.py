"""eval.csv: one row per evaluation during training (``CSV_COLUMNS``: the global step of the weights evaluated, the
result's ``RESULT_FIELDS``, the run's wall time), appended by the main process (``EvalLog``) and read back
(``read_eval_log``), on resume trimmed to the evaluations the checkpoint covers."""

from __future__ import annotations

import csv
from pathlib import Path

from a3c.record.files import atomic_write
from a3c.record.run_dir import CsvLog

RESULT_FIELDS = ("mean_return", "std_return", "mean_length", "min_return", "max_return", "episodes", "eval_s")
CSV_COLUMNS = ("global_step", *RESULT_FIELDS, "wall_time")


class EvalLog(CsvLog):
    """eval.csv: one row per evaluation (CSV_COLUMNS)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, CSV_COLUMNS)

    def append(self, row: dict[str, float]) -> None:
        self.write_rows(
            [[int(row[c]) if c in ("global_step", "episodes") else repr(float(row[c])) for c in CSV_COLUMNS]]
        )


def read_eval_log(path: Path, max_step: int | None = None) -> list[dict[str, float]]:
    """The rows of eval.csv; with ``max_step``, only those at or below it, and the file rewritten to hold just them
    (a resume: rows from after the checkpoint are evaluated again, like the TensorBoard events purged from there)."""
    if not path.is_file():
        return []
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    kept = []
    for row in rows:
        try:
            values = {c: float(row[c]) for c in CSV_COLUMNS}
        except (KeyError, TypeError, ValueError):
            continue  # a row cut by a crash
        if max_step is None or values["global_step"] <= max_step:
            kept.append(values)
    if max_step is not None:
        lines = [[int(v[c]) if c in ("global_step", "episodes") else repr(v[c]) for c in CSV_COLUMNS] for v in kept]
        atomic_write(path, lambda f: csv.writer(f).writerows([CSV_COLUMNS, *lines]))
    return kept
