"""The machine a benchmark names (scripts/_common.py): one description, the store's rows taking its light part
(``host``) and the benchmarks' JSON files all of it, each with the keys (and their order) of the files in
docs/data."""

import json
from pathlib import Path

from scripts import _common
from scripts.benchmark import runner

ROOT = Path(__file__).resolve().parents[2]
ROW_KEYS = ["cores", "cpu", "python", "bf16_instructions", "loadavg_1m_at_start"]  # docs/data/*.jsonl's rows
JSON_KEYS = ["cores", "cpu", "python", "torch", "gymnasium", "numpy", "platform", "bf16_instructions"]
JSON_KEYS += ["loadavg_1m_at_start"]  # docs/data/ppo_*.json's, with bf16_instructions since it was added


def test_a_rows_machine_is_the_light_part_of_a_benchmarks():
    row, full = runner.host(), _common.machine()
    assert list(row) == ROW_KEYS and list(full) == JSON_KEYS
    steady = ROW_KEYS[:-1]  # (the load moves between the two calls)
    assert {k: full[k] for k in steady} == {k: row[k] for k in steady}


def test_the_stores_rows_hold_the_keys_a_run_writes_today():
    """docs/data's stores name a row's machine with the keys runner.host() writes (scripts/_common.py) (rows from before
    bf16_instructions hold fewer)."""
    stored = set()
    for store in ("results.jsonl", "tuning.jsonl"):
        for line in (ROOT / "docs" / "data" / store).read_text().splitlines():
            stored.add(tuple(json.loads(line)["machine"]))
    assert tuple(ROW_KEYS) in stored and all(set(keys) <= set(ROW_KEYS) for keys in stored)


def test_both_say_whether_the_cpu_has_bfloat16_instructions(monkeypatch):
    for has in (True, False):
        monkeypatch.setattr(_common, "native_bf16", lambda has=has: has)
        assert runner.host()["bf16_instructions"] is has and _common.machine()["bf16_instructions"] is has
