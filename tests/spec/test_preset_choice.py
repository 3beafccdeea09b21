"""Which table of a3c/spec/presets.toml a new run takes (a3c/spec/preset_choice.py): a table belongs to one objective
(its ``algo``), an env's table for another objective is passed over (and said so), and an env without a table for the
run's objective takes the plain defaults of its objective and action-space family, which are tables too."""

import dataclasses

import pytest

from a3c.spec.config import Config
from a3c.spec.config_text import format_config, preset_line
from a3c.spec.errors import UserError
from a3c.spec.presets import load_presets, table_objective
from a3c.train import parse_cli, parse_config

# CleanRL's cleanrl/ppo.py per worker (4 envs x 128 steps, 4 minibatches of 128, 4 epochs), SB3's value weight 0.5
# (a3c's --vf-coef 1.0: its value loss carries a 1/2), Adam's eps 1e-5
PPO_DISCRETE = {
    "algo": "ppo",
    "envs_per_worker": 4,
    "n_steps": 128,
    "minibatch_size": 128,
    "n_epochs": 4,
    "lr": 2.5e-4,
    "lr_schedule": "linear",
    "gamma": 0.99,
    "gae_lambda": 0.95,
    "clip_range": 0.2,
    "clip_range_vf": 0.2,
    "ent_coef": 0.01,
    "vf_coef": 1.0,
    "max_grad_norm": 0.5,
    "normalize_advantage": True,
    "optimizer": "adam",
    "optimizer_eps": 1e-5,
}
# CleanRL's ppo_continuous_action.py per worker (1 env x 1024 steps; 2 workers: its 2,048), minibatches of 64
PPO_CONTINUOUS = {
    **PPO_DISCRETE,
    "envs_per_worker": 1,
    "n_steps": 1024,
    "minibatch_size": 64,
    "n_epochs": 10,
    "lr": 3e-4,
    "ent_coef": 0.0,
    "normalize_obs": True,
    "normalize_reward": True,
}
CONTINUOUS_ENV = ["--env", "envs/Spaces-v0", "--env-kwargs", "action=box"]  # Box actions, no table of its own


def _has(config: Config, settings: dict) -> bool:
    return all(getattr(config, key) == value for key, value in settings.items())


@pytest.mark.parametrize(
    ("argv", "table", "settings"),
    [
        (["--env", "envs/Classify-v0", "--algo", "ppo"], "discrete@ppo", PPO_DISCRETE),
        ([*CONTINUOUS_ENV, "--algo", "ppo"], "continuous", PPO_CONTINUOUS),
        (CONTINUOUS_ENV, "continuous", PPO_CONTINUOUS),  # continuous actions' default objective is PPO
        (["--env", "CartPole-v1", "--algo", "ppo"], "discrete@ppo", PPO_DISCRETE),  # CartPole's table is A3C's
        (["--env", "Pendulum-v1", "--algo", "ppo"], "continuous", PPO_CONTINUOUS),  # Pendulum's too
        (["--env", "CartPole-v1", "--preset", "none", "--algo", "ppo"], "discrete@ppo", PPO_DISCRETE),
    ],
)
def test_ppo_without_a_table_of_its_own_trains_on_its_plain_defaults(argv, table, settings):
    """Before: ``--algo ppo`` on an env without a PPO table failed on its own defaults ("--minibatch-size 64 is more
    than a worker's rollout") or took the env's A3C table (Pendulum: RMSprop 7e-4, gSDE, n-steps 8)."""
    config, sources, _ = parse_cli(argv)
    assert config.preset == table and table_objective(table) == "ppo"
    assert _has(config, settings), {k: getattr(config, k) for k in settings}
    assert sources["n_steps"] == "preset" and not config.gsde


def test_a3c_takes_the_plain_defaults_where_the_envs_table_is_ppos():
    """Before: ``--env LunarLander-v3 --algo a3c`` applied the PPO table (n-steps 1024, minibatches, epochs) to A3C."""
    pytest.importorskip("Box2D")
    config, sources, _ = parse_cli(["--env", "LunarLander-v3", "--algo", "a3c"])
    assert config.preset == "discrete" and config.algo == "a3c"
    defaults = Config()
    assert (config.n_steps, config.gamma, config.lr, config.n_epochs) == (
        defaults.n_steps,
        defaults.gamma,
        defaults.lr,
        defaults.n_epochs,
    )
    assert preset_line(config, sources) == (
        "a3c: preset LunarLander-v3 is for objective ppo: not applied; the plain defaults for objective a3c, "
        "discrete actions (table discrete of a3c/spec/presets.toml: the flags' defaults)"
    )


def _swap_family_default(monkeypatch, family: str) -> tuple[str, str]:
    """presets.toml's tables with ``family``'s default objective made the other one (the plain-named table and
    FAMILY@OTHER swapped, as the file itself would write it); (the new default objective, the old)."""
    from a3c.spec import presets

    tables = dict(load_presets())
    old = table_objective(family)
    (other_name,) = [name for name in tables if name.startswith(f"{family}@")]
    new = table_objective(other_name)
    tables[family], tables[f"{family}@{old}"] = tables.pop(other_name), tables[family]
    monkeypatch.setattr(presets, "load_presets", lambda: tables)
    return new, old


@pytest.mark.parametrize(
    ("family", "argv"), [("discrete", ["--env", "envs/Classify-v0"]), ("continuous", CONTINUOUS_ENV)]
)
def test_a_familys_default_objective_is_its_plain_tables(family, argv):
    """Before: the plain defaults' table was FAMILY for a3c and FAMILY@OBJ otherwise, so a family whose default is
    PPO (its plain-named table PPO's) gave ``--algo a3c`` PPO's table: "--n-epochs ... with --algo ppo only"."""
    shipped = {name: table_objective(name) for name in ("discrete", "continuous")}
    other_family = next(f for f in shipped if f != family)
    other_argv = CONTINUOUS_ENV if family == "discrete" else ["--env", "envs/Classify-v0"]
    monkeypatch = pytest.MonkeyPatch()
    try:
        new, old = _swap_family_default(monkeypatch, family)
        config, sources, _ = parse_cli(argv)
        assert (config.preset, config.algo, sources["algo"]) == (family, new, "preset")
        assert preset_line(config, sources).startswith(
            f"a3c: no preset: the plain defaults for a {family} action space, objective {new} (table {family} of"
        )
        before = parse_config([*argv, "--algo", old])
        assert (before.preset, before.algo) == (f"{family}@{old}", old)
        assert parse_config([*argv, "--algo", new]).preset == family
        assert parse_config(other_argv).preset == other_family  # the other family keeps its own
    finally:
        monkeypatch.undo()
    assert {name: table_objective(name) for name in ("discrete", "continuous")} == shipped
    assert shipped == {"discrete": "a3c", "continuous": "ppo"}  # the defaults presets.toml chose (and says why)


def test_an_envs_only_table_gives_its_objective_when_no_algo_is_given(tmp_path):
    """Before: a file whose only table for the env was ``ID@ppo`` took a3c as the run's objective and refused the
    run: "has no table for --algo None of those"."""
    file = tmp_path / "mine.toml"
    file.write_text('["CartPole-v1@ppo"]\nn-epochs = 3\nn-steps = 128\n')
    config = parse_config(["--env", "CartPole-v1", "--preset-file", str(file)])
    assert (config.preset, config.algo, config.n_epochs) == ("CartPole-v1@ppo", "ppo", 3)
    with pytest.raises(UserError, match=r"no table for --algo a3c of those.*\[\"CartPole-v1@a3c\"\]"):
        parse_config(["--env", "CartPole-v1", "--preset-file", str(file), "--algo", "a3c"])


def test_a_resumed_runs_table_gone_or_rewritten_since_is_not_described():
    """A run keeps its own config; where presets.toml has since renamed its table, or given the name to the other
    objective, the start line and --show-config describe no table rather than the wrong one (before: KeyError)."""
    config, sources, _ = parse_cli(CONTINUOUS_ENV)
    gone = dataclasses.replace(config, preset="continuous@sgd")
    assert preset_line(gone, sources) is None
    assert "table continuous@sgd" not in format_config(gone, sources)
    other = dataclasses.replace(config, preset="continuous@ppo" if config.algo == "a3c" else "continuous@a3c")
    assert preset_line(other, sources) is None


def test_the_start_line_types_an_unset_optional_number_as_none():
    """Before: "the flags given win: --clip-range-vf -", which the command line does not take back."""
    config, sources, _ = parse_cli([*CONTINUOUS_ENV, "--algo", "ppo", "--clip-range-vf", "none"])
    line = preset_line(config, sources)
    assert line.endswith("the flags given win: --clip-range-vf none"), line
    assert parse_config([*CONTINUOUS_ENV, "--algo", "ppo", *line.rpartition(": ")[2].split()]) == config


def test_the_atari_family_has_a_table_for_each_objective_and_ppo_is_the_default():
    """Before: ``--env ALE/Pong-v5 --algo ppo`` took the A3C-tuned atari table (RMSprop 7e-4, 20-step rollouts). Then
    a plain ``--env ALE/Breakout-v5`` ran A3C's table, though PPO's learned more (429.9 against 333.6 and 329.2 at 10M
    agent steps): PPO's table is now the family's own, A3C's is ``atari@a3c``."""
    pytest.importorskip("ale_py")
    config, sources, _ = parse_cli(["--env", "ALE/Pong-v5"])
    assert config.preset == "atari" and config.algo == "ppo" and sources["algo"] == "preset"
    # CleanRL's ppo_atari.py: 8 envs x 128 steps, 4 minibatches, 4 epochs, lr 2.5e-4 linear, clip 0.1, ent 0.01
    assert (config.envs_per_worker, config.n_steps, config.minibatch_size, config.n_epochs) == (8, 128, 256, 4)
    assert (config.optimizer, config.lr, config.lr_schedule, config.clip_range) == ("adam", 2.5e-4, "linear", 0.1)
    assert parse_config(["--env", "ALE/Pong-v5", "--algo", "ppo"]) == config
    a3c_config = parse_config(["--env", "ALE/Pong-v5", "--algo", "a3c"])
    assert a3c_config.preset == "atari@a3c" and a3c_config.optimizer == "rmsprop" and a3c_config.n_steps == 20
    assert parse_config(["--env", "ALE/Pong-v5", "--preset", "atari", "--algo", "a3c"]).preset == "atari@a3c"
    assert parse_config(["--env", "ALE/Pong-v5", "--preset", "atari@a3c"]) == a3c_config


def test_an_envs_own_objective_comes_with_its_table_when_no_algo_is_given():
    pytest.importorskip("Box2D")
    config, sources, _ = parse_cli(["--env", "LunarLander-v3"])
    assert config.preset == "LunarLander-v3" and config.algo == "ppo" and sources["algo"] == "preset"
    assert parse_config(["--env", "CartPole-v1"]).algo == "a3c"


def test_every_table_says_its_objective_and_a_suffix_must_agree(tmp_path):
    presets = load_presets()
    for name in presets:
        assert table_objective(name) in ("a3c", "ppo")
        assert presets[name].get("algo", "a3c") == table_objective(name), name
    assert {"discrete", "continuous", "discrete@ppo", "continuous@a3c"} <= set(presets)
    path = tmp_path / "p.toml"
    path.write_text('["X-v0@ppo"]\nalgo = "a3c"\n')
    with pytest.raises(UserError, match=r"\[X-v0@ppo\] algo = 'a3c': a table named \.\.\.@ppo is for objective ppo"):
        load_presets(path)


def test_a_preset_named_for_another_objective_is_refused():
    with pytest.raises(UserError, match="--preset CartPole-v1 is for objective a3c, not --algo ppo"):
        parse_config(["--env", "CartPole-v1", "--preset", "CartPole-v1", "--algo", "ppo"])


@pytest.mark.parametrize(
    ("preset", "algo"), [("atari@a3c", "ppo"), ("discrete@ppo", "a3c"), ("MountainCar-v0@a3c", "ppo")]
)
def test_a_preset_whose_name_says_one_objective_and_an_algo_that_says_another_are_refused(preset, algo):
    """Found by probing: --preset atari@a3c --algo ppo took the atari table (PPO's) without a word; the name says
    which objective's table is meant, as plainly as --algo does, and the two contradict each other."""
    base, own = preset.split("@")
    with pytest.raises(UserError, match=rf"--preset {preset} is the table of --algo {own}, and --algo {algo} asks for"):
        parse_config(["--env", "CartPole-v1", "--preset", preset, "--algo", algo])
    with pytest.raises(UserError, match=rf"drop --algo {algo}, or give --preset {base} \(its table"):
        parse_config(["--env", "CartPole-v1", "--preset", preset, "--algo", algo])


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["--env", "envs/Classify-v0"],
            "a3c: no preset: the plain defaults for a discrete action space, objective a3c (table discrete of "
            "a3c/spec/presets.toml: the flags' defaults)",
        ),
        (
            ["--env", "CartPole-v1", "--preset", "none"],
            "a3c: --preset none: the plain defaults for a discrete action space, objective a3c (table discrete of "
            "a3c/spec/presets.toml: the flags' defaults)",
        ),
        (
            [*CONTINUOUS_ENV, "--algo", "ppo", "--n-epochs", "3"],
            "a3c: no preset: the plain defaults for a continuous action space, objective ppo (table continuous "
            "of a3c/spec/presets.toml), sets --envs-per-worker 1 --n-steps 1024",
        ),
        (
            ["--env", "CartPole-v1", "--algo", "ppo"],
            "a3c: preset CartPole-v1 is for objective a3c: not applied; the plain defaults for objective ppo, "
            "discrete actions (table discrete@ppo of a3c/spec/presets.toml), sets --envs-per-worker 4",
        ),
    ],
)
def test_the_start_line_says_which_table_applied_and_why(argv, expected):
    config, sources, _ = parse_cli(argv)
    line = preset_line(config, sources)
    assert line.startswith(expected), line
    shown = format_config(config, sources)
    assert f"table {config.preset} from " in shown and f"(--algo {config.algo}, " in shown


OBJECTIVES = ("a3c", "ppo")


def _tables_by_env():
    """An env each table applies to (the table's own id, or one of its family's)."""
    stand_ins = {
        "atari": "ALE/Pong-v5",
        "mujoco": "HalfCheetah-v5",
        "discrete": "envs/Classify-v0",
        "continuous": "envs/Spaces-v0",
    }
    names = {name.split("@")[0] for name in load_presets()}
    return sorted((stand_ins.get(name, name), name) for name in names)


NEEDS = {"ALE/": "ale_py", "LunarLander": "Box2D", "HalfCheetah": "mujoco", "Hopper": "mujoco", "Walker2d": "mujoco"}


@pytest.mark.parametrize("native", [True, False], ids=["bf16-cpu", "no-bf16-cpu"])
@pytest.mark.parametrize("algo", OBJECTIVES)
@pytest.mark.parametrize(("env", "name"), _tables_by_env())
def test_every_table_under_both_objectives_resolves_and_types_back(env, name, algo, native, monkeypatch):
    """The combination rule: every table with the default --workers auto (or the table's own count), under each
    objective (its own table, or the family defaults of the objective it is not for), on a CPU with bfloat16
    instructions and on one without, resolves, validates, and --show-config types back."""
    from a3c.spec import cpu

    for prefix, module in NEEDS.items():
        if env.startswith(prefix):
            pytest.importorskip(module)
    monkeypatch.setattr(cpu, "native_bf16", lambda: native)
    argv = ["--env", env, "--algo", algo] + (["--env-kwargs", "action=box"] if name == "continuous" else [])
    config, sources, _ = parse_cli(argv)
    # (a3c's --workers auto, unless the table names a worker count: Walker2d-v5's PPO table runs one worker)
    assert config.workers == load_presets()[config.preset].get("workers", "auto") and config.algo == algo
    assert config.bf16 is (native and env.startswith("ALE/"))
    assert table_objective(config.preset) == algo
    typed = []
    for line in format_config(config, sources).splitlines():
        if not line.startswith("#"):
            typed += line.split()[:-1]
    assert parse_cli(typed)[0] == config
