"""a3c.spec.config_text: the lines a new run prints about its settings (here: a budget below one round of rollouts)."""

import dataclasses

from a3c.spec.config import Config
from a3c.spec.config_text import lag_limit_note, no_evaluation_note, overshoot_note
from a3c.spec.preset_choice import DEFAULT, FLAG, PRESET


def test_a_budget_below_one_round_of_rollouts_is_noted_with_the_steps_the_run_will_take():
    """Found combining flags: LunarLander-v3's preset (4 envs x 1,024 steps a worker) with --total-steps 1000 ran
    4,096 steps, and --n-steps 100000 with --total-steps 500 ran 100,000, said only at the end."""
    config = dataclasses.replace(Config(), workers=2, envs_per_worker=4, n_steps=1024, total_steps=1000)
    note = overshoot_note(config)
    assert note is not None and "\n" not in note
    assert note.startswith("a3c: note: ") and "8,192 steps" in note and "--total-steps 1,000" in note
    assert overshoot_note(dataclasses.replace(config, total_steps=8192)) is None
    assert overshoot_note(dataclasses.replace(config, total_steps=1_000_000)) is None


def test_it_is_said_once_a_run_s_worker_count_is_known(capsys):
    from a3c.run.resolve import resolve_run

    values = {f.name: getattr(Config(), f.name) for f in dataclasses.fields(Config)}
    values.update(env="CartPole-v1", workers=2, envs_per_worker=8, n_steps=100, total_steps=500, eval_every=0)
    resolve_run(values, {"env", "workers", "envs_per_worker", "n_steps", "total_steps", "eval_every"})
    assert "a3c: note: one round of rollouts is at least 1,600 steps" in capsys.readouterr().err


def test_an_evaluation_period_past_the_budget_is_noted():
    """Found reading the code: the Atari preset's --eval-every 250000 with --total-steps 100000 ran no evaluation
    (no eval.csv, no checkpoints/best.pt) without a word. Said at the start where the period was asked for (a flag or
    a preset); the default's is not (a short run of the defaults is a smoke test)."""
    config = Config(env="ALE/Pong-v5", eval_every=250_000, total_steps=100_000)
    for source in (FLAG, PRESET):
        note = no_evaluation_note(config, {"eval_every": source})
        assert note is not None and "\n" not in note and note.startswith("a3c: note: --eval-every 250,000"), note
        assert "--total-steps 100,000" in note and "evaluates nothing" in note
    assert no_evaluation_note(config, {"eval_every": DEFAULT}) is None
    assert no_evaluation_note(dataclasses.replace(config, total_steps=250_000), {"eval_every": FLAG}) is None
    assert no_evaluation_note(dataclasses.replace(config, eval_episodes=0), {"eval_every": PRESET}) is None


def test_an_evaluation_period_given_with_no_episodes_is_noted():
    """Found reading the code: --eval-every 5000 --eval-episodes 0 evaluated nothing without a word. A preset's
    --eval-every with --eval-episodes 0 is how a user turns the preset's evaluation off: no note then."""
    config = Config(env="CartPole-v1", eval_every=5_000, eval_episodes=0, total_steps=100_000)
    note = no_evaluation_note(config, {"eval_every": FLAG, "eval_episodes": FLAG})
    assert note == (
        "a3c: note: --eval-every 5,000 with --eval-episodes 0: the run evaluates nothing (no eval.csv, no "
        "checkpoints/best.pt); give --eval-episodes N to evaluate"
    )
    assert no_evaluation_note(config, {"eval_every": PRESET, "eval_episodes": FLAG}) is None
    assert no_evaluation_note(dataclasses.replace(config, eval_every=0), {"eval_every": FLAG}) is None


def test_a_resumed_runs_next_evaluation_past_the_budget_is_noted():
    """Found by probing: --resume RUN --eval-every 50000 --total-steps 12000 at step 9,070 evaluated nothing, without
    the note a new run prints: the test asked whether the first evaluation (at --eval-every) lay past the budget, not
    the next one after the step the run goes on from."""
    config = Config(env="CartPole-v1", eval_every=5_000, total_steps=12_000)
    assert no_evaluation_note(config, {"eval_every": FLAG}, step=9_070) is None  # the next, 10,000: within
    note = no_evaluation_note(dataclasses.replace(config, eval_every=50_000), {"eval_every": FLAG}, step=9_070)
    assert note is not None and "next evaluation would be at step 50,000, past --total-steps 12,000" in note, note
    note = no_evaluation_note(config, {"eval_every": FLAG}, step=10_500)  # the next, 15,000: past the budget
    assert note is not None and "at step 15,000" in note and "\n" not in note


def test_a_lag_limit_that_can_drop_nothing_is_noted():
    """--max-policy-lag counts the other workers' optimizer steps since a rollout acted: with one worker (typed, or
    chosen by --workers auto after the settings were checked) or the serial backend there are none. A note, not a
    refusal (a reviewer found the refusal, made before auto chose 1, refusing the run's own resume later)."""
    lagged = Config(env="CartPole-v1", algo="ppo", max_policy_lag=100, workers=1)
    note = lag_limit_note(lagged)
    assert note is not None and "\n" not in note and "this run has 1 worker: it drops nothing" in note
    serial = dataclasses.replace(lagged, workers=2, backend="serial")
    assert "under --backend serial" in (lag_limit_note(serial) or "")
    assert lag_limit_note(dataclasses.replace(lagged, workers=2)) is None
    assert lag_limit_note(dataclasses.replace(lagged, max_policy_lag=0)) is None


def test_recurrent_ppo_minibatches_of_another_size_than_asked_are_noted():
    """Found in review: with --lstm a PPO minibatch is whole envs' rollouts, --minibatch-size // --n-steps envs (at
    least one), so Pendulum-v1's preset (1 env x 1,024 steps, minibatches of 64) trained one minibatch of 1,024 an
    epoch, 16 times fewer steps than asked, unsaid."""
    from a3c.spec.config_text import recurrent_minibatch_note

    config = Config(env="Pendulum-v1", algo="ppo", lstm=64, n_steps=1024, envs_per_worker=1, minibatch_size=64)
    note = recurrent_minibatch_note(config)
    assert note is not None and "\n" not in note, note
    assert note.startswith("a3c: note: with --lstm a PPO minibatch is whole envs' rollouts (--n-steps 1024 samples")
    assert "--minibatch-size 64 with 1 env a worker takes 1 env a minibatch (1,024 samples), 1 minibatch an" in note
    fits = dataclasses.replace(config, n_steps=128, envs_per_worker=4, minibatch_size=256)  # 2 envs: as asked
    assert recurrent_minibatch_note(fits) is None
    # the groups a3c.learn.objectives.ppo's split makes (found in review: the note rounded otherwise, and a multiple
    # of --n-steps that does not divide the envs got none)
    for envs, size, said in [
        (3, 300, "takes 3 envs a minibatch (384 samples), 1 minibatch an epoch"),
        (3, 256, "takes 3 envs a minibatch (384 samples), 1 minibatch an epoch"),
        (5, 256, "takes 2-3 envs a minibatch (256-384 samples), 2 minibatches an epoch"),
    ]:
        note = recurrent_minibatch_note(dataclasses.replace(fits, envs_per_worker=envs, minibatch_size=size)) or ""
        assert said in note, (envs, size, note)
    assert recurrent_minibatch_note(dataclasses.replace(config, lstm=0)) is None
    assert recurrent_minibatch_note(dataclasses.replace(config, algo="a3c", minibatch_size=64)) is None
