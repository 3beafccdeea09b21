"""Presets (a3c/spec/presets.toml): applied when --env matches, below any flag given, recorded in config.json, shown by
--show-config, never re-applied over a resume; a broken presets file is one-line user error."""

import json
import subprocess
import sys

import gymnasium as gym
import pytest
from procs import train_cmd

from a3c.spec.config import Config
from a3c.spec.config_text import format_config
from a3c.spec.errors import UserError
from a3c.spec.preset_choice import CPU, choose_table, resolve_config
from a3c.spec.presets import (
    ATARI_PRESET,
    FAMILIES,
    PRESETS_FILE,
    family_table,
    for_objective,
    load_presets,
    table_base,
    tomllib,
)
from a3c.train import build_parser, parse_cli, parse_config


def test_every_shipped_preset_is_a_known_env_with_valid_settings():
    import envs  # noqa: F401  (registers this project's envs/ ids)

    presets = load_presets()
    assert {"CartPole-v1", "Acrobot-v1", "MountainCar-v0", "LunarLander-v3", "envs/Memory-v0"} <= set(presets)
    extended = {table["extends"] for table in tomllib.loads(PRESETS_FILE.read_text()).values() if "extends" in table}
    assert extended == {"mujoco", "continuous"}
    families = {ATARI_PRESET, *extended, *FAMILIES}  # tables named for a family of ids, not for one id
    for name, settings in presets.items():
        if table_base(name) not in families:
            gym.spec(table_base(name))  # a registered id (LunarLander needs box2d only to be made, not to be looked up)
        assert settings, f"preset {name} sets nothing"
        Config(**settings).validate()


def test_the_atari_preset_applies_to_every_ale_id_and_a_flag_still_wins():
    config, sources, _ = parse_cli(["--env", "ALE/Breakout-v5", "--lr", "1e-4"])
    assert config.preset == ATARI_PRESET and config.optimizer == "adam" and sources["optimizer"] == "preset"
    assert config.lr == 1e-4 and sources["lr"] == "flag"
    assert choose_table("CartPole-v1", None, None, None, lambda: "discrete").name == "CartPole-v1"
    assert choose_table("ALE/Pong-v5", "none", None, None, lambda: "discrete").name == "discrete"


def test_preset_applies_when_env_matches():
    config, sources, show = parse_cli(["--env", "Acrobot-v1"])
    preset = load_presets()["Acrobot-v1"]
    assert config.preset == "Acrobot-v1" and not show
    for key, value in preset.items():
        assert getattr(config, key) == value and sources[key] == "preset"
    assert config.normalize_obs and config.ent_coef == 0.0
    assert sources["lr"] == "default" and config.lr == Config().lr
    assert sources["env"] == "flag"


def test_a_flag_given_beats_the_preset_even_when_it_equals_the_default():
    # the preset sets ent_coef 0.0 and normalize_obs; the flags give the defaults back: typed, so they win
    config, sources, _ = parse_cli(["--env", "Acrobot-v1", "--ent-coef", str(Config().ent_coef), "--no-normalize-obs"])
    assert config.ent_coef == Config().ent_coef and sources["ent_coef"] == "flag"
    assert config.normalize_obs is False and sources["normalize_obs"] == "flag"
    assert config.normalize_reward is True and sources["normalize_reward"] == "preset"  # the rest of the preset stays
    assert config.preset == "Acrobot-v1"


def test_env_without_preset_and_preset_none_get_the_defaults():
    """A3C's plain defaults (the tables discrete and continuous) are the flags' defaults."""
    defaults = Config(workers=2).to_dict()
    for argv in (["--env", "envs/Classify-v0"], ["--env", "Acrobot-v1", "--preset", "none"]):
        config, sources, _ = parse_cli([*argv, "--workers", "2"])
        assert config.preset == "discrete"
        got = config.to_dict()
        assert {k: v for k, v in got.items() if k not in ("env", "preset")} == {
            k: v for k, v in defaults.items() if k not in ("env", "preset")
        }
        assert {name for name, source in sources.items() if source == "preset"} <= {"algo", "preset"}


def test_preset_named_explicitly_applies_to_another_env():
    config = parse_config(["--env", "envs/Classify-v0", "--preset", "LunarLander-v3"])
    assert config.preset == "LunarLander-v3" and config.gamma == load_presets()["LunarLander-v3"]["gamma"]
    with pytest.raises(UserError, match="no such preset; use one of .*Acrobot-v1"):
        parse_config(["--env", "CartPole-v1", "--preset", "Acrobat-v1"])


def test_resolve_config_precedence_is_default_preset_flag():
    values = vars(build_parser().parse_args(["--env", "LunarLander-v3"]))
    values.pop("show_config")
    values["hidden_sizes"], values["env_kwargs"] = tuple(values["hidden_sizes"]), {}
    values["gamma"] = 0.9  # as if typed: the flag wins only if it is in `given`
    config, sources = resolve_config(values, {"env"})
    assert config.gamma == 0.999 and sources["gamma"] == "preset"
    config, sources = resolve_config(values, {"env", "gamma"})
    assert config.gamma == 0.9 and sources["gamma"] == "flag"


@pytest.mark.parametrize(
    "toml, message",
    [
        ("[X-v0]\nno-such-flag = 1\n", "no-such-flag: no such setting"),
        ("[X-v0]\nlr = 'fast'\n", "lr = 'fast': expected a number"),
        ("[X-v0]\nnormalize-obs = 1\n", "normalize-obs = 1: expected true or false"),
        ("[X-v0]\nn-steps = 2.5\n", "n-steps = 2.5: expected an integer"),
        ("[X-v0]\nhidden-sizes = 64\n", r"hidden-sizes = 64: expected a list of integers, e.g. \[64, 64\]"),
        ("[X-v0]\nworkers = 'many'\n", "workers = 'many': expected an integer or 'auto'"),
        ("[X-v0]\nseed = 3\n", "a preset cannot set --seed"),
        ("[X-v0]\ngamma = 1.5\n", r"\[X-v0\]: --gamma must be in \(0, 1\]"),
        ("[X-v0\n", "cannot read the presets file"),
        ("lr = 0.1\n", "must be a table"),
    ],
)
def test_a_broken_presets_file_is_a_user_error_naming_the_key(tmp_path, toml, message):
    path = tmp_path / "presets.toml"
    path.write_text(toml)
    with pytest.raises(UserError, match=message):
        load_presets(path)


def test_a_table_may_set_workers_auto(tmp_path):
    """Found by probing: workers = "auto" was refused ("expected an integer"), so a table extending one that sets
    workers = 1 (Walker2d-v5's) could not give --workers auto back."""
    path = tmp_path / "presets.toml"
    path.write_text("[X-v0]\nworkers = 'auto'\n\n[Y-v0]\nworkers = 3\n")
    presets = load_presets(path)
    assert presets["X-v0"]["workers"] == "auto" and presets["Y-v0"]["workers"] == 3


def test_a_table_extends_another_and_its_own_keys_win(tmp_path):
    path = tmp_path / "presets.toml"
    path.write_text(
        "[base]\nlr = 0.5\nn-steps = 8\n\n[mid]\nextends = 'base'\nn-steps = 16\ngamma = 0.9\n\n"
        "[X-v0]\nextends = 'mid'\ngamma = 0.95\n"
    )
    presets = load_presets(path)
    assert presets["X-v0"] == {"lr": 0.5, "n_steps": 16, "gamma": 0.95}
    assert presets["mid"] == {"lr": 0.5, "n_steps": 16, "gamma": 0.9} and presets["base"] == {"lr": 0.5, "n_steps": 8}


def test_the_mujoco_robots_share_one_table_per_objective_and_each_gets_all_of_it():
    """HalfCheetah's preset is rl-zoo3's tuned PPO; Hopper's and Walker2d's are PPO's plain continuous defaults,
    Walker2d's in one worker of 2,048 steps (synchronous: two workers' asynchrony cost it); A3C's [mujoco] is each
    robot's ``@a3c`` table (presets.toml says why)."""
    presets = load_presets()
    assert presets["mujoco"]["clipped_log_prob"] is True and presets["mujoco"]["n_steps"] == 8
    config, sources, _ = parse_cli(["--env", "HalfCheetah-v5"])  # rl-zoo3's tuned PPO settings
    assert (config.preset, config.algo, sources["algo"]) == ("HalfCheetah-v5", "ppo", "preset")
    assert (config.n_steps, config.n_epochs, config.hidden_sizes, config.clip_range_vf) == (512, 20, (256, 256), None)
    for robot in ("HalfCheetah-v5", "Hopper-v5", "Walker2d-v5"):
        assert presets[f"{robot}@a3c"] == presets["mujoco"]
        config, sources, _ = parse_cli(["--env", robot, "--algo", "a3c"])
        assert config.preset == f"{robot}@a3c" and config.gsde and sources["gsde"] == "preset"
    one_worker = {"workers": 1, "n_steps": 2048}
    for robot, own in (("Hopper-v5", {}), ("Walker2d-v5", one_worker)):
        assert presets[robot] == {**presets["continuous"], "total_steps": 1_000_000, **own}
        config, sources, _ = parse_cli(["--env", robot])
        assert (config.preset, config.algo, sources["algo"]) == (robot, "ppo", "preset")
        assert not config.gsde and config.total_steps == 1_000_000
        assert (config.workers, config.n_steps) == (own.get("workers", "auto"), own.get("n_steps", 1024))


@pytest.mark.parametrize(
    "toml, message",
    [
        ("[X-v0]\nextends = 'nowhere'\n", r"\[X-v0\] extends = 'nowhere': expected the name of a table"),
        (
            "[X-v0]\nextends = 3\n",
            r"extends = 3: expected the name of a table of this file or of a3c's presets.toml \(X-v0\)",
        ),
        ("[A]\nextends = 'B'\n[B]\nextends = 'A'\n", r"a loop \(A -> B -> A\); break it"),
        ("[A]\nlr = 1\n[X-v0]\nextends = 'A'\ngamma = 2.0\n", r"\[X-v0\]: --gamma must be in"),
    ],
)
def test_a_bad_extends_is_a_user_error_naming_the_table(tmp_path, toml, message):
    path = tmp_path / "presets.toml"
    path.write_text(toml)
    with pytest.raises(UserError, match=message):
        load_presets(path)


def test_presets_file_types_are_converted(tmp_path):
    path = tmp_path / "presets.toml"
    path.write_text("[X-v0]\nlr = 1\nhidden-sizes = [32, 16]\nenv-kwargs = { max_episode_steps = 50 }\n")
    assert load_presets(path)["X-v0"] == {"lr": 1.0, "hidden_sizes": (32, 16), "env_kwargs": {"max_episode_steps": 50}}
    assert type(load_presets(path)["X-v0"]["lr"]) is float


def test_show_config_prints_sources_and_exits_without_training(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "a3c.train", "--env", "Acrobot-v1", "--lr", "0.0003", "--show-config"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    lines = {line.split()[0]: line.split()[1:] for line in out.stdout.splitlines() if line.startswith("--")}
    assert lines["--lr"] == ["0.0003", "flag"]
    assert lines["--ent-coef"] == ["0.0", "preset"]
    assert lines["--normalize-obs"] == ["preset"] and lines["--no-bf16"] == ["default"]  # switches, as typed
    assert lines["--gamma"] == ["0.99", "default"]
    assert lines["--preset"] == ["Acrobot-v1", "preset"]
    assert "preset Acrobot-v1 from" in out.stdout
    assert "# objective: A3C's actor-critic loss, one gradient a rollout (--algo a3c, preset)" in out.stdout
    assert not (tmp_path / "runs").exists()  # nothing trained, no run directory


@pytest.mark.parametrize("native", [True, False], ids=["bf16-cpu", "no-bf16-cpu"])
@pytest.mark.parametrize("env", ["CartPole-v1", "Acrobot-v1", "Pendulum-v1", "ALE/Pong-v5"])
def test_show_config_prints_flags_that_give_the_same_config_typed_back(env, native, monkeypatch):
    """--show-config's lines are a command line (switches as --x / --no-x, unset settings commented out): typed back,
    they resolve to the same settings, on a CPU with bfloat16 instructions and on one without (the atari preset's
    --bf16 holds only on the first). Before: "--ortho-init true" (no such flag), "--start-method -"; and on a CPU
    without bfloat16 "--no-bf16    preset, off: this CPU has no bfloat16 instructions" (not a command line)."""
    from a3c.spec import cpu

    pytest.importorskip("ale_py") if env.startswith("ALE/") else None
    monkeypatch.setattr(cpu, "native_bf16", lambda: native)
    config, sources, _ = parse_cli(["--env", env])
    if env.startswith("ALE/"):
        assert config.bf16 is native
    argv = []
    for line in format_config(config, sources).splitlines():
        if not line.startswith("#"):
            argv += line.split()[:-1]  # (the last column: where the value came from)
    again, _, _ = parse_cli(argv)
    assert again == config


def test_the_preset_line_and_show_config_name_the_objective():
    line, _ = _lines(["--env", "CartPole-v1", "--algo", "a3c", "--n-steps", "32"])
    assert line.startswith("a3c: preset CartPole-v1 (a3c/spec/presets.toml), objective a3c, sets")
    config, sources, _ = parse_cli(["--env", "Acrobot-v1", "--algo", "ppo", "--n-steps", "32"])
    shown = format_config(config, sources)
    assert "# objective: PPO's clipped surrogate" in shown and "(--algo ppo, flag)" in shown


def test_config_json_records_the_preset_and_resume_keeps_the_checkpoint_config(tmp_path):
    run_dir = tmp_path / "run"
    cmd = train_cmd(run_dir, "--env", "CartPole-v1", "--total-steps", "1000", "--workers", "1", "--lr", "0.002")
    first = subprocess.run(cmd, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    saved = json.loads((run_dir / "config.json").read_text())
    preset = load_presets()["CartPole-v1"]
    assert saved["preset"] == "CartPole-v1" and saved["lr_schedule"] == preset["lr_schedule"] and saved["lr"] == 0.002

    # the run's checkpoint config is edited as if written with other settings: a resume must keep them, not the preset
    import torch

    ckpt_path = run_dir / "checkpoints" / "latest.pt"
    ckpt = torch.load(ckpt_path, weights_only=True)
    ckpt["config"] = {**ckpt["config"], "lr_schedule": "constant", "total_steps": 1000, "preset": None}
    torch.save(ckpt, ckpt_path)
    config, sources, _ = parse_cli(["--resume", str(run_dir), "--total-steps", "3000", "--ent-coef", "0.05"])
    assert config.lr_schedule == "constant" and config.preset is None and config.lr == 0.002
    assert config.total_steps == 3000 and config.ent_coef == 0.05
    assert sources["total_steps"] == "flag" and sources["lr_schedule"] == "checkpoint"
    with pytest.raises(UserError, match="--preset does not apply to --resume"):
        parse_config(["--resume", str(run_dir), "--preset", "CartPole-v1"])


def test_a_preset_file_replaces_presets_toml_and_the_flags_given_still_win(tmp_path):
    path = tmp_path / "best.toml"
    path.write_text("# a tuned preset\n[CartPole-v1]\nlr = 0.005\nn-steps = 16\nhidden-sizes = [128, 128]\n")
    config, sources, _ = parse_cli(["--env", "CartPole-v1", "--preset-file", str(path), "--n-steps", "8"])
    assert config.lr == 0.005 and sources["lr"] == "preset" and config.hidden_sizes == (128, 128)
    assert config.n_steps == 8 and sources["n_steps"] == "flag"
    # presets.toml's CartPole-v1 (linear lr schedule, 500k steps) is not applied under it
    assert config.lr_schedule == Config().lr_schedule and config.total_steps == Config().total_steps
    assert config.preset == "CartPole-v1" and config.preset_file == str(path)
    named = parse_config(["--env", "Acrobot-v1", "--preset-file", str(path), "--preset", "CartPole-v1"])
    assert named.lr == 0.005 and named.env == "Acrobot-v1"


def test_show_config_names_the_preset_file(tmp_path):
    path = tmp_path / "best.toml"
    path.write_text("[CartPole-v1]\nlr = 0.005\n")
    done = subprocess.run(
        [sys.executable, "-m", "a3c.train", "--env", "CartPole-v1", "--preset-file", str(path), "--show-config"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert f"# preset CartPole-v1 from {path}" in done.stdout
    assert any(line.split() == ["--lr", "0.005", "preset"] for line in done.stdout.splitlines())


@pytest.mark.parametrize(
    ("text", "argv", "message"),
    [
        ("[Acrobot-v1]\nlr = 0.005\n", [], "has no preset for --env CartPole-v1 (its presets: Acrobot-v1)"),
        ("[CartPole-v1]\nlr = 0.005\n", ["--preset", "none"], "--preset none and --preset-file"),
        ("[CartPole-v1]\nlr = 0.005\n", ["--preset", "Other"], "--preset Other: no such preset; use one of"),
        ("[CartPole-v1]\nlr = 'fast'\n", [], "[CartPole-v1] lr = 'fast': expected a number"),
        ("[CartPole-v1]\ntrack = true\n", [], "a preset cannot set --track"),
        ("[CartPole-v1]\nlr = -1.0\n", [], "--lr must be a positive number"),
        ("[CartPole-v1\n", [], "cannot read the presets file"),
    ],
)
def test_a_bad_or_unfitting_preset_file_is_one_user_error(tmp_path, text, argv, message):
    path = tmp_path / "p.toml"
    path.write_text(text)
    with pytest.raises(UserError) as err:
        parse_config(["--env", "CartPole-v1", "--preset-file", str(path), *argv])
    assert message in str(err.value)
    with pytest.raises(UserError, match="cannot read the presets file .*missing.toml"):
        parse_config(["--preset-file", str(tmp_path / "missing.toml")])


def test_a_resume_refuses_a_preset_file(tmp_path):
    from a3c.run.resolve import resolve_settings
    from a3c.train import parse_flags

    values, given, _ = parse_flags(["--resume", str(tmp_path), "--preset-file", "x.toml"])
    with pytest.raises(UserError, match="--preset-file does not apply to --resume"):
        resolve_settings(values, given)


# -- issue 27: a preset is never applied silently ---------------------------------------------------------------------
def _lines(argv):
    from a3c.spec.config_text import preset_line, short_run_warning

    config, sources, _ = parse_cli(argv)
    return preset_line(config, sources), short_run_warning(config, sources)


def test_the_preset_line_names_the_preset_what_it_set_and_that_flags_win():
    line, warning = _lines(["--env", "CartPole-v1"])
    assert line == (
        "a3c: preset CartPole-v1 (a3c/spec/presets.toml), objective a3c, sets --total-steps 500000 "
        "--lr-schedule linear (a flag given wins over it; --preset none: the plain defaults)"
    )
    assert warning is None
    line, _ = _lines(["--env", "Acrobot-v1", "--ent-coef", "0.01", "--no-normalize-reward"])
    assert line.endswith(
        "sets --total-steps 500000 --normalize-obs; the flags given win: --no-normalize-reward --ent-coef 0.01"
    )
    line, warning = _lines(["--env", "CartPole-v1", "--preset", "none"])
    assert line.startswith("a3c: --preset none: the plain defaults for a discrete action space, objective a3c")
    assert warning is None
    assert _lines(["--env", "Acrobot-v1", "--total-steps", "1000"])[1] is None  # no schedule in that preset


def test_a_much_shorter_run_than_the_preset_was_measured_at_warns_of_its_linear_schedule():
    """Issue 27: Pendulum-v1 --total-steps 100000 applied the preset's linear lr silently, reached lr 0 at 100k and
    ended at -1162, which looked like a broken trainer."""
    _, warning = _lines(["--env", "Pendulum-v1", "--total-steps", "100000"])
    assert warning.startswith("a3c: warning: --total-steps 100,000 is 10x shorter than the 1,000,000 steps preset")
    assert "--lr-schedule linear takes the lr to 0" in warning and "give --lr-schedule constant" in warning
    assert _lines(["--env", "Pendulum-v1", "--total-steps", "600000"])[1] is None  # not much shorter
    # a schedule the user chose, or none: nothing to warn about
    assert _lines(["--env", "Pendulum-v1", "--total-steps", "100000", "--lr-schedule", "linear"])[1] is None
    assert _lines(["--env", "Pendulum-v1", "--total-steps", "100000", "--lr-schedule", "constant"])[1] is None


def test_a_new_run_prints_its_preset_line_and_a_resume_does_not(tmp_path):
    run = tmp_path / "r"
    flags = ["--total-steps", "400", "--workers", "1", "--envs-per-worker", "1", "--eval-every", "0"]
    proc = subprocess.run(
        [sys.executable, "-m", "a3c.train", "--env", "Pendulum-v1", *flags, "--run-dir", str(run)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert lines[0].startswith("a3c: preset Pendulum-v1 (a3c/spec/presets.toml), objective a3c, sets --normalize-obs")
    assert lines[0].endswith("; the flags given win: --total-steps 400")  # (--eval-every: not in the preset)
    assert lines[1].startswith("a3c: warning: --total-steps 400 is 2.5e+03x shorter than the 1,000,000 steps")
    resumed = subprocess.run(
        [sys.executable, "-m", "a3c.train", "--resume", str(run), "--total-steps", "800"],
        capture_output=True,
        text=True,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert "a3c: preset" not in resumed.stderr  # a resume keeps its checkpoint's config: no preset applies
    assert f"a3c: resuming {run} at step " in resumed.stderr and " with 1 worker" in resumed.stderr


def test_the_preset_line_and_its_warning_read_the_preset_file_the_run_uses(tmp_path):
    """A preset of --preset-file named like a shipped one (CartPole-v1): the line shows the file's settings, not
    presets.toml's."""
    path = tmp_path / "mine.toml"
    path.write_text('[CartPole-v1]\nlr = 0.002\ntotal-steps = 1_000_000\nlr-schedule = "linear"\n')
    line, warning = _lines(["--env", "CartPole-v1", "--preset-file", str(path), "--total-steps", "1000"])
    assert line.startswith(f"a3c: preset CartPole-v1 ({path}), objective a3c, sets --lr 0.002 --lr-schedule linear;")
    assert warning is not None and "1,000,000 steps preset CartPole-v1" in warning


@pytest.mark.parametrize("native", [True, False])
def test_a_presets_bf16_holds_only_on_a_cpu_with_bfloat16_instructions(tmp_path, monkeypatch, native):
    from a3c.spec import config_text, cpu

    monkeypatch.setattr(cpu, "native_bf16", lambda: native)
    path = tmp_path / "p.toml"
    path.write_text('["ALE/Pong-v5"]\nbf16 = true\nn-steps = 20\n')
    config, sources, _ = parse_cli(["--env", "ALE/Pong-v5", "--preset-file", str(path)])
    assert config.bf16 is native and config.n_steps == 20
    line = config_text.preset_line(config, sources)
    if native:
        assert sources["bf16"] == "preset" and "--bf16" in line and "bfloat16" not in line
    else:
        assert sources["bf16"] == CPU and "--bf16" not in line.split(";")[0]
        assert "not its --bf16: this CPU has no bfloat16 instructions (float32 is faster here)" in line
        shown = config_text.format_config(config, sources)
        assert any(row.split() == ["--no-bf16", CPU] for row in shown.splitlines()), shown
        assert "# --no-bf16: preset ALE/Pong-v5 sets --bf16; off here: this CPU has no bfloat16 instructions" in shown
    # a --bf16 typed is the user's, on any CPU
    typed, typed_sources, _ = parse_cli(["--env", "ALE/Pong-v5", "--preset-file", str(path), "--bf16"])
    assert typed.bf16 and typed_sources["bf16"] == "flag"


# One rule names a table for an objective, for an env's tables and for the plain defaults' families alike.
_TABLES = {
    "discrete": {},  # a3c (no algo)
    "discrete@ppo": {"algo": "ppo"},
    "continuous": {"algo": "ppo"},
    "continuous@a3c": {},
    "Solo-v0@ppo": {"algo": "ppo"},
}


@pytest.mark.parametrize(
    ("base", "objective", "expected"),
    [
        ("discrete", None, "discrete"),
        ("discrete", "a3c", "discrete"),
        ("discrete", "ppo", "discrete@ppo"),
        ("continuous", None, "continuous"),
        ("continuous", "ppo", "continuous"),
        ("continuous", "a3c", "continuous@a3c"),
        ("Solo-v0", None, "Solo-v0@ppo"),  # its one table, for its objective
        ("Solo-v0", "a3c", None),
        ("Absent-v0", None, None),
    ],
)
def test_for_objective_names_the_plain_table_where_it_is_the_objectives_else_base_at_objective(
    base, objective, expected
):
    assert for_objective(base, objective, _TABLES) == expected


def test_family_table_follows_for_objective_and_names_the_missing_table():
    assert family_table("continuous", "a3c", _TABLES) == "continuous@a3c"
    assert family_table("discrete", None, _TABLES) == "discrete"
    with pytest.raises(UserError, match=r'no table \["discrete@vtrace"\]'):
        family_table("discrete", "vtrace", _TABLES)
    with pytest.raises(UserError, match=r"no table \[discrete\]"):
        family_table("discrete", None, {"continuous": {}})
    with pytest.raises(UserError, match=r"no table \[continuous\]"):  # the default is the plain table, none other
        family_table("continuous", None, {"continuous@a3c": {}})


def test_mountaincar_s_preset_is_ppo_s_and_its_earlier_a3c_table_is_what_algo_a3c_takes():
    """MountainCar-v0's preset became PPO's (rl-zoo3's PPO settings; presets.toml says why): ``--algo a3c`` takes the
    A3C table it had before (rl-zoo3's A2C settings: RMSprop at 7e-4 decaying, normalised obs and rewards)."""
    config, sources, _ = parse_cli(["--env", "MountainCar-v0"])
    assert (config.preset, config.algo, sources["algo"]) == ("MountainCar-v0", "ppo", "preset")
    assert (config.n_steps, config.envs_per_worker, config.minibatch_size, config.n_epochs) == (16, 8, 32, 4)
    assert config.normalize_obs and config.normalize_reward and config.lr_schedule == "constant"
    config, sources, _ = parse_cli(["--env", "MountainCar-v0", "--algo", "a3c"])
    assert (config.preset, config.optimizer, config.lr, config.lr_schedule) == (
        "MountainCar-v0@a3c",
        "rmsprop",
        7e-4,
        "linear",
    )
    assert config.normalize_obs and config.normalize_reward and config.ent_coef == 0.0 and sources["lr"] == "preset"


def test_lunarlandercontinuous_s_preset_is_ppo_s_and_its_earlier_a3c_table_is_what_algo_a3c_takes():
    """LunarLanderContinuous-v3's preset became PPO's (rl-zoo3's PPO settings, with a3c's observation normalisation;
    presets.toml says why): ``--algo a3c`` takes the A3C table it had before (rl-zoo3's A2C settings with gSDE)."""
    config, sources, _ = parse_cli(["--env", "LunarLanderContinuous-v3"])
    assert (config.preset, config.algo, sources["algo"]) == ("LunarLanderContinuous-v3", "ppo", "preset")
    assert (config.n_steps, config.envs_per_worker, config.minibatch_size, config.n_epochs) == (1024, 8, 64, 4)
    assert (config.gamma, config.gae_lambda, config.ent_coef, config.clip_range_vf) == (0.999, 0.98, 0.01, None)
    assert config.normalize_obs and not config.normalize_reward and not config.gsde
    config, sources, _ = parse_cli(["--env", "LunarLanderContinuous-v3", "--algo", "a3c"])
    assert (config.preset, config.optimizer, config.n_steps, config.gsde, config.log_std_init) == (
        "LunarLanderContinuous-v3@a3c",
        "rmsprop",
        8,
        True,
        -2.0,
    )
    assert config.normalize_obs and config.normalize_reward and sources["gsde"] == "preset"


def test_a_ppo_table_of_ones_own_file_starts_from_a3cs_tables_with_extends(tmp_path):
    """Found by probing: a PPO table of a --preset-file that set no rollout sizes took the flags' defaults (A3C's
    --n-steps 5 x 8 envs against --minibatch-size 64) and failed on values the user never set, naming no way out.
    `extends` may name a table of a3c's presets.toml where the file has none of that name (PPO's plain defaults for
    discrete actions: discrete@ppo); the error for such a table says so."""
    path = tmp_path / "mine.toml"
    path.write_text('[CartPole-v1]\nalgo = "ppo"\nn-epochs = 2\n')
    with pytest.raises(UserError, match=r'is more than a worker\'s rollout.*extends = "discrete@ppo"') as err:
        parse_config(["--env", "CartPole-v1", "--preset-file", str(path)])
    assert "\n" not in str(err.value)
    path.write_text('[CartPole-v1]\nextends = "discrete@ppo"\nn-epochs = 2\n')
    config, sources, _ = parse_cli(["--env", "CartPole-v1", "--preset-file", str(path)])
    plain = load_presets()["discrete@ppo"]
    assert config.algo == "ppo" and config.n_epochs == 2 and sources["n_epochs"] == "preset"
    assert (config.n_steps, config.minibatch_size, config.lr) == (
        plain["n_steps"],
        plain["minibatch_size"],
        plain["lr"],
    )
    path.write_text('[CartPole-v1]\nextends = "no-such-table"\n')
    with pytest.raises(UserError, match=r"expected the name of a table of this file or of a3c's presets.toml"):
        parse_config(["--env", "CartPole-v1", "--preset-file", str(path)])
