"""python -m a3c.tune (a3c/tune/cli.py, study.py): a study in its SQLite file, a trial below the median pruned
(its run stopped early, its state in the database), a study interrupted by Ctrl-C and resumed without losing or
repeating a finished trial, the best trial's settings as a preset block --preset-file applies, and the one-line errors
(Optuna missing, a resume with other settings, a study directory in use)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from procs import Run, episodes_started, summary, wait_for

from a3c.spec.errors import install_extra, run_cli

optuna = pytest.importorskip("optuna")

# a trial of a few seconds: one serial worker, two envs, tiny evaluations
TRIAL = ["--env", "CartPole-v1", "--backend", "serial", "--workers", "1", "--envs-per-worker", "2"]
TRIAL += ["--eval-episodes", "1", "--checkpoint-every-s", "0"]


ENV = "envs/SlowCartPole-v1"  # (waits --env-kwargs latency=S a step: a trial as long as a test needs)


def tune_cmd(*flags: str) -> list[str]:
    return [sys.executable, "-m", "a3c.tune", *flags]


def load(study_dir: Path, name: str | None = None):
    return optuna.load_study(study_name=name or study_dir.name, storage=f"sqlite:///{study_dir / 'study.db'}")


def test_a_trial_below_the_median_is_pruned_its_run_stopped_early(tmp_path):
    """A study joined in its database (the way several machines share one): a finished trial that scored 1e6 at
    every evaluation is there already, so the median pruner prunes the first real trial at its first evaluation past
    the warm-up (the first third of its budget). The env waits 5 ms a step (envs/SlowCartPole-v1), so the run lasts
    ~15 s whatever the load: the evaluator (its own process) is up long before the warm-up ends. (On CartPole itself
    the 3,000 steps took less than the evaluator's start on a loaded machine: its first evaluation came at 1,200.)
    Which due steps are reported depends on how far the evaluator keeps up; what is fixed is that they are due steps,
    and that the trial is pruned at its first report past the warm-up."""
    study_dir, db = tmp_path / "study", tmp_path / "shared.db"
    storage = f"sqlite:///{db}"
    shared = optuna.create_study(study_name="shared", storage=storage, direction="maximize")
    steps = range(300, 3001, 300)  # the due steps of a 3,000-step trial with 10 evaluations
    shared.add_trial(
        optuna.trial.create_trial(value=1e6, intermediate_values={s: 1e6 for s in steps}, params={}, distributions={})
    )
    flags = ["--storage", storage, "--study-name", "shared", "--study-dir", str(study_dir), "--trials", "2"]
    flags += ["--n-startup-trials", "1", "--sampler", "random", "--total-steps", "3000", *TRIAL]
    flags += ["--env", ENV, "--env-kwargs", "latency=0.005"]
    done = subprocess.run(tune_cmd(*flags), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    trials = optuna.load_study(study_name="shared", storage=storage).get_trials()
    assert [t.state.name for t in trials] == ["COMPLETE", "PRUNED"]
    pruned = trials[1]
    reported = sorted(pruned.intermediate_values)
    assert reported and all(step % 300 == 0 for step in reported), reported  # at due steps
    assert reported[-1] > 1000 and all(step <= 1000 for step in reported[:-1]), reported  # pruned past the warm-up
    assert f"a3c.tune: trial 1 pruned at step {reported[-1]:,}" in done.stderr
    run_dir = Path(pruned.user_attrs["run_dir"])
    assert run_dir == (study_dir / "trials" / "trial-0001").resolve()
    final = summary(run_dir)
    assert final["stop_reason"] == "pruned" and final["total_steps"] < 3000  # the run stopped early
    assert len((run_dir / "eval.csv").read_text().splitlines()) >= 1 + len(reported)  # its evaluations, recorded
    assert json.loads((study_dir / "study.json").read_text())["storage"] == storage


def test_a_study_interrupted_and_resumed_keeps_its_finished_trials_and_its_best_applies(tmp_path):
    """The env waits 5 ms a step (envs/SlowCartPole-v1): a trial's 2,000 steps last ~10 s whatever the load, so the
    Ctrl-C comes while the second trial trains. (On CartPole itself its 1,000 steps took 0.3 s: the Ctrl-C came as
    its run was ending, the trial completed, and the study with it.)"""
    study_dir = tmp_path / "cartpole"
    flags = ["--study-dir", str(study_dir), "--trials", "2", "--total-steps", "2000", "--pruner", "none", *TRIAL]
    flags += ["--env", ENV, "--env-kwargs", "latency=0.005"]
    first = Run(tune_cmd(*flags), tmp_path / "first.log")
    try:
        # Ctrl-C once the second trial's run is training (the first trial has finished)
        assert wait_for(lambda: episodes_started(study_dir / "trials" / "trial-0001"), timeout=150), first.output()
        first.signal_group(signal.SIGINT)
        assert first.wait(timeout=60) == 130, first.output()
    finally:
        first.cleanup()
    out = first.output()
    assert "go on with: python -m a3c.tune --resume" in out and "Traceback" not in out
    before = load(study_dir).get_trials()
    assert [t.state.name for t in before] == ["COMPLETE", "FAIL"]  # read back from the SQLite file
    kept = (study_dir / "trials" / "trial-0000" / "summary.json").read_bytes()

    done = subprocess.run(tune_cmd("--resume", str(study_dir)), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "1 of 2 trials finished" in done.stderr
    after = load(study_dir).get_trials()
    assert [t.state.name for t in after] == ["COMPLETE", "FAIL", "COMPLETE"]
    assert after[0].value == before[0].value and after[0].datetime_complete == before[0].datetime_complete
    assert after[0].params == before[0].params
    assert (study_dir / "trials" / "trial-0000" / "summary.json").read_bytes() == kept  # its run untouched
    assert after[2].params != after[0].params  # the resumed session's sampler did not start over

    # the best trial's settings as a preset block: applied with --preset-file, they are the trial's
    from a3c.run.resolve import resolve_settings
    from a3c.spec.presets import read_presets
    from a3c.train import parse_flags

    best = max((t for t in after if t.value is not None), key=lambda t: t.value)
    assert f"a3c.tune: best: trial {best.number}" in done.stdout
    block = read_presets(study_dir / "best.toml")[ENV]
    trial_config = json.loads((Path(best.user_attrs["run_dir"]) / "config.json").read_text())
    for name, value in block.items():
        assert trial_config[name] == (list(value) if isinstance(value, tuple) else value), name
    applied = resolve_settings(
        *parse_flags(["--env", ENV, "--env-kwargs", "latency=0.005", "--preset-file", str(study_dir / "best.toml")])[:2]
    ).config.to_dict()
    differs = {k for k in applied if applied[k] != trial_config.get(k)}
    resolved_later = {"workers_auto", "input_scale", "input_shift"}  # (by resolve_run, after resolve_settings)
    assert differs <= {"run_dir", "preset_file", "start_method", "preset", *resolved_later}, differs
    assert applied["preset"] == ENV  # (the trial's run had no preset: the env has none of a3c's own)
    assert (study_dir / "plots" / "history.png").is_file() and (study_dir / "plots" / "importance.png").is_file()


def test_a_ctrl_c_as_a_trial_ends_keeps_the_trial_and_starts_no_other(tmp_path, monkeypatch, capsys):
    """The Ctrl-C of a user comes just as a trial's run finishes its steps (after its main loop, before its final
    checkpoint): the run completes (exit code 0), the trial is recorded as it ended, and the study stops there
    (exit code 130, how to go on) instead of starting the next trial as if no key had been pressed."""
    import os

    from a3c.run.trainer import Trainer
    from a3c.tune.cli import main

    supervise = Trainer._supervise

    def then_ctrl_c(self, *args):
        ended = supervise(self, *args)
        os.kill(os.getpid(), signal.SIGINT)  # (the Trainer's handler takes it: the run is still in its wrap-up)
        return ended

    monkeypatch.setattr(Trainer, "_supervise", then_ctrl_c)
    study_dir = tmp_path / "study"
    flags = ["--study-dir", str(study_dir), "--trials", "3", "--total-steps", "600", "--pruner", "none", *TRIAL]
    assert run_cli(main, flags, prog="a3c.tune") == 130
    err = capsys.readouterr().err
    assert "a3c.tune: trial 0 finished" in err and "trial 1" not in err
    assert f"go on with: python -m a3c.tune --resume {study_dir}" in err
    assert [t.state.name for t in load(study_dir).get_trials()] == ["COMPLETE"]
    assert summary(study_dir / "trials" / "trial-0000")["stop_reason"] == "total_steps"


def test_optuna_missing_is_one_line_naming_the_extra(monkeypatch, capsys):
    import a3c.tune.cli as cli

    monkeypatch.setattr(cli.importlib.util, "find_spec", lambda name: None)
    assert run_cli(cli.main, ["--env", "CartPole-v1", "--trials", "2"], prog="a3c.tune") == 2
    err = capsys.readouterr().err
    assert err == f"a3c.tune: error: python -m a3c.tune needs Optuna, which is not installed; {install_extra('tune')}\n"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--resume", "{dir}", "--lr", "0.1"], "--resume keeps the study's settings (its study.json), so --lr cannot"),
        (["--resume", "{dir}", "--space", "x.toml"], "so --space cannot be given with it"),
        (["--study-dir", "{dir}", "--trials", "2"], "is not empty; choose a new directory, or --resume"),
        (["--study-dir", "{dir}/study.json/s", "--trials", "2"], "cannot make the folder (Not a directory)"),
        (["--study-dir", "{new}", "--run-dir", "x"], "--run-dir: each trial's run directory is STUDY_DIR/trials"),
        (["--study-dir", "{new}", "--exp-name", "x"], "--exp-name: each trial's run directory is STUDY_DIR/trials"),
        (["--study-dir", "{new}", "--lr", "-1"], "--lr must be a positive number"),
        (["--resume", "{new}"], "no such directory"),
        (["--trials", "0"], "--trials must be at least 1"),
        # (found combining flags: 0 and -1 started no trial and exited 0, nan was taken)
        (["--timeout", "0"], "--timeout must be a positive number of seconds"),
        (["--timeout", "-1"], "--timeout must be a positive number of seconds"),
        (["--timeout", "nan"], "--timeout must be a positive number of seconds"),
        # a3c.tune's own flag mistyped: the suggestion is a3c.tune's, not only a3c.train's
        (["--trial", "3"], "unrecognized arguments: --trial 3 (did you mean --trials for --trial?)"),
    ],
)
def test_study_errors_are_one_line(tmp_path, capsys, argv, message):
    from a3c.tune.cli import main

    used = tmp_path / "used"
    used.mkdir()
    (used / "study.json").write_text("{}")
    argv = [a.format(dir=used, new=tmp_path / "new") for a in argv]
    assert run_cli(main, argv, prog="a3c.tune") == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not (tmp_path / "new").exists()


def test_a_study_resumed_away_from_its_relative_env_file_says_to_resume_from_where_it_started(
    tmp_path, capsys, monkeypatch
):
    """Before: each resumed trial was refused with "give --env path/to/file.py:Name-v0", which --resume refuses."""
    from a3c.tune.cli import main
    from a3c.tune.study import StudySettings

    study_dir, storage = tmp_path / "study", f"sqlite:///{tmp_path / 'study.db'}"
    study_dir.mkdir()
    train_args = ["--env", "./a3c_my_env.py:GoRight-v0", *TRIAL[2:]]
    StudySettings("study", storage, 2, train_args, space={}, space_source="space.toml").write(study_dir)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert run_cli(main, ["--resume", str(study_dir)], prog="a3c.tune") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert f"the resumed study's env file ./a3c_my_env.py is not in {elsewhere}" in err, err
    assert "resume from there, or put the file back there" in err
    assert not (tmp_path / "study.db").exists()  # the study's database not opened


def test_a_trial_whose_settings_are_refused_is_pruned_as_refused_and_the_study_goes_on(tmp_path):
    """--bf16 is refused on CartPole when the run is resolved (it is for image observations): the space checks pass
    (bf16 false is a combination the env accepts), the first trial, enqueued with bf16 true, is refused (pruned
    before any process starts, its reason recorded, not one of --trials) and the study goes on to its one complete
    trial. Before, the refused trial failed, and three in a row ended the study."""
    study_dir, storage = tmp_path / "study", f"sqlite:///{tmp_path / 'shared.db'}"
    shared = optuna.create_study(study_name="shared", storage=storage, direction="maximize")
    shared.enqueue_trial({"bf16": True})
    (tmp_path / "space.toml").write_text("bf16 = { choices = [false, true] }\n")
    flags = ["--storage", storage, "--study-name", "shared", "--study-dir", str(study_dir), "--trials", "1"]
    flags += ["--space", str(tmp_path / "space.toml"), "--sampler", "random"]
    done = subprocess.run(tune_cmd(*flags, "--total-steps", "2000", *TRIAL), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    trials = optuna.load_study(study_name="shared", storage=storage).get_trials()
    refused = [t for t in trials if "refused" in t.user_attrs]
    assert refused and refused[0].number == 0 and all(t.state.name == "PRUNED" for t in refused), done.stderr
    assert all("--bf16 is for image observations" in t.user_attrs["refused"] for t in refused)
    assert [t.state.name for t in trials if t not in refused] == ["COMPLETE"], done.stderr
    assert "a3c.tune: trial 0 refused, not counted: --bf16 is for image observations" in done.stderr
    assert f"1 complete, {len(refused)} refused" in done.stderr


def test_a_space_that_no_flag_combination_accepts_is_refused_before_the_first_trial(tmp_path, capsys):
    from a3c.tune.cli import main

    (tmp_path / "space.toml").write_text("bf16 = { choices = [true] }\n")
    flags = ["--study-dir", str(tmp_path / "study"), "--space", str(tmp_path / "space.toml"), *TRIAL]
    assert run_cli(main, flags, prog="a3c.tune") == 2
    err = capsys.readouterr().err
    assert "--bf16 is for image observations" in err and err.count("\n") == 1
    assert not (tmp_path / "study").exists()


@pytest.mark.parametrize(
    ("space", "flags"),
    [
        ("push-every = { choices = [1, 4] }\n", ["--backend", "ray", "--ray-same-node", "ray"]),
        (
            'algo = { choices = ["ppo"] }\nn-steps = { choices = [64, 128] }\n'
            "minibatch-size = { choices = [32, 64] }\n",
            [],
        ),
        (None, ["--algo", "ppo"]),
    ],
    ids=["push-every-with-ray-given", "ppo-with-its-rollout-searched", "algo-ppo-default-space"],
)
def test_a_space_valid_with_the_flags_given_starts_its_study(tmp_path, monkeypatch, capsys, space, flags):
    """Issue 55: each of these was refused before the first trial, each value of the space having been judged
    against the defaults: "add --backend ray"; "--minibatch-size 64 is more than a worker's rollout (--n-steps 5 x
    --envs-per-worker 8 ...)" twice. The study now starts (its trials are not run here)."""
    import a3c.tune.study
    from a3c.tune.cli import main

    started = []
    monkeypatch.setattr(a3c.tune.study, "optimize", lambda *args: started.append(args))
    argv = ["--env", "CartPole-v1", "--study-dir", str(tmp_path / "study"), "--trials", "1", *flags]
    if space is not None:
        (tmp_path / "space.toml").write_text(space)
        argv += ["--space", str(tmp_path / "space.toml")]
    code = run_cli(main, argv, prog="a3c.tune")
    assert code == 0 and started, capsys.readouterr().err


def test_an_image_env_s_default_space_leaves_out_the_mlp_s_settings(tmp_path, monkeypatch, capsys):
    """An image env's CNN torso takes no --hidden-sizes (a run refuses it) and is always shared: the default space
    searches neither there (their [network] table was refused in every combination), and a space of the user's
    that holds them is still refused."""
    import a3c.tune.study
    from a3c.tune.cli import main

    started = []
    monkeypatch.setattr(a3c.tune.study, "optimize", lambda *args: started.append(args))
    argv = ["--env", "envs/Catch-v0", "--study-dir", str(tmp_path / "study"), "--trials", "1"]
    assert run_cli(main, argv, prog="a3c.tune") == 0, capsys.readouterr().err
    space = json.loads((tmp_path / "study" / "study.json").read_text())["space"]
    names = {name for family in space.values() for name in family}
    assert "lr" in names and not names & {"hidden-sizes", "shared-torso"}, names
    (tmp_path / "space.toml").write_text("hidden-sizes = { choices = [[64], [128]] }\n")
    argv = ["--env", "envs/Catch-v0", "--study-dir", str(tmp_path / "own"), "--space", str(tmp_path / "space.toml")]
    assert run_cli(main, argv, prog="a3c.tune") == 2
    err = capsys.readouterr().err
    assert (
        f"--space {tmp_path / 'space.toml'}: the env refuses every combination tried (--hidden-sizes [64] is for "
        in err
    )
    assert err.rstrip().endswith("where the setting is the space's, drop it from the space, or give other flags"), err


def test_algo_ppo_on_its_default_space_runs_trials_and_refuses_what_does_not_fit(tmp_path):
    """`--algo ppo` searches PPO's default space; with 2 envs a worker some of its minibatches exceed a worker's
    rollout (--n-steps 32 x 2 envs = 64 < 128): the start line says how many combinations fit, the trials that draw
    one that does not are refused and not counted, and the study finishes its trial."""
    study_dir = tmp_path / "study"
    flags = ["--algo", "ppo", "--study-dir", str(study_dir), "--trials", "1", "--pruner", "none", *TRIAL]
    done = subprocess.run(tune_cmd(*flags, "--total-steps", "1500"), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "combinations of the space drawn at random are accepted with the flags given" in done.stderr
    trials = load(study_dir).get_trials()
    assert [t.state.name for t in trials if "refused" not in t.user_attrs] == ["COMPLETE"], done.stderr
    assert all("more than a worker's rollout" in t.user_attrs["refused"] for t in trials if "refused" in t.user_attrs)
    assert {"minibatch-size", "n-epochs", "clip-range"} <= set(trials[-1].params)


def test_trials_in_flight_in_another_process_count_toward_the_trials(tmp_path):
    """Another process's trial, running in the shared database, is one of --trials: this process finishes one more,
    not two (two processes on one study finished 8 of 7)."""
    study_dir, storage = tmp_path / "study", f"sqlite:///{tmp_path / 'shared.db'}"
    shared = optuna.create_study(study_name="shared", storage=storage, direction="maximize")
    in_flight = shared.ask()  # (RUNNING, as another process's trial would be)
    flags = ["--storage", storage, "--study-name", "shared", "--study-dir", str(study_dir), "--trials", "2"]
    done = subprocess.run(tune_cmd(*flags, "--total-steps", "2000", *TRIAL), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    trials = optuna.load_study(study_name="shared", storage=storage).get_trials()
    assert [t.state.name for t in trials] == ["RUNNING", "COMPLETE"], done.stderr
    assert trials[0].number == in_flight.number


def test_a_storage_that_cannot_be_opened_is_one_line_without_optuna_s_warnings(tmp_path):
    """Optuna's ExperimentalWarning on heartbeats printed two lines before every start, and before this one-line error.
    (In a process of its own: pytest captures warnings, so the in-process test could not see them.)"""
    argv = [sys.executable, "-m", "a3c.tune", "--study-dir", str(tmp_path / "new"), "--storage", "bogus://x"]
    done = subprocess.run([*argv, "--trials", "1"], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith("a3c.tune: error: --storage bogus://x: cannot open it"), done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert not (tmp_path / "new").exists()  # (the refused study left its empty folder behind)


@pytest.mark.parametrize("text", ["[1, 2]", '{"study_name": "s", "train_args": "--env CartPole-v1"}', "SPACE"])
def test_a_study_json_that_is_not_a3c_tunes_is_one_line_before_the_database_opens(tmp_path, capsys, text):
    """Found by probing: a list ended in an AttributeError traceback, a space that is no table in one from the first
    trial, after Optuna had made the study's database."""
    from a3c.tune.cli import main

    study = tmp_path / "study"
    study.mkdir()
    good = {
        "study_name": "s",
        "storage": f"sqlite:///{study / 'study.db'}",
        "trials": 2,
        "train_args": ["--env", "CartPole-v1"],
        "space": "garbage",
        "space_source": "x",
    }
    (study / "study.json").write_text(json.dumps(good) if text == "SPACE" else text)
    assert run_cli(main, ["--resume", str(study)], prog="a3c.tune") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot read its study.json" in err, err
    assert not (study / "study.db").exists()


def test_opening_a_study_prints_no_optuna_log_line(tmp_path):
    """Optuna logs "A new study created in RDB" (and "Using an existing study") on stderr beside a3c.tune's own line;
    a fresh process, as Optuna's log handler holds the stderr of the process that imported it."""
    code = (
        "from pathlib import Path\n"
        "from a3c.tune.study import StudySettings, open_study, sqlite_url\n"
        f"folder = Path({str(tmp_path)!r})\n"
        "settings = StudySettings(study_name='s', storage=sqlite_url(folder), trials=1, train_args=['--env', "
        "'CartPole-v1'], space={}, space_source='x', sampler='tpe', pruner='none', n_startup_trials=1, "
        "evaluations=1, seed=0)\n"
        "open_study(settings)\n"
        "open_study(settings)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0 and done.stderr == "", done.stderr
