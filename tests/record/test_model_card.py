"""a3c.record.model_card: the run directory's README.md, written at the end of a run and rewritten by python -m
a3c.evaluate: Hugging Face's front matter (library_name, tags, model-index with the env and the mean_reward), the run's
facts, the settings that differ from the preset (or the plain defaults), how to load and use it."""

from __future__ import annotations

import json

import pytest

import a3c
from a3c.evaluate import main as evaluate_main
from a3c.record.model_card import model_card, write_model_card
from a3c.spec.config import Config


def front_matter(text: str) -> dict:
    yaml = pytest.importorskip("yaml")
    assert text.startswith("---\n")
    head, _, _ = text[4:].partition("\n---\n")
    return yaml.safe_load(head)


def a_run_dir(tmp_path, config: Config, summary: dict | None = None, eval_rows: list[str] | None = None):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({**config.to_dict(), "run_dir": str(run)}))
    if summary is not None:
        (run / "summary.json").write_text(json.dumps(summary))
    if eval_rows is not None:
        header = "global_step,mean_return,std_return,mean_length,min_return,max_return,episodes,eval_s,wall_time\n"
        (run / "eval.csv").write_text(header + "".join(row + "\n" for row in eval_rows))
    return run


SUMMARY = {
    "env": "CartPole-v1",
    "workers": 2,
    "total_steps": 30_040,
    "wall_time_s": 31.5,
    "training_time_s": 25.0,
    "steps_per_s": 1201.6,
    "episodes": 812,
    "mean_return_100": 187.25,
    "stop_reason": "total_steps",
}


def test_the_card_has_hugging_faces_front_matter_and_the_runs_facts(tmp_path):
    config = Config(env="CartPole-v1", preset="CartPole-v1", total_steps=30_000, lr_schedule="linear", ent_coef=0.0)
    rows = ["10000,120.5,30.25,120.5,80,170,10,0.5,9.0", "30000,487.5,12.5,487.5,460,500,10,1.5,30.0"]
    text = model_card(a_run_dir(tmp_path, config, SUMMARY, rows))
    meta = front_matter(text)
    assert meta["library_name"] == "a3c"
    assert meta["tags"][:2] == ["CartPole-v1", "reinforcement-learning"] and "a3c" in meta["tags"]
    (entry,) = meta["model-index"]
    (result,) = entry["results"]
    assert result["task"]["type"] == "reinforcement-learning"
    assert result["dataset"] == {"name": "CartPole-v1", "type": "CartPole-v1"}
    assert result["metrics"] == [
        {"type": "mean_reward", "value": "487.50 +/- 12.50", "name": "mean_reward", "verified": False}
    ]  # eval.csv's last evaluation, as huggingface_sb3 writes the metric
    assert "| Environment | `CartPole-v1` |" in text
    assert "| Objective | a3c: A3C's actor-critic loss, one gradient a rollout |" in text
    assert "| Budget | 30,000 steps (--total-steps); 30,040 run |" in text
    assert "| Workers | 2 × 8 envs |" in text
    assert "| Wall time | 31.5 s (training 25.0 s, 1,202 steps/s) |" in text
    assert "| Final training return | 187.25: mean return of the last 100 episodes (812 episodes) |" in text
    assert "**487.50 ± 12.50** over 10 episodes: the last evaluation during training (weights of step 30,000" in text
    # the preset sets total_steps 500k and the linear schedule: only what the run changed is listed
    assert "## Settings that differ from preset CartPole-v1 (presets.toml) over the defaults" in text
    assert "| `--total-steps` | 30000 | 500000 |\n| `--ent-coef` | 0.0 | 0.01 |\n\n" in text
    assert "--lr-schedule" not in text.split("## Settings")[1].split("## Use it")[0]
    assert f'agent = a3c.load("{tmp_path / "run"}")' in text and "evaluate_policy(agent, env" in text
    assert f"python -m a3c.export {tmp_path / 'run'} --format onnx" in text


def test_a_bf16_runs_card_gives_the_export_that_takes_it(tmp_path):
    """Found by a probing review: the card of a --bf16 run (every atari preset run on a CPU with bfloat16
    instructions) gave `--format onnx  # or torchscript`, and a3c.export refuses ONNX for a bf16 agent."""
    config = Config(env="ALE/Pong-v5", preset="atari", algo="ppo", bf16=True)
    text = write_model_card(a_run_dir(tmp_path, config, SUMMARY)).read_text()
    assert f"python -m a3c.export {tmp_path / 'run'} --format torchscript" in text
    assert "--format onnx" not in text


def test_hugging_face_reads_the_cards_result(tmp_path):
    hub = pytest.importorskip("huggingface_hub")
    config = Config(env="ALE/Pong-v5", preset="atari", algo="ppo")
    card = write_model_card(a_run_dir(tmp_path, config, SUMMARY, ["100,-20.5,0.5,800,-21,-20,2,3.0,50.0"]))
    data = hub.ModelCard.load(card).data
    assert data.library_name == "a3c" and "ALE/Pong-v5" in data.tags and "ppo" in data.tags
    (result,) = data.eval_results
    assert (result.task_type, result.dataset_type, result.metric_type) == (
        "reinforcement-learning",
        "ALE/Pong-v5",
        "mean_reward",
    )
    assert result.metric_value == "-20.50 +/- 0.50"


def test_a_run_not_evaluated_has_no_result_and_says_how_to_get_one(tmp_path):
    config = Config(env="Acrobot-v1", preset=None, hidden_sizes=(32, 32), seed=7)
    text = model_card(a_run_dir(tmp_path, config, {**SUMMARY, "stop_reason": "solved"}))
    assert "model-index" not in front_matter(text)
    assert "| Evaluation | not evaluated yet: `python -m a3c.evaluate` on this directory scores it" in text
    assert "(stopped: solved)" in text and "| Seed | 7 |" in text
    assert "## Settings that differ from the plain defaults (no preset)" in text
    assert "| `--hidden-sizes` | 32 32 | 64 64 |" in text


def test_a_run_with_the_presets_settings_says_so(tmp_path):
    text = model_card(a_run_dir(tmp_path, Config(env="CartPole-v1", preset="CartPole-v1", lr_schedule="linear")))
    assert "None: the run trained with them as they are." in text
    assert "| Wall time | - |" in text and "| Final training return | - |" in text  # (no summary.json yet)


@pytest.fixture(scope="module")
def short_run(tmp_path_factory):
    """A short CartPole run that evaluates during training (2 episodes at steps 2,000 and 4,000)."""
    run_dir = tmp_path_factory.mktemp("card") / "run"
    a3c.train(
        env="CartPole-v1",
        backend="serial",
        workers=1,
        envs_per_worker=4,
        total_steps=4000,
        eval_every=2000,
        eval_episodes=2,
        checkpoint_every=0,
        run_dir=str(run_dir),
    )
    return run_dir


def test_a_run_writes_its_card_at_the_end(short_run):
    text = (short_run / "README.md").read_text()
    summary = json.loads((short_run / "summary.json").read_text())
    last = (short_run / "eval.csv").read_text().splitlines()[-1].split(",")
    metric = front_matter(text)["model-index"][0]["results"][0]["metrics"][0]["value"]
    assert metric == f"{float(last[1]):.2f} +/- {float(last[2]):.2f}"
    assert f"{summary['mean_return_100']:.2f}: mean return of the last 100 episodes" in text
    assert f"{summary['total_steps']:,} run" in text
    assert "| `--eval-every` | 2000 | 50000 |" in text and "| `--workers` | 1 | auto |" in text


def test_a3c_evaluate_rewrites_the_card_with_its_result(short_run, tmp_path, capsys):
    assert evaluate_main([str(short_run), "--episodes", "3", "--json", str(tmp_path / "e.json")]) == 0
    result = json.loads((tmp_path / "e.json").read_text())
    text = (short_run / "README.md").read_text()
    metric = front_matter(text)["model-index"][0]["results"][0]["metrics"][0]["value"]
    assert metric == f"{result['mean_return']:.2f} +/- {result['std_return']:.2f}"
    assert "over 3 episodes: python -m a3c.evaluate of checkpoints/latest.pt" in text
    assert f"a3c: wrote {short_run / 'README.md'} (the model card, with this evaluation)" in capsys.readouterr().err

    # a variant of the env: its score is not the card's env's
    before = text
    argv = [str(short_run), "--episodes", "1", "--env-kwargs", "max_episode_steps=20", "--json", str(tmp_path / "v")]
    assert evaluate_main(argv) == 0
    assert (short_run / "README.md").read_text() == before
    assert "README.md left as it was: --env-kwargs plays a variant" in capsys.readouterr().err


def test_a_run_directory_that_cannot_be_written_is_evaluated_with_a_warning(short_run, tmp_path, capsys, monkeypatch):
    def refuse(path, write, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("a3c.record.model_card.atomic_write", refuse)
    assert evaluate_main([str(short_run), "--episodes", "1", "--json", str(tmp_path / "e.json")]) == 0
    err = capsys.readouterr().err
    assert f"a3c: warning: {short_run / 'README.md'} not updated (Permission denied)" in err
    assert json.loads((tmp_path / "e.json").read_text())["episodes"] == 1  # (the result itself is written)
