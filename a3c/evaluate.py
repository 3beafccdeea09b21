"""`python -m a3c.evaluate RUN_DIR|CHECKPOINT`: score a trained policy on fresh episodes, optionally recording them.

Prints one line (the checkpoint, its step, the return's mean ± std, the mean length, the episodes) on stdout and
writes the result as JSON (every episode's return and length too), saying where on stderr. The run directory's model
card (README.md, a3c.record.model_card) is rewritten with the result, unless --env-kwargs played a variant of the env.
By default the episodes are the run's own evaluation episodes (the same env seeds, the same policy: its most likely
actions, or its samples where the run evaluated so (``--eval-stochastic``, the atari presets'), as many as
--eval-episodes): evaluating checkpoints/best.pt (``--best``) reproduces the evaluation that made it best. ``--seed``
picks other start states, ``--stochastic`` samples actions from the policy and ``--deterministic`` plays its most likely
ones, whatever the run evaluated, ``--env-kwargs`` plays in a variant of the run's env (its keyword arguments for
gymnasium.make over the run's: say an Atari policy trained without sticky actions played with ALE v5's
``repeat_action_probability=0.25``), ``--video DIR`` records every episode with gymnasium's RecordVideo (the ``video``
extra: moviepy): the same episodes, one at a time (each episode's sampled actions come from its own sampler, so they are
the draws of the run without --video; a batch of one may round the network's arithmetic differently from the batch in
the last bits, which a long continuous-control episode can grow). A MuJoCo env renders through the OpenGL that MUJOCO_GL
names; with no display and MUJOCO_GL unset, --video asks for EGL, which renders headless (software or GPU) where libEGL
is installed.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import re
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from a3c.spec.config import parse_env_kwargs, seed_check
from a3c.spec.errors import OneLineParser, UserError, install_extra, run_cli
from a3c.spec.setting_types import same_setting
from a3c.spec.wording import count

VIDEO_EXTRA = f"{install_extra('video')} (or: pip install moviepy)"


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="python -m a3c.evaluate", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "path",
        metavar="RUN_DIR|CHECKPOINT",
        help="a run directory (its latest.pt) or a .pt file. Its env is made to play the episodes, so a "
        "'module:Name-v0' env id imports that module and runs its code, as training did",
    )
    parser.add_argument(
        "--episodes", type=int, default=None, help="episodes to play (default: the run's --eval-episodes, or 10)"
    )
    policy = parser.add_mutually_exclusive_group()
    policy.add_argument(
        "--stochastic",
        action="store_const",
        const=True,
        dest="stochastic",
        help="sample actions from the policy (default: as the run evaluated, --eval-stochastic; else the most likely)",
    )
    policy.add_argument(
        "--deterministic",
        action="store_const",
        const=False,
        dest="stochastic",
        help="play the policy's most likely actions, also for a run that evaluated its samples",
    )
    parser.set_defaults(stochastic=None)  # (None: as the run evaluated)
    parser.add_argument(
        "--seed", type=int, default=None, help="seed of the episodes' start states (default: the run's --seed)"
    )
    parser.add_argument("--video", type=Path, default=None, metavar="DIR", help="record every episode as an mp4 in DIR")
    parser.add_argument("--best", action="store_true", help="evaluate the run's checkpoints/best.pt (best evaluation)")
    parser.add_argument(
        "--env-kwargs",
        nargs="+",
        action="extend",  # (given twice, both sets count)
        default=[],
        metavar="KEY=VALUE",
        help="keyword arguments for gymnasium.make over the run's own (a variant of its env, e.g. "
        "repeat_action_probability=0.25)",
    )
    parser.add_argument(
        "--json",
        type=Path,
        default=None,
        metavar="FILE",
        help="where to write the result (default: evaluate-<checkpoint>.json in the run directory; with --env-kwargs, "
        "another policy, seed or number of episodes than the run's own evaluation, named by them: "
        "evaluate-<checkpoint>--<key>=<value>,...--stochastic--seed=<n>--episodes=<n>.json)",
    )
    return parser


def default_json_path(
    checkpoint: Path, variant: dict[str, Any] | None = None, protocol: dict[str, Any] | None = None
) -> Path:
    """evaluate-<name>.json in the checkpoint's run directory (or beside a checkpoint kept elsewhere). An evaluation
    other than the run's own gets a file of its own, named by what differs, so that none is written over another:
    for a variant of the run's env (--env-kwargs over the run's: ``variant``) ``--<key>=<value>,...``, keys sorted;
    for another policy or seed than the run evaluated with (``protocol``: its ``policy`` and ``seed`` entries)
    ``--stochastic`` or ``--deterministic``, ``--seed=<n>``, and ``--episodes=<n>`` for another number of episodes.
    Any character but letters, digits and ``._=+,-`` is
    written ``_``."""
    folder = checkpoint.parent
    if folder.name == "checkpoints" and (folder.parent / "config.json").is_file():
        folder = folder.parent
    parts = [",".join(f"{key}={variant[key]}" for key in sorted(variant))] if variant else []
    protocol = protocol or {}
    if "policy" in protocol:
        parts.append(str(protocol["policy"]))
    if "seed" in protocol:
        parts.append(f"seed={protocol['seed']}")
    if "episodes" in protocol:
        parts.append(f"episodes={protocol['episodes']}")
    suffix = "".join("--" + re.sub(r"[^A-Za-z0-9._=+,-]", "_", part)[:120] for part in parts)
    return folder / f"evaluate-{checkpoint.stem}{suffix}.json"


def check_video_extra() -> None:
    if importlib.util.find_spec("moviepy") is None:
        raise UserError(f"--video needs moviepy, which is not installed; {VIDEO_EXTRA}")


def headless_rendering(environ: dict[str, str] | None = None) -> None:
    """Without a display: SDL's dummy video driver for pygame's renderers, and EGL for MuJoCo's, where nothing else
    can work: MuJoCo reads MUJOCO_GL once, when it is imported (the env is made after this), and its default, GLFW,
    needs a display. A user's own SDL_VIDEODRIVER or MUJOCO_GL, or a display, is left alone; so is every other
    platform than Linux (macOS and Windows render without a display server)."""
    env = os.environ if environ is None else environ
    if sys.platform != "linux" or env.get("DISPLAY") or env.get("WAYLAND_DISPLAY"):
        return
    # pygame (classic control, Box2D) renders frames off screen, but SDL probes for a display first, and its Wayland
    # probe prints "error: XDG_RUNTIME_DIR is invalid or not set" though nothing fails: SDL's dummy driver probes none
    env.setdefault("SDL_VIDEODRIVER", "dummy")
    if env.get("MUJOCO_GL"):
        return
    env["MUJOCO_GL"] = "egl"
    env.setdefault("PYOPENGL_PLATFORM", "egl")  # PyOpenGL, which MuJoCo's Python renderer calls, must agree


def _is_gl_failure(err: BaseException) -> bool:
    """MuJoCo's renderer failed for want of an OpenGL context (mujoco.FatalError, or PyOpenGL's missing library)."""
    text = f"{type(err).__module__}.{type(err).__name__}: {err}"
    return "OpenGL" in text or "mjr_makeContext" in text or "glGetError" in text


def evaluate(
    path: str | Path,
    episodes: int | None = None,
    stochastic: bool | None = None,
    seed: int | None = None,
    video: str | Path | None = None,
    best: bool = False,
    env_kwargs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Play ``episodes`` episodes with the agent of ``path`` (a3c.load) and return the result as a dict.
    ``stochastic``: sampled actions (True), the most likely (False), or as the run evaluated (None: its
    --eval-stochastic). ``env_kwargs``: keyword arguments for gymnasium.make over the run's own (the envs played are
    that variant)."""
    if episodes is not None and episodes < 1:
        raise UserError(f"--episodes must be at least 1 (got {episodes})")
    if seed is not None:  # the episodes' seeds come from it as a run's do
        ok, problem = seed_check(seed)
        if not ok:
            raise UserError(problem)
    if video is not None:
        if Path(video).exists() and not Path(video).is_dir():
            raise UserError(f"--video {video} is a file; give a folder for the videos (made where missing)")
        check_video_extra()
        headless_rendering()
    from gymnasium.error import DependencyNotInstalled

    from a3c.record.agent import (
        agent_from_payload,
        check_env_fits,
        eval_samplers,
        eval_seeds,
        make_eval_envs,
        run_checkpoint,
        run_episodes,
    )
    from a3c.spec.environment import check_env_file_here

    file, payload = run_checkpoint(path, best)
    check_env_file_here(str(payload.get("config", {}).get("env", "")), "evaluate")
    # the envs are made below (a module: env id imports its module, as training did), so an old checkpoint without
    # stored spaces may be described by making its env
    agent = agent_from_payload(payload, file, may_make_env=True)
    config = agent.config
    n = episodes if episodes is not None else (config.eval_episodes or 10)
    seed = config.seed if seed is None else seed
    stochastic = config.eval_stochastic if stochastic is None else stochastic
    # what differs from the run's own kwargs (those given again are the run's env, not a variant of it)
    variant = {
        key: value
        for key, value in (env_kwargs or {}).items()
        if key not in config.env_kwargs or not same_setting(config.env_kwargs[key], value)
    }
    if video is None:
        envs = make_eval_envs(config, n, **variant)  # all episodes in lockstep: one batched forward pass per step
    else:
        envs = [_recording_env(config, Path(video), agent.path.stem if agent.path else "agent", variant)]
    try:
        check_env_fits(agent, envs[0], variant)
        stats = run_episodes(agent, envs, eval_seeds(seed, n), not stochastic, eval_samplers(seed, n))
    except DependencyNotInstalled as err:  # rendering for --video needs what the env's family needs (pygame, ...)
        raise UserError(f"--video: env {config.env!r} cannot render: {err}") from None
    except Exception as err:
        if video is None or not _is_gl_failure(err):
            raise
        raise UserError(
            f"--video: env {config.env!r} found no OpenGL to render with (MUJOCO_GL={os.environ.get('MUJOCO_GL')}); "
            "install libEGL (EGL) or OSMesa and set MUJOCO_GL=egl or MUJOCO_GL=osmesa"
        ) from None
    finally:
        for env in envs:
            env.close()
    # the policy, seed and length where they differ from the run's own evaluation (its --eval-stochastic, --seed and
    # --eval-episodes; 10 for a run that evaluated none)
    protocol: dict[str, Any] = {}
    if stochastic != config.eval_stochastic:
        protocol["policy"] = "stochastic" if stochastic else "deterministic"
    if seed != config.seed:
        protocol["seed"] = seed
    if n != (config.eval_episodes or 10):
        protocol["episodes"] = n
    return {
        "checkpoint": str(agent.path),
        "env": config.env,
        "env_kwargs": {**config.env_kwargs, **variant},  # what the episodes were played with
        "env_kwargs_over_run": variant,  # --env-kwargs: what of that differs from training
        "protocol_over_run": protocol,
        "global_step": agent.global_step,
        "deterministic": not stochastic,
        "seed": seed,
        **stats.summary(),
        "returns": stats.returns.tolist(),
        "lengths": stats.lengths.tolist(),
        "video": None if video is None else str(video),
    }


def _recording_env(config: Any, folder: Path, prefix: str, env_kwargs: dict[str, Any]) -> Any:
    """One env whose every episode RecordVideo saves as DIR/<prefix>-episode-<i>.mp4 (episodes then run one after
    the other: one episode's frames in memory at a time)."""
    from gymnasium.wrappers import RecordVideo

    from a3c.record.agent import make_eval_envs
    from a3c.record.files import make_folder
    from a3c.spec.environment import KwargsRejected

    taken = sorted(folder.glob(f"{prefix}-episode-*.mp4")) if folder.is_dir() else []
    if taken:  # (RecordVideo would write over them, with a warning of its own)
        raise UserError(
            f"--video {folder} already holds {count(len(taken), 'video')} named {prefix}-episode-*.mp4 "
            f"({taken[0].name}, ...), which recording would overwrite; give another folder, or move them"
        )
    made = not folder.exists()
    make_folder(folder, "--video")  # (RecordVideo's own makedirs raises a traceback where it cannot)
    env = None
    try:
        env = make_eval_envs(config, 1, **{**env_kwargs, "render_mode": "rgb_array"})[0]
        with warnings.catch_warnings():  # its "Overwriting existing videos" for any folder that exists: checked above
            warnings.filterwarnings("ignore", message=".*Overwriting existing videos")
            return RecordVideo(env, str(folder), episode_trigger=lambda episode: True, name_prefix=prefix)
    except BaseException as err:
        if env is not None:
            env.close()
        if made:  # (nothing was recorded: the folder made for it goes too)
            with contextlib.suppress(OSError):
                folder.rmdir()
        if isinstance(err, ValueError) and not isinstance(err, UserError):  # RecordVideo: an env rendering no frames
            raise UserError(f"--video: env {config.env!r} cannot be recorded ({err})") from None
        if isinstance(err, KwargsRejected) and "render_mode" in err.keys and "render_mode" not in env_kwargs:
            # make_env blames the kwargs it was given, and render_mode is --video's, not the user's
            raise UserError(
                f"--video: env {config.env!r} renders no frames (its constructor takes no render_mode='rgb_array'); "
                "drop --video"
            ) from None
        raise


def result_line(result: dict[str, Any]) -> str:
    """The one line python -m a3c.evaluate prints: the checkpoint, its step, the return (mean ± std), the mean
    length, the episodes, how the actions were chosen and the env's keyword arguments that differ from the run's."""
    step = "?" if result["global_step"] is None else f"{result['global_step']:,}"
    policy = "deterministic" if result["deterministic"] else "stochastic"
    variant = result.get("env_kwargs_over_run")
    played = ", " + " ".join(f"{k}={v!r}" for k, v in variant.items()) if variant else ""
    return (
        f"{result['checkpoint']} (step {step}): return {result['mean_return']:.2f} ± {result['std_return']:.2f}, "
        f"mean length {result['mean_length']:.1f}, {count(result['episodes'], 'episode')}"
        f" ({policy}, seed {result['seed']}"
        f"{played})"
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.json is not None:  # checked before the episodes (minutes of them, on Atari), not after
        check_json_path(args.json)
    result = evaluate(
        args.path, args.episodes, args.stochastic, args.seed, args.video, args.best, parse_env_kwargs(args.env_kwargs)
    )
    print(result_line(result))
    from a3c.record.run_dir import json_ready

    out = args.json or default_json_path(
        Path(result["checkpoint"]), result["env_kwargs_over_run"], result["protocol_over_run"]
    )
    try:
        out.write_text(json.dumps(json_ready(result), indent=2, allow_nan=False) + "\n")  # (NaN as null: JSON)
    except OSError as err:  # (checked before the episodes; a disk that filled since, a default path refused)
        raise unwritable_json(out, err.strerror or str(err)) from None
    print(f"a3c: wrote {out}" + (f"; videos in {args.video}" if args.video else ""), file=sys.stderr)
    card = update_model_card(result)
    if card is not None:
        print(card, file=sys.stderr)
    return 0


def check_json_path(out: Path) -> None:
    """UserError where --json FILE cannot be written (a folder, in a folder that does not exist or takes no file):
    said before the episodes, not after them."""
    from a3c.record.files import IS_A_FOLDER, unwritable_reason

    reason = unwritable_reason(out, folders_made=False)
    if reason == IS_A_FOLDER:
        raise UserError(f"--json {out} is a folder; give a file name (--json FILE)")
    if reason is not None:
        raise unwritable_json(out, reason)


def unwritable_json(out: Path, reason: str) -> UserError:
    """The one wording of a result file that cannot be written (``reason``: why), before the episodes or after."""
    return UserError(f"cannot write {out} ({reason}); give a writable --json FILE")


def update_model_card(result: dict[str, Any]) -> str | None:
    """Rewrite the model card (README.md) of the run the checkpoint belongs to with this evaluation; the line to print
    about it (None for a checkpoint kept outside a run directory). An evaluation in a variant of the run's env
    (--env-kwargs) leaves the card as it is: its score is not the env's the card names."""
    from a3c.record.model_card import CARD, write_model_card
    from a3c.record.run_dir import RunDirWriteError

    folder = Path(result["checkpoint"]).parent
    if folder.name != "checkpoints" or not (folder.parent / "config.json").is_file():
        return None
    run_dir = folder.parent
    if result.get("env_kwargs_over_run"):
        return f"a3c: {run_dir / CARD} left as it was: --env-kwargs plays a variant of the env it describes"
    try:
        return f"a3c: wrote {write_model_card(run_dir, evaluation=result)} (the model card, with this evaluation)"
    except RunDirWriteError as err:  # (the result is written: a read-only run directory is no reason to fail)
        return f"a3c: warning: {run_dir / CARD} not updated ({err.error.strerror or err.error})"


if __name__ == "__main__":
    from a3c.run.threads import limit_native_threads

    # the command's process, one thread per native pool, as the evaluator during training (a3c.evaluate.main called
    # from a user's process leaves its threads alone): beside other work (a training run, a timed one) torch's pool
    # waits at every parallel op for a core another process holds. Breakout, a batch of 10 frames, on 2 cores: alone
    # 434-448 passes/s on 2 threads against 314-319 on one (1.4x); one core busy, 9 against 312
    limit_native_threads()
    sys.exit(run_cli(main, prog="a3c.evaluate"))
