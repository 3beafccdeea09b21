"""A run directory's model card: README.md, what the trained agent is, how it was trained, how well it does and how to
use it, written at the end of every run (a3c.run.trainer) and rewritten by ``python -m a3c.evaluate`` with its result.

Plain markdown with the YAML front matter that Hugging Face's model pages read (the fields rl-zoo3 and huggingface_sb3
write: ``library_name``, ``tags``, and a ``model-index`` whose one result is the evaluation's ``mean_reward`` on the
env, as "mean +/- std"), so that the directory can be uploaded as a model repository as it is. A run that has not been
evaluated (no --eval-every evaluation yet, no a3c.evaluate) has no model-index: the card says how to evaluate it.

Everything comes from the run directory (config.json, summary.json, eval.csv's last row) or from the caller (the
summary just written, a3c.evaluate's result), so the card can be written again at any time.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
from pathlib import Path
from typing import IO, Any

from a3c.record.eval_log import read_eval_log
from a3c.record.files import atomic_write
from a3c.record.run_dir import writing
from a3c.spec.config import Config
from a3c.spec.errors import UserError
from a3c.spec.presets import NOT_PRESETTABLE, OBJECTIVES, PRESETS_FILE, flag_name, preset_table

CARD = "README.md"
# where a run ran, not how it learned: never listed among the settings that differ
UNLISTED = NOT_PRESETTABLE | {"start_method", "workers_auto", "input_scale", "input_shift", "wandb_id"}


def write_model_card(
    run_dir: str | Path, summary: dict[str, Any] | None = None, evaluation: dict[str, Any] | None = None
) -> Path:
    """Write RUN_DIR/README.md (atomically; an OSError becomes RunDirWriteError("README.md")). ``summary``: the run's
    summary.json (read from the directory if None); ``evaluation``: python -m a3c.evaluate's result (default: the last
    evaluation during training, eval.csv's last row, if any)."""
    path = Path(run_dir)
    text = model_card(path, summary, evaluation)
    card = path / CARD

    def write(f: IO[str]) -> None:
        f.write(text)

    with writing(CARD):
        atomic_write(card, write)
    return card


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def model_card(run_dir: Path, summary: dict[str, Any] | None = None, evaluation: dict[str, Any] | None = None) -> str:
    """The card's text (see the module docstring)."""
    data = _read_json(run_dir / "config.json")
    if data is None:
        raise UserError(f"{run_dir} has no readable config.json; a model card describes an a3c run directory")
    config = Config.from_dict(data)
    if summary is None:
        summary = _read_json(run_dir / "summary.json") or {}
    result = evaluation if evaluation is not None else _last_evaluation(run_dir, config)
    front = _front_matter(config, result)
    return front + _body(run_dir, config, data, summary, result)


def _last_evaluation(run_dir: Path, config: Config) -> dict[str, Any] | None:
    """eval.csv's last row as an evaluation result (the run's own evaluation episodes: its seed, the policy's most
    likely actions or, --eval-stochastic, its samples)."""
    rows = read_eval_log(run_dir / "eval.csv")
    if not rows:
        return None
    row = rows[-1]
    return {
        "mean_return": row["mean_return"],
        "std_return": row["std_return"],
        "episodes": int(row["episodes"]),
        "global_step": int(row["global_step"]),
        "deterministic": not config.eval_stochastic,
        "during_training": True,
    }


def _q(text: str) -> str:
    """A YAML scalar: a JSON string is a valid YAML double-quoted one (env ids hold '/' and ':')."""
    return json.dumps(text)


def _front_matter(config: Config, result: dict[str, Any] | None) -> str:
    lines = ["---", "library_name: a3c", "tags:"]
    tags = [config.env, "reinforcement-learning", "deep-reinforcement-learning", config.algo, "actor-critic"]
    lines += [f"- {_q(tag)}" for tag in dict.fromkeys(tags)]
    if result is not None:
        value = f"{result['mean_return']:.2f} +/- {result['std_return']:.2f}"
        lines += [
            "model-index:",
            f"- name: {_q(config.algo.upper())}",
            "  results:",
            "  - task:",
            "      type: reinforcement-learning",
            "      name: reinforcement-learning",
            "    dataset:",
            f"      name: {_q(config.env)}",
            f"      type: {_q(config.env)}",
            "    metrics:",
            "    - type: mean_reward",
            f"      value: {_q(value)}",
            "      name: mean_reward",
            "      verified: false",
        ]
    return "\n".join([*lines, "---", ""]) + "\n"


def _number(value: Any, digits: int = 2) -> str:
    return "-" if value is None else f"{float(value):,.{digits}f}"


def _seconds(value: Any) -> str:
    if value is None:
        return "-"
    s = float(value)
    return f"{s:,.1f} s" if s < 120 else (f"{s / 60:,.1f} min" if s < 7200 else f"{s / 3600:,.2f} h")


def _evaluation_line(config: Config, result: dict[str, Any] | None) -> str:
    if result is None:
        return "not evaluated yet: `python -m a3c.evaluate` on this directory scores it and rewrites this card"
    policy = "deterministic" if result.get("deterministic", True) else "stochastic"
    step = result.get("global_step")
    where = f"weights of step {step:,}" if isinstance(step, int) else "its weights"
    if result.get("during_training"):
        how = f"the last evaluation during training ({where}, {policy}, seed {config.seed})"
    else:
        checkpoint = Path(str(result.get("checkpoint", "checkpoints/latest.pt")))
        how = f"python -m a3c.evaluate of {checkpoint.parent.name}/{checkpoint.name} ({where}, {policy}, seed " + (
            f"{result.get('seed', config.seed)})"
        )
    return (
        f"**{result['mean_return']:.2f} ± {result['std_return']:.2f}** over {int(result['episodes'])} episodes: {how}"
    )


def _body(
    run_dir: Path, config: Config, data: dict[str, Any], summary: dict[str, Any], result: dict[str, Any] | None
) -> str:
    env_kwargs = " ".join(f"{k}={v!r}" for k, v in config.env_kwargs.items())
    env = f"`{config.env}`" + (f" ({env_kwargs})" if env_kwargs else "")
    workers = summary.get("workers", config.workers)
    steps = summary.get("total_steps")
    train_s, speed = summary.get("training_time_s"), summary.get("steps_per_s")
    training = f"{_seconds(summary.get('wall_time_s'))}"
    if train_s is not None:
        training += f" (training {_seconds(train_s)}, {_number(speed, 0)} steps/s)"
    final = summary.get("mean_return_100")
    final_line = (
        "-"
        if final is None
        else f"{_number(final)}: mean return of the last 100 episodes ({summary.get('episodes', 0):,} episodes)"
    )
    budget = f"{config.total_steps:,} steps (--total-steps)"
    if isinstance(steps, int):
        budget += f"; {steps:,} run"
    if summary.get("stop_reason") not in (None, "total_steps"):
        budget += f" (stopped: {summary['stop_reason']})"  # solved, stop_at, pruned, interrupted, ...
    rows = [
        ("Environment", env),
        ("Objective", f"{config.algo}: {OBJECTIVES.get(config.algo, config.algo)}"),
        ("Budget", budget),
        ("Workers", f"{workers} × {config.envs_per_worker} envs"),
        ("Wall time", training),
        ("Final training return", final_line),
        ("Evaluation", _evaluation_line(config, result)),
        ("Seed", str(config.seed)),
    ]
    title = f"# {config.algo.upper()} agent for {config.env}\n\n"
    intro = f"A policy trained by a3c (asynchronous actor-critic on PyTorch, `--algo {config.algo}`) on {env}.\n\n"
    table = "| | |\n|---|---|\n" + "".join(f"| {name} | {value} |\n" for name, value in rows)
    return title + intro + table + "\n" + _settings(config, data) + "\n" + _usage(run_dir, config)


def _baseline(config: Config) -> tuple[dict[str, Any], str]:
    """What the run's settings are compared with: the plain defaults under the run's preset, and its words."""
    defaults = {f.name: getattr(Config(), f.name) for f in dataclasses.fields(Config)}
    defaults["start_method"] = Config().resolved_start_method()
    if config.preset is None:
        return defaults, "the plain defaults (no preset)"
    try:
        preset = preset_table(config.preset_file)[config.preset]
    except (UserError, KeyError):
        return defaults, f"the plain defaults (preset {config.preset}'s file is not readable here)"
    where = config.preset_file or PRESETS_FILE.name
    return {**defaults, **preset}, f"preset {config.preset} ({where}) over the defaults"


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, (list, tuple)):
        return " ".join(str(v) for v in value)
    if isinstance(value, dict):
        return " ".join(f"{k}={v}" for k, v in value.items()) or "-"
    return "-" if value is None else str(value)


def _same(a: Any, b: Any) -> bool:
    norm = [tuple(v) if isinstance(v, (list, tuple)) else v for v in (a, b)]
    return bool(norm[0] == norm[1])


def _settings(config: Config, data: dict[str, Any]) -> str:
    """The settings that differ from the preset (or the plain defaults), as a table of flags."""
    baseline, words = _baseline(config)
    values = {f.name: getattr(config, f.name) for f in dataclasses.fields(Config)}
    if isinstance(data.get("workers_auto"), dict):
        values["workers"] = "auto"  # config.json holds the count --workers auto chose
    rows = [
        (flag_name(name), _shown(values[name]), _shown(baseline[name]))
        for name in values
        if name not in UNLISTED and not _same(values[name], baseline[name])
    ]
    head = f"## Settings that differ from {words}\n\n"
    if not rows:
        return head + "None: the run trained with them as they are.\n"
    table = "| Setting | This run | Otherwise |\n|---|---|---|\n"
    return head + table + "".join(f"| `{a}` | {b} | {c} |\n" for a, b, c in rows)


def _usage(run_dir: Path, config: Config) -> str:
    run, shell = _q(str(run_dir)), shlex.quote(str(run_dir))
    kwargs = ", ".join(f"{k!r}: {v!r}" for k, v in config.env_kwargs.items())
    # a --bf16 agent's CNN runs in bfloat16 under torch.autocast, which an ONNX graph does not hold (a3c.export)
    export = "--format torchscript  # (its bfloat16 CNN: no ONNX)" if config.bf16 else "--format onnx  # or torchscript"
    return f"""## Use it

```python
import a3c
from a3c.spec.environment import make_env

agent = a3c.load({run})  # checkpoints/latest.pt (best=True: checkpoints/best.pt)
env = make_env({_q(config.env)}, {{{kwargs}}}, training=False)  # the env with the run's preprocessing
obs, _ = env.reset(seed=0)
action = agent.act(obs)  # the most likely action (deterministic=False samples)
```

Stable-Baselines3's tools take it as they take an SB3 model (`agent.predict` speaks SB3's protocol):

```python
from stable_baselines3.common.evaluation import evaluate_policy

mean, std = evaluate_policy(agent, env, n_eval_episodes=10)
```

Score it again (this card is rewritten with the result), or export the policy as a file that runs without a3c:

```bash
python -m a3c.evaluate {shell}
python -m a3c.export {shell} {export}
```
"""
