"""The SB3 peers (scripts/sb3_runner.py): rl-zoo3's settings read from the installed package (an env's own entry, or
its other version's), CleanRL's per action space, and the command's run directory read like an a3c run's."""

import json

import pytest

pytest.importorskip("stable_baselines3")
pytest.importorskip("rl_zoo3")
yaml = pytest.importorskip("yaml")

from scripts import sb3_runner  # noqa: E402
from scripts.benchmark import curves  # noqa: E402


def zoo(algo, entry):
    data = yaml.safe_load(sb3_runner.zoo_file(algo).read_text())[entry]
    data.pop("n_timesteps")
    return data


def test_rl_zoo3_s_settings_come_from_its_installed_files():
    hp = sb3_runner.hyperparameters("a2c", "LunarLander-v3")
    assert hp == {"entry": "LunarLander-v3", **zoo("a2c", "LunarLander-v3")}
    assert hp["learning_rate"].startswith("lin_")
    hp = sb3_runner.hyperparameters("ppo", "Hopper-v5")  # rl-zoo3 names Hopper-v4: the newest version it has
    assert hp == {"entry": "Hopper-v4", **zoo("ppo", "Hopper-v4")}
    assert sb3_runner.hyperparameters("ppo", "ALE/Pong-v5")["entry"] == "atari"
    with pytest.raises(ValueError, match="no entry for Taxi-v4"):
        sb3_runner.hyperparameters("ppo", "Taxi-v4")


def test_cleanrl_s_settings_follow_the_action_space():
    discrete = sb3_runner.hyperparameters("ppo", "CartPole-v1", "cleanrl")
    assert (
        discrete["entry"] == "cleanrl/ppo.py" and discrete["n_envs"] * discrete["n_steps"] == 4 * discrete["batch_size"]
    )
    assert discrete["ent_coef"] == 0.01 and "normalize" not in discrete
    continuous = sb3_runner.hyperparameters("ppo", "Pendulum-v1", "cleanrl")
    assert continuous["entry"] == "cleanrl/ppo_continuous_action.py"
    assert (
        continuous["n_envs"] * continuous["n_steps"] == 32 * continuous["batch_size"] and continuous["n_epochs"] == 10
    )
    env, model = sb3_runner.build("ppo", "Pendulum-v1", 0, settings="cleanrl")
    assert model.n_steps == 2048 and model.batch_size == 64 and env.clip_obs == 10.0 and env.norm_reward
    assert model.learning_rate(1.0) == pytest.approx(3e-4) and model.learning_rate(0.5) == pytest.approx(1.5e-4)
    with pytest.raises(ValueError, match="PPO's"):
        sb3_runner.hyperparameters("a2c", "CartPole-v1", "cleanrl")


def test_the_command_leaves_a_run_directory_the_driver_reads(tmp_path):
    argv = ["--algo", "a2c", "--env", "CartPole-v1", "--seed", "1", "--steps", "3000", "--run-dir", str(tmp_path)]
    assert sb3_runner.main(argv) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    episodes = curves.read_episodes(tmp_path)
    assert summary["total_steps"] >= 3000 and summary["stop_reason"] == "total_steps"
    assert summary["episodes"] == len(episodes) > 10 and summary["hyperparameters"]["entry"] == "CartPole-v1"
    assert [e.step for e in episodes] == sorted(e.step for e in episodes) and episodes[-1].step <= summary[
        "total_steps"
    ]


def test_ctrl_c_stops_it_in_one_line_and_leaves_no_run_directory(tmp_path, monkeypatch, capsys):
    """The driver forwards a terminal's Ctrl-C to the peer it runs; wherever it lands (importing MuJoCo, building the
    envs, training), the peer says so in one line, exits 130 as a shell does, and writes no half run directory."""

    def interrupted(*_args, **_kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(sb3_runner, "sb3_run", interrupted)
    run_dir = tmp_path / "run"
    argv = ["--algo", "ppo", "--settings", "cleanrl", "--env", "CartPole-v1", "--seed", "1", "--steps", "3000"]
    assert sb3_runner.main([*argv, "--run-dir", str(run_dir)]) == 130
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "stopped" in err and "Traceback" not in err
    assert not run_dir.exists()
