"""The queue file (scripts/benchmark/queue.py): blocks expand to env x arm x seed runs in order, mistakes are named;
and benchmarks/queue.toml holds the runs of the learning issue's must-shows, on seeds no setting was chosen on."""

from collections import Counter
from pathlib import Path

import pytest

from scripts.benchmark import queue
from scripts.benchmark.queue import tomllib

ROOT = Path(__file__).resolve().parents[3]


def write(tmp_path, text):
    path = tmp_path / "q.toml"
    path.write_text(text)
    return path


def test_a_block_is_every_seed_env_and_arm_in_turn(tmp_path):
    path = write(
        tmp_path,
        """
[defaults]
workers = 3
[arms]
preset = ""
solo = { flags = "--algo ppo --lr 0.001", workers = "default", evaluate = 5 }
[[runs]]
name = "a block"
envs = ["CartPole-v1", "Acrobot-v1"]
arms = ["preset", "solo", "sb3-a2c"]
seeds = "7-8"
only_seeds = { sb3-a2c = [8] }
budget = 1000
threshold = 50
""",
    )
    runs = queue.load(path)
    assert [(r.seed, r.env, r.arm.name) for r in runs] == [
        (7, "CartPole-v1", "preset"),
        (7, "CartPole-v1", "solo"),
        (7, "Acrobot-v1", "preset"),
        (7, "Acrobot-v1", "solo"),
        (8, "CartPole-v1", "preset"),
        (8, "CartPole-v1", "solo"),
        (8, "CartPole-v1", "sb3-a2c"),
        (8, "Acrobot-v1", "preset"),
        (8, "Acrobot-v1", "solo"),
        (8, "Acrobot-v1", "sb3-a2c"),
    ]
    preset, solo, peer = runs[0].arm, runs[1].arm, runs[6].arm
    assert preset.effective_flags() == ("--workers", "3", "--checkpoint-every-s", "60")
    assert solo.effective_flags() == ("--algo", "ppo", "--lr", "0.001", "--checkpoint-every-s", "60")
    assert solo.evaluate == 5 and peer.peer == "sb3-a2c"
    assert {(r.budget, r.threshold, r.group) for r in runs} == {(1000, 50.0, "a block")}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[[runs]]\nenvs = ["E"]\narms = ["nope"]\nseeds = [1]\nbudget = 1', "unknown peer 'nope'"),
        ('[[runs]]\nenvs = ["E"]\narms = ["sb3-ppo"]\nseeds = "9-1"\nbudget = 1', "seeds must be"),
        ('[[runs]]\nenvs = ["E"]\narms = ["sb3-ppo"]\nseeds = [1]', "a block has envs, arms, seeds, budget"),
        ('[arms]\nsb3-ppo = ""', "is a peer's name"),
        ('[arms]\nx = { flags = "", workers = 0 }', "workers must be"),
        ("[nope]", "unknown tables"),
        ("x = ", "not TOML"),
        # found by probing: each of these ended in a traceback, or planned nonsense without a word
        ('[arms]\nx = "--lr \'3"', "No closing quotation"),
        ("defaults = 3", "defaults is a table"),
        ("runs = [1]", "runs #1 is not a"),
        ('[[runs]]\nenvs = "CartPole-v1"\narms = ["sb3-ppo"]\nseeds = [1]\nbudget = 1', "envs is a list of names"),
        ('[[runs]]\nenvs = ["E"]\narms = ["sb3-ppo"]\nseeds = [1]\nbudget = "2k"', "budget is a positive"),
        ('[[runs]]\nenvs = ["E"]\narms = ["sb3-ppo"]\nseeds = [1]\nbudget = 0', "budget is a positive"),
        ('[[runs]]\nenvs = ["E"]\narms = ["sb3-ppo"]\nseeds = [1]\nbudget = 1\nthreshold = "high"', "threshold is"),
        # found by probing: a traceback (AttributeError), and "unknown peer 'p'" for arms = "preset"
        ('[[runs]]\nenvs = ["E"]\narms = ["sb3-ppo"]\nseeds = [1]\nbudget = 1\nonly_seeds = "x"', "only_seeds is a"),
        ('[[runs]]\nenvs = ["E"]\narms = "preset"\nseeds = [1]\nbudget = 1', "arms is a list of names"),
    ],
)
def test_a_mistake_is_named(tmp_path, text, message):
    with pytest.raises(queue.QueueError, match=message):
        queue.load(write(tmp_path, text))


def test_a_queue_file_that_is_not_text_is_named(tmp_path):
    path = tmp_path / "q.toml"
    path.write_bytes(b"\xff\xfe[[runs]]")
    with pytest.raises(queue.QueueError, match="not TOML"):
        queue.load(path)


def test_the_queue_holds_the_must_shows():
    runs = queue.load(ROOT / "benchmarks" / "queue.toml")
    count = Counter((r.env, r.arm.name, r.budget) for r in runs)
    assert min(r.seed for r in runs) >= 501  # seeds no setting was chosen on
    # 1. LunarLander-v3 1M: the preset on 10 seeds, SB3's PPO (rl-zoo3) on 3 of them
    assert count["LunarLander-v3", "preset", 1_000_000] == 10 and count["LunarLander-v3", "sb3-ppo", 1_000_000] == 3
    # 2. the three robots at 1M on 3 seeds, SB3's PPO with CleanRL's settings on 1 (block 7: on Walker2d-v5's 3)
    for env in ("HalfCheetah-v5", "Hopper-v5", "Walker2d-v5"):
        assert count[env, "preset", 1_000_000] == 3 and count[env, "sb3-ppo-cleanrl", 1_000_000] >= 1
    assert count["Walker2d-v5", "sb3-ppo-cleanrl", 1_000_000] == 3
    # (block 9: Walker2d-v5's one-worker preset, the user's command: no --workers from [defaults])
    assert count["Walker2d-v5", "preset-own-workers", 1_000_000] == 3
    (own,) = {r.arm for r in runs if r.arm.name == "preset-own-workers"}
    assert "--workers" not in own.effective_flags()
    # 3. continuous control against SB3's PPO on the same 3 seeds
    for env in ("Pendulum-v1", "MountainCarContinuous-v0", "LunarLanderContinuous-v3"):
        arms = {arm: n for (e, arm, _), n in count.items() if e == env and not arm.startswith(("repeat-", "g999-"))}
        assert {"preset": 3, "sb3-ppo": 3}.items() <= arms.items() and set(arms) <= {"preset", "sb3-ppo", "preset-g999"}
    # (block 10: MountainCarContinuous-v0's preset since gamma 0.999, six times a seed)
    g999 = {arm: n for (e, arm, _), n in count.items() if e == "MountainCarContinuous-v0" and "g999" in arm}
    assert g999 == {"preset-g999": 3, **{f"g999-{k}": 3 for k in range(2, 7)}}
    # (block 8: two of them again on the same seeds, twice; MountainCarContinuous-v0, 20 s a run, five times)
    for env, times in (("MountainCarContinuous-v0", 5), ("LunarLanderContinuous-v3", 2)):
        repeats = {arm: n for (e, arm, _), n in count.items() if e == env and arm.startswith("repeat-")}
        assert repeats == {f"repeat-{k}": 3 for k in range(2, 2 + times)}
    # 4. CartPole 500k (no stop) and the Quickstart's command on 10 seeds; Acrobot and MountainCar
    assert count["CartPole-v1", "preset", 500_000] == 10 and count["CartPole-v1", "quickstart", 500_000] == 10
    (quickstart,) = {r.arm for r in runs if r.arm.name == "quickstart"}
    assert quickstart.effective_flags() == ("--stop-when-solved", "--checkpoint-every-s", "60")  # no --workers
    assert count["Acrobot-v1", "preset", 500_000] >= 3 and count["MountainCar-v0", "preset", 1_000_000] >= 3
    # 5. held out: at least two discrete and two continuous envs no presets.toml table names, against CleanRL's PPO
    tables = set(tomllib.loads((ROOT / "a3c" / "spec" / "presets.toml").read_text()))
    held = [r for r in runs if r.group.startswith("5 ")]
    envs = {r.env for r in held}
    for kind in ("discrete", "continuous"):
        assert len({r.env for r in held if r.group == f"5 held-out {kind}"}) >= 2
    assert not envs & tables and not any(e.startswith("ALE/") for e in envs)
    for env in envs:
        pairs = {(r.arm.name, r.seed, r.budget) for r in held if r.env == env}
        assert {(s, b) for a, s, b in pairs if a == "preset"} == {(s, b) for a, s, b in pairs if a == "sb3-ppo-cleanrl"}
    # 6. staleness: each estimator at 2 and 16 workers on LunarLander and Hopper, 3 seeds
    stale = [r for r in runs if r.group.startswith("6 staleness")]
    for env in ("LunarLander-v3", "Hopper-v5"):
        for target in ("--targets gae", "--targets vtrace", "--max-policy-lag"):
            for workers in ("2", "16"):
                seeds = {
                    r.seed
                    for r in stale
                    if r.env == env and target in " ".join(r.arm.flags) and r.arm.effective_flags()[-3] == workers
                }
                assert len(seeds) == 3, (env, target, workers)


@pytest.mark.parametrize(("env", "needs"), [("LunarLander-v3", "Box2D"), ("Hopper-v5", "mujoco")])
def test_the_staleness_lag_limit_is_one_update_of_the_envs_preset(env, needs):
    """--max-policy-lag counts the other workers' optimizer steps since a rollout acted; at 2 workers every rollout
    already waits out about one update of the other, so the limit arm is one update (minibatches x epochs) of the
    env's preset. Before: 4 steps, which would have dropped every minibatch."""
    pytest.importorskip(needs)
    from a3c.train import parse_config

    config = parse_config(["--env", env])
    update = config.envs_per_worker * config.n_steps // config.minibatch_size * config.n_epochs
    runs = [r for r in queue.load(ROOT / "benchmarks" / "queue.toml") if r.group.startswith("6 staleness")]
    limits = set()
    for run in runs:
        if run.env == env and "--max-policy-lag" in run.arm.flags:
            limits.add(int(run.arm.flags[run.arm.flags.index("--max-policy-lag") + 1]))
    assert limits == {update}
