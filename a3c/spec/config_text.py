"""What a new run says about its settings: the start line (which table of the presets file applied and why, what it
set, the flags given that beat it), the warnings of a run much shorter than its preset's budget and of a threshold its
episodes are too short for, and --show-config's
listing (every setting as a flag a user could type back, with where its value came from)."""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

from a3c.spec.config import Config
from a3c.spec.flags import NONE, OBJECTIVES, PPO_ONLY_SETTINGS, VTRACE_SETTINGS
from a3c.spec.preset_choice import CPU, DEFAULT, FLAG, PRESET, Choice, env_table_base
from a3c.spec.presets import FAMILIES, PRESETS_FILE, flag_name, preset_table, table_base, table_objective
from a3c.spec.wording import count

SHORT_RUN_RATIO = 0.5  # a --total-steps below this fraction of the preset's moves its linear lr schedule's end
SHIPPED = "a3c/spec/presets.toml"  # the shipped file, as the start line names it


def choice_of(config: Config, sources: dict[str, str]) -> Choice | None:
    """The table a new run took, and why, read back from its config (a3c.spec.preset_choice.choose_table made it): a
    family table (the plain defaults) taken by --preset reads as --preset none. None for a run without a table (a
    resumed run of an a3c before the family tables)."""
    if config.preset is None:
        return None
    tables = preset_table(config.preset_file)
    if config.preset not in tables or table_objective(config.preset, tables) != config.algo:
        return None  # a resumed run's table renamed or rewritten since (the run keeps its own config)
    base = table_base(config.preset)
    if config.preset_file is not None or base not in FAMILIES:
        return Choice(config.preset, tables)
    typed = sources.get("preset") == FLAG
    passed_over = None if typed else env_table_base(config.env, tables)
    return Choice(config.preset, tables, family=base, passed_over=passed_over, asked_none=typed)


def preset_line(config: Config, sources: dict[str, str], choice: Choice | None = None) -> str | None:
    """The line a new run prints about its table: which one and why (the plain defaults of the objective for the
    env's action-space family where the env has no table of the run's objective), what it set, and the flags given
    that beat it (flags win). ``choice``: the run's (a3c.spec.preset_choice.resolve_new_run), else read back from
    ``config`` (``choice_of``). None for a run without a table."""
    choice = choice or choice_of(config, sources)
    if choice is None:
        return None
    settings = choice.settings
    where = config.preset_file or SHIPPED
    # (not --algo: the line names the objective, and the table was chosen for it where --algo was given)
    applied = [as_flag(name, value) for name, value in settings.items() if sources.get(name) == PRESET]
    beaten = [as_flag(name, getattr(config, name)) for name in settings if sources.get(name) == FLAG]
    applied, beaten = ([text for text in texts if not text.startswith("--algo ")] for texts in (applied, beaten))
    if choice.family is None:
        line = (
            f"a3c: preset {choice.name} ({where}), objective {config.algo}, sets {' '.join(applied) or 'nothing here'}"
        )
    else:
        if choice.passed_over is not None:
            objectives = sorted(
                {
                    table_objective(name, choice.tables)
                    for name in choice.tables
                    if table_base(name) == choice.passed_over
                }
            )
            head = (
                f"a3c: preset {choice.passed_over} is for objective {' and '.join(objectives)}: not applied; the plain "
                f"defaults for objective {config.algo}, {choice.family} actions"
            )
        else:
            asked = "--preset none" if choice.asked_none else "no preset"
            head = f"a3c: {asked}: the plain defaults for a {choice.family} action space, objective {config.algo}"
        table = f"table {choice.name} of {SHIPPED}"
        line = f"{head} ({table}), sets {' '.join(applied)}" if applied else f"{head} ({table}: the flags' defaults)"
    if sources.get("bf16") == CPU:
        line += "; not its --bf16: this CPU has no bfloat16 instructions (float32 is faster here)"
    if beaten:
        return line + f"; the flags given win: {' '.join(beaten)}"
    if choice.family is not None:
        return line
    return line + " (a flag given wins over it; --preset none: the plain defaults)"


def short_run_warning(config: Config, sources: dict[str, str]) -> str | None:
    """A warning when the run's --total-steps (given) is much shorter than the budget the preset was measured at
    while the preset's linear lr schedule stays: the lr then decays to 0 at the new end, far faster than tuned."""
    if config.preset is None or config.lr_schedule != "linear" or sources.get("lr_schedule") != PRESET:
        return None
    planned = preset_table(config.preset_file)[config.preset].get("total_steps")
    if sources.get("total_steps") != FLAG or not isinstance(planned, int):
        return None
    if config.total_steps >= SHORT_RUN_RATIO * planned:
        return None
    return (
        f"a3c: warning: --total-steps {config.total_steps:,} is {planned / config.total_steps:.3g}x shorter than the "
        f"{planned:,} steps preset {config.preset} was measured at, and its --lr-schedule linear takes the lr to 0 at "
        f"--total-steps: the run learns at a fraction of the tuned lr; give --lr-schedule constant, or more steps"
    )


def out_of_reach_warning(
    config: Config, threshold: float | None, limit: int | None, spec_limit: int | None
) -> str | None:
    """A warning when --stop-when-solved stops at the env's own reward threshold (``threshold``: no --stop-at), which
    its spec sets for episodes of up to ``spec_limit`` steps, while the run's envs end theirs sooner (``limit``:
    --env-kwargs max_episode_steps): the mean of the shorter episodes compares with it otherwise. CartPole-v1's 475
    needs 475 steps an episode, and with 200 the run never stops; MountainCar-v0's -110 (a cost a step), with 100,
    is met by any policy at once."""
    if not config.stop_when_solved or config.stop_at is not None or threshold is None:
        return None
    if limit is None or spec_limit is None or limit >= spec_limit:
        return None
    return (
        f"a3c: warning: --stop-when-solved stops at {config.env}'s reward threshold {threshold:g}, which its spec sets "
        f"for episodes of up to {spec_limit:,} steps; episodes of at most {limit:,} (--env-kwargs max_episode_steps) "
        "may never reach it, or reach it at once: give --stop-at RETURN for these episodes"
    )


def no_evaluation_note(config: Config, sources: dict[str, str], step: int = 0) -> str | None:
    """A note when the run was asked to evaluate (--eval-every given, or set by the preset) but its next evaluation
    step (the first multiple of --eval-every past ``step``, the step a resumed run goes on from) lies past
    --total-steps: the Trainer then starts no evaluator, and this session leaves no evaluation. And when --eval-every
    was given with --eval-episodes 0 (no evaluation at all; a preset's --eval-every with --eval-episodes 0 is the way
    to turn evaluation off, and gets no note)."""
    if sources.get("eval_every") == FLAG and config.eval_every > 0 and config.eval_episodes == 0:
        return (
            f"a3c: note: --eval-every {config.eval_every:,} with --eval-episodes 0: the run evaluates nothing (no "
            "eval.csv, no checkpoints/best.pt); give --eval-episodes N to evaluate"
        )
    if not config.evaluates or sources.get("eval_every") not in (FLAG, PRESET):
        return None
    following = (step // config.eval_every + 1) * config.eval_every
    if following <= config.total_steps:
        return None
    whose = " (the preset's)" if sources.get("eval_every") == PRESET else ""
    if step == 0:
        return (
            f"a3c: note: --eval-every {config.eval_every:,}{whose} is past --total-steps {config.total_steps:,}: the "
            "run evaluates nothing (no eval.csv, no checkpoints/best.pt); give a smaller --eval-every"
        )
    return (
        f"a3c: note: with --eval-every {config.eval_every:,}{whose} the next evaluation would be at step "
        f"{following:,}, past --total-steps {config.total_steps:,}: this session evaluates nothing; give a smaller "
        "--eval-every, or a larger --total-steps"
    )


def lag_limit_note(config: Config) -> str | None:
    """A note when --max-policy-lag can drop nothing: it counts the other workers' optimizer steps since a rollout
    acted, and a run of one worker has none, nor has the serial backend, whose workers each roll out and update in
    one turn. A note, not a refusal: --workers auto may choose 1 after the check, and a resumed run takes its
    checkpoint's limit without being asked. ``config.workers``: resolved (a number)."""
    if config.algo != "ppo" or config.max_policy_lag == 0:
        return None
    if config.workers == 1:
        why = "this run has 1 worker"
    elif config.backend == "serial":
        why = "under --backend serial each worker rolls out and updates in one turn"
    else:
        return None
    return (
        f"a3c: note: --max-policy-lag {config.max_policy_lag} counts the other workers' optimizer steps since a "
        f"rollout acted, and {why}: it drops nothing"
    )


def recurrent_minibatch_note(config: Config) -> str | None:
    """A note when PPO with --lstm trains minibatches of another size than --minibatch-size: the state at step t
    depends on the steps before it, so a minibatch is whole envs' rollouts. a3c.learn.objectives.ppo groups a worker's
    K envs into max(1, K // per) minibatches of about ``per`` = max(1, --minibatch-size // --n-steps) envs each, the
    remainder spread over them (its ``split``): Pendulum-v1's preset, 1 env x 1,024 steps and minibatches of 64, trains
    one minibatch of 1,024 an epoch."""
    steps, envs, size = config.n_steps, config.envs_per_worker, config.minibatch_size
    if config.algo != "ppo" or config.lstm == 0:
        return None
    per = max(1, size // steps)
    groups = max(1, envs // per)
    small, large = envs // groups, -(-envs // groups)
    if small * steps == size == large * steps:
        return None
    taken = f"{small} env" + ("" if small == 1 else "s") if small == large else f"{small}-{large} envs"
    samples = f"{small * steps:,}" if small == large else f"{small * steps:,}-{large * steps:,}"
    return (
        f"a3c: note: with --lstm a PPO minibatch is whole envs' rollouts (--n-steps {steps} samples each): "
        f"--minibatch-size {size} with {count(envs, 'env')} a worker takes {taken} a minibatch ({samples} samples), "
        f"{groups} minibatch{'' if groups == 1 else 'es'} an epoch; give --n-steps times a divisor of "
        "--envs-per-worker"
    )


def overshoot_note(config: Config) -> str | None:
    """A note when one round of rollouts (each worker's --envs-per-worker x --n-steps, every worker) holds more steps
    than --total-steps: each worker ends the rollout and update it is in, so the run takes that many at least.
    ``config.workers``: resolved (a number)."""
    if not isinstance(config.workers, int):
        return None
    one_round = config.workers * config.envs_per_worker * config.n_steps
    if one_round <= config.total_steps:
        return None
    return (
        f"a3c: note: one round of rollouts is at least {one_round:,} steps ({count(config.workers, 'worker')} x "
        f"{count(config.envs_per_worker, 'env')} x {count(config.n_steps, 'step')}), more than --total-steps "
        f"{config.total_steps:,}: "
        "the run takes that many; give fewer --n-steps, --envs-per-worker or --workers for a shorter one"
    )


def as_flag(name: str, value: Any) -> str:
    """A setting as the flag that gives it: --gsde / --no-gsde for a switch, --name none for an optional number
    unset, else --name value."""
    if isinstance(value, bool):
        return flag_name(name) if value else "--no-" + flag_name(name)[2:]
    if value is None and _optional_number(name):
        return f"{flag_name(name)} none"
    return f"{flag_name(name)} {_show(value)}"


def format_config(config: Config, sources: dict[str, str]) -> str:
    """The resolved settings as flags a user could type, one per line, each with where its value came from (one
    word: default, preset, flag, checkpoint, or cpu where a preset's --bf16 is off on this CPU); settings the run
    does not use (PPO's under --algo a3c, V-trace's under --targets gae) and unset ones are commented out, so that
    the lines typed back give the same settings."""
    lines = [f"# python -m a3c.train: resolved config for --env {config.env}"]
    choice = choice_of(config, sources)
    where = config.preset_file or PRESETS_FILE
    if choice is None:
        lines.append("# resumed run: its checkpoint's config, with the flags given on top")
    elif choice.family is None:
        lines.append(f"# preset {choice.name} from {where}")
    else:
        line = preset_line(config, sources, choice) or ""
        lines.append(f"# {line.removeprefix('a3c: ').split(' (table ')[0]}: table {choice.name} from {where}")
    if config.resume is not None and choice is not None:
        lines.append("# resumed run: its checkpoint's config, with the flags given on top")
    if sources.get("bf16") == CPU:
        lines.append(
            f"# --no-bf16: preset {config.preset} sets --bf16; off here: this CPU has no bfloat16 instructions "
            "(float32 is faster here)"
        )
    lines.append(f"# objective: {OBJECTIVES[config.algo]} (--algo {config.algo}, {sources.get('algo', DEFAULT)})")
    unused = set(PPO_ONLY_SETTINGS if config.algo != "ppo" else ()) | set(
        VTRACE_SETTINGS if config.targets != "vtrace" else ()
    )
    rows = []
    for f in dataclasses.fields(Config):
        if f.metadata.get("internal"):
            continue
        source = sources.get(f.name, DEFAULT)
        flag, value = _typed(f.name, getattr(config, f.name), source)
        if f.name in unused and not flag.startswith("#"):
            flag, source = (
                f"# {flag}",
                f"{source}; not used: "
                + ("--algo ppo only" if f.name in PPO_ONLY_SETTINGS else "--targets vtrace only"),
            )
        rows.append((flag, value, source))
    width = max(len(r[0]) for r in rows), max(len(r[1]) for r in rows)
    lines += [f"{a:<{width[0]}}  {b:<{width[1]}}  {c}" for a, b, c in rows]
    return "\n".join(lines)


def _typed(name: str, value: Any, source: str = DEFAULT) -> tuple[str, str]:
    """A setting as a line of the command line that gives it (flag, value): a switch as --name / --no-name alone, an
    optional number unset by a flag or a table as --name none (a table of the objective would set it again), any other
    setting without a value (unset) commented out, so that the lines together are flags a user could type."""
    if isinstance(value, bool):
        return as_flag(name, value), ""
    if value is None and source != DEFAULT and _optional_number(name):
        return flag_name(name), NONE
    if value is None or value == {}:
        return f"# {flag_name(name)}", "(not set)"
    return flag_name(name), _show(value)


def _optional_number(name: str) -> bool:
    """Whether Config field ``name`` is an ``int | None`` or ``float | None`` (its flag takes ``none``)."""
    hint = typing.get_type_hints(Config)[name]
    args = set(typing.get_args(hint))
    return type(None) in args and bool(args & {int, float})


def _show(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return " ".join(str(v) for v in value)
    if isinstance(value, dict):
        return " ".join(f"{k}={v}" for k, v in value.items()) or "-"
    return str(value)
