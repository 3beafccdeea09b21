"""What a study leaves at the end of each session: the best trial's settings printed and written as a preset block
(best.toml, for ``python -m a3c.train --preset-file``; best.json beside it), and Optuna's figures as PNGs
(plots/history.png, plots/importance.png).

The preset block holds every setting of the best trial's run that a preset can set and that is not at its default
(the sampled ones, the env's own preset's, the flags the tune command line fixed, --total-steps included): it replaces
presets.toml for the run that applies it, so that run trains as the trial did. It is taken from the trial's record in
the database (its ``preset`` attribute), so the study's other machines' best trials have one too.
"""

from __future__ import annotations

import json
import math
import sys
import warnings
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import TrialState

from a3c.record.files import atomic_write
from a3c.spec.presets import flag_name, read_presets, toml_key
from a3c.tune.trial import REFUSED

BEST_TOML, BEST_JSON, PLOTS = "best.toml", "best.json", "plots"
FIGSIZE, DPI = (6.4, 3.6), 80  # small PNGs: about 20 KB each


def toml_value(value: Any) -> str:
    """A setting's value as TOML writes it (the types of Config's fields)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return (
            repr(value) if math.isfinite(value) else ("nan" if math.isnan(value) else ("inf" if value > 0 else "-inf"))
        )
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a TOML basic string
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{toml_key(str(k))} = {toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"no TOML for {value!r}")


def preset_block(name: str, settings: dict[str, Any], comments: list[str]) -> str:
    """A presets.toml table ``[name]`` of ``settings`` ({Config field: value}), keys spelled like the flags."""
    lines = [f"# {c}" for c in comments]
    lines.append(f"[{toml_key(name)}]")
    lines += [f"{flag_name(k)[2:]} = {toml_value(v)}" for k, v in settings.items()]
    return "\n".join(lines) + "\n"


def write_best(study: optuna.Study, study_dir: Path, env: str) -> Path | None:
    """best.toml and best.json of the study's best trial (None, and a line, when no trial has completed)."""
    try:
        best = study.best_trial
    except ValueError:
        print("a3c.tune: no trial has completed yet: no best settings to write", file=sys.stderr)
        return None
    settings = best.user_attrs.get("preset", {})
    path = study_dir / BEST_TOML
    comments = [
        f"python -m a3c.tune: the best trial of study {study.study_name!r}: trial {best.number}, eval mean return "
        f"{best.value:.2f} at step {best.user_attrs.get('eval_step', 0):,}",
        f"its run: {best.user_attrs.get('run_dir')}",
        f"train with it: python -m a3c.train --env {env} --preset-file {path}",
    ]
    text = preset_block(env, settings, comments)
    atomic_write(path, lambda f: f.write(text))
    read_presets(path)  # (what --preset-file will read: checked now)
    data = {
        "trial": best.number,
        "value": best.value,
        "params": best.params,
        "preset": settings,
        "run_dir": best.user_attrs.get("run_dir"),
    }
    atomic_write(study_dir / BEST_JSON, lambda f: f.write(json.dumps(data, indent=2) + "\n"))
    return path


def counts(study: optuna.Study) -> dict[str, int]:
    """{state name: number of trials}, e.g. {"COMPLETE": 7, "PRUNED": 3, "REFUSED": 2} (a refused trial, pruned
    before it ran: a3c/tune/trial.py's REFUSED, counted apart)."""
    out: dict[str, int] = {}
    for t in study.get_trials(deepcopy=False):
        name = "REFUSED" if t.state == TrialState.PRUNED and REFUSED in t.user_attrs else t.state.name
        out[name] = out.get(name, 0) + 1
    return out


def write_figures(study: optuna.Study, study_dir: Path) -> list[Path]:
    """plots/history.png and plots/importance.png (the second needs two completed trials, and a parameter that
    varies between them); returns those written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure
    from optuna.importance import PedAnovaImportanceEvaluator
    from optuna.visualization.matplotlib import plot_optimization_history, plot_param_importances

    plots = study_dir / PLOTS
    plots.mkdir(exist_ok=True)
    written = []
    complete = [t for t in study.get_trials(deepcopy=False) if t.state == TrialState.COMPLETE]
    figures = [("history.png", lambda: plot_optimization_history(study, target_name="eval mean return"))]
    if len(complete) >= 2:
        figures.append(
            (
                "importance.png",
                lambda: plot_param_importances(
                    study, evaluator=PedAnovaImportanceEvaluator(), target_name="eval mean return"
                ),
            )
        )
    for name, draw in figures:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # Optuna's ExperimentalWarning for its matplotlib figures
            try:
                ax = draw()
            except (ValueError, RuntimeError, ZeroDivisionError) as err:  # too few trials for the evaluator
                print(f"a3c.tune: plots/{name} not drawn ({err})", file=sys.stderr)
                continue
        fig = ax.figure
        assert isinstance(fig, Figure), "Optuna draws on a figure of its own"
        fig.set_size_inches(*FIGSIZE)
        fig.tight_layout()
        fig.savefig(plots / name, dpi=DPI)
        plt.close(fig)
        written.append(plots / name)
    return written
