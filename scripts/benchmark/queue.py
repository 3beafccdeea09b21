"""The queue file (benchmarks/queue.toml): named arms and blocks of runs, worked through over as many sittings as it
takes (``python -m scripts.bench run --queue FILE`` runs what is not yet stored, in the file's order).

    [defaults]
    workers = 2                  # --workers of every a3c arm that does not say otherwise

    [arms]                       # a3c arms: a3c.train's flags, or a table of them
    preset = ""                                                   # the env's preset
    quickstart = { flags = "--stop-when-solved", workers = "default" }   # no --workers: a3c's own default
    ppo = { flags = "--algo ppo", evaluate = 10 }                 # a3c.evaluate's 10 episodes after the run

    [[runs]]                     # a block: every env x arm x seed of it, at one budget
    name = "LunarLander-v3, the preset"
    envs = ["LunarLander-v3"]
    arms = ["preset", "sb3-ppo"]                                  # an arm above, or a peer (arms.PEERS)
    seeds = "501-510"                                             # a list, or "FIRST-LAST"
    budget = 1_000_000
    threshold = 200                                               # optional: else the env's reward_threshold
    only_seeds = { sb3-ppo = [501, 502, 503] }                    # optional: an arm on some of the seeds

Within a block the runs go seed by seed, each seed's envs and arms in turn, so that drifts in the machine's load hit
every arm alike.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from scripts.benchmark.arms import DEFAULT_WORKERS, PEERS, Arm, ArmError, peer
from scripts.benchmark.runner import Run

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


class QueueError(ValueError):
    """A queue file that cannot be read as one: the driver prints it in one line."""


MAX_SEEDS = 10_000  # seeds of one range: more is a typo (each seed is a run), and the list would fill the memory


def parse_seeds(value: Any, where: str) -> list[int]:
    """``[1, 2, 3]`` or ``"501-510"``."""
    if isinstance(value, str) and (m := re.fullmatch(r"\s*(\d+)\s*-\s*(\d+)\s*", value)):
        first, last = int(m[1]), int(m[2])
        if last - first >= MAX_SEEDS:
            raise QueueError(
                f"{where}: {value.strip()} is {last - first + 1:,} seeds (a run each); give at most {MAX_SEEDS:,}"
            )
        if last >= first:
            return list(range(first, last + 1))
    if isinstance(value, list) and value and all(isinstance(s, int) and not isinstance(s, bool) for s in value):
        return list(value)
    raise QueueError(f'{where}: seeds must be a list of integers or "FIRST-LAST" (got {value!r})')


def _workers(value: Any, where: str) -> int | str | None:
    if value == "default":
        return None  # no --workers flag: a3c.train's own default
    if value == "auto" or (isinstance(value, int) and not isinstance(value, bool) and value > 0):
        return value
    raise QueueError(f'{where}: workers must be a positive integer, "auto" or "default" (got {value!r})')


def _arm(name: str, value: Any, workers: int | str | None, where: str) -> Arm:
    import shlex

    if name in PEERS:
        raise QueueError(f"{where}: {name!r} is a peer's name; give the a3c arm another")
    if isinstance(value, str):
        value = {"flags": value}
    if not isinstance(value, dict) or not set(value) <= {"flags", "workers", "evaluate"}:
        raise QueueError(f"{where}: an arm is a string of flags or a table of flags, workers, evaluate (got {value!r})")
    if "workers" in value:
        workers = _workers(value["workers"], where)
    evaluate = value.get("evaluate", 0)
    if not isinstance(evaluate, int) or isinstance(evaluate, bool) or evaluate < 0:
        raise QueueError(f"{where}: evaluate is a number of episodes (got {evaluate!r})")
    flags = value.get("flags", "")
    try:
        words = shlex.split(flags) if isinstance(flags, str) else None
    except ValueError as err:  # an unclosed quote
        raise QueueError(f"{where}: flags {flags!r}: {err}; close the quote") from None
    if words is None:
        raise QueueError(f"{where}: flags are one string, as typed after python -m a3c.train (got {flags!r})")
    return Arm(name, tuple(words), workers=workers, evaluate=evaluate)


def _strings(value: Any, what: str, where: str) -> list[str]:
    """A block's list of names (``envs``, ``arms``): a string in its place would be iterated letter by letter."""
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise QueueError(f'{where}: {what} is a list of names, e.g. ["CartPole-v1"] (got {value!r})')
    return value


def load(path: Path) -> list[Run]:
    """The runs of the queue file at ``path``, in its order."""
    try:
        data = tomllib.loads(Path(path).read_text())
    except OSError as err:
        raise QueueError(f"--queue {path}: {err.strerror}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise QueueError(f"--queue {path}: not TOML ({err})") from None
    unknown = set(data) - {"defaults", "arms", "runs"}
    if unknown:
        raise QueueError(f"{path}: unknown tables {sorted(unknown)} (defaults, arms, runs)")
    for table, kind in (("defaults", dict), ("arms", dict), ("runs", list)):
        if not isinstance(data.get(table, kind()), kind):
            form = "[[runs]] blocks" if kind is list else f"a table [{table}]"
            raise QueueError(f"{path}: {table} is {form} (got {data[table]!r})")
    workers = _workers(data.get("defaults", {}).get("workers", DEFAULT_WORKERS), f"{path} [defaults]")
    arms = {name: _arm(name, value, workers, f"{path} [arms] {name}") for name, value in data.get("arms", {}).items()}
    runs: list[Run] = []
    for i, block in enumerate(data.get("runs", []), 1):
        if not isinstance(block, dict):
            raise QueueError(f"{path}: runs #{i} is not a [[runs]] block (got {block!r})")
        where = f"{path} [[runs]] #{i}" + (f" ({block['name']})" if "name" in block else "")
        allowed = {"name", "envs", "arms", "seeds", "budget", "threshold", "only_seeds"}
        if not set(block) <= allowed or not {"envs", "arms", "seeds", "budget"} <= set(block):
            raise QueueError(f"{where}: a block has envs, arms, seeds, budget (name, threshold, only_seeds optional)")
        envs = _strings(block["envs"], "envs", where)
        _strings(block["arms"], "arms", where)  # (a list first: a string's letters are no arms)
        try:
            block_arms = [arms[a] if a in arms else peer(a) for a in block["arms"]]
        except ArmError as err:
            raise QueueError(f"{where}: {err}; or name it in [arms]") from None
        budget, threshold = block["budget"], block.get("threshold")
        if not isinstance(budget, int) or isinstance(budget, bool) or budget < 1:
            raise QueueError(f"{where}: budget is a positive whole number of env steps (got {budget!r})")
        if threshold is not None and (not isinstance(threshold, (int, float)) or isinstance(threshold, bool)):
            raise QueueError(f"{where}: threshold is a number, the return counted as solved (got {threshold!r})")
        seeds = parse_seeds(block["seeds"], where)
        only_seeds = block.get("only_seeds", {})
        if not isinstance(only_seeds, dict):
            raise QueueError(f"{where}: only_seeds is a table of arm = seeds (got {only_seeds!r})")
        only = {a: parse_seeds(s, f"{where} only_seeds.{a}") for a, s in only_seeds.items()}
        if not set(only) <= set(block["arms"]):
            extra = sorted(set(only) - set(block["arms"]))
            raise QueueError(f"{where}: only_seeds names arms the block does not run: {extra}")
        threshold = None if threshold is None else float(threshold)
        for seed in seeds:
            for env in envs:
                for arm in block_arms:
                    if arm.name in only and seed not in only[arm.name]:
                        continue
                    runs.append(Run(env, arm, seed, budget, threshold, block.get("name", f"#{i}")))
    return runs
