"""--workers auto: the choice from injected timings (CPU-bound, I/O-bound, capped, noisy), the hint for a count above
what helps, the measurement on envs of known cost, and config.json recording the choice and its reason."""

import dataclasses
import json
import math
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from a3c.run import workers_auto
from a3c.run.resolve import preflight
from a3c.run.workers_auto import Timings, choose, hint, measure, memory_cap, resolve_workers
from a3c.spec.config import Config

# a worker's model costs as measured on the 2-core CI machine (K=8, n=5): ~0.2 ms per acting forward, ~1 ms an update
ACT, UPDATE = 0.0002, 0.001


def test_cpu_bound_env_gets_one_worker_per_core():
    choice = choose(Timings(5e-5, 0.0, ACT, UPDATE), cores=4, n_steps=5, envs_per_worker=8, cap=1000)
    assert choice.workers == 4 and choice.busy == 1.0
    assert "one per core" in choice.reason and "\n" not in choice.reason


def test_noise_does_not_add_a_worker_to_a_cpu_bound_env():
    # 5% of a CPU-bound step measured as off the CPU (noise): still one per core
    choice = choose(Timings(1e-3, 5e-5, ACT, UPDATE), cores=2, n_steps=5, envs_per_worker=8, cap=1000)
    assert choice.workers == 2


def test_slow_io_bound_env_gets_many_workers_per_core():
    # the tutorial's case: 10 ms a step, nearly all of it waiting
    choice = choose(Timings(2e-4, 0.01, ACT, UPDATE), cores=2, n_steps=5, envs_per_worker=8, cap=1000)
    cycle_cpu = 5 * (8 * 2e-4 + ACT) + UPDATE
    cycle_wall = cycle_cpu + 5 * 8 * 0.01
    estimate = 2 / (cycle_cpu / cycle_wall)  # workers that keep 2 cores busy by the cost model
    assert choice.workers == 2 + round((estimate - 2) * workers_auto.WAITING_HEADROOM)  # headroom on the extra ones
    assert 50 < choice.workers < 400
    assert "keep 2 cores busy" in choice.reason


def test_more_waiting_means_more_workers():
    counts = [
        choose(Timings(1e-4, blocked, ACT, UPDATE), cores=2, n_steps=5, envs_per_worker=8, cap=10**6).workers
        for blocked in (0.0, 1e-4, 1e-3, 1e-2)
    ]
    assert counts == sorted(counts) and counts[0] == 2 and counts[-1] > 10 * counts[1]


def test_the_cap_limits_the_count_and_says_so():
    choice = choose(Timings(2e-4, 0.01, ACT, UPDATE), cores=2, n_steps=5, envs_per_worker=8, cap=20)
    assert choice.workers == 20 and choice.wanted > 20 and "capped at 20" in choice.reason


# --- the run's budget, a fixed ceiling and the cap: what the count may not exceed -----------------------------------

# the run: envs/SlowCartPole-v1 --env-kwargs latency=0.01 (10 ms a step, nearly all of it asleep), 8 envs a
# worker, n-steps 5, 30,000 steps on 2 cores, workers started by the fork server (~0.1 s each)
SLOW = Timings(6e-5, 0.01, ACT, UPDATE)


def _worker_rate(timings: Timings, n_steps: int, envs: int) -> float:
    """Steps/s of one worker alone, by the cost model of the module docstring (a rollout's wall time)."""
    wall = n_steps * (envs * (timings.env_cpu_s + timings.env_blocked_s) + timings.act_s) + timings.update_s
    return n_steps * envs / wall


def test_a_short_run_of_a_slow_env_gets_the_workers_its_budget_repays_and_says_so():
    """The issue's case: 359 workers on 2 cores for 30,000 steps took 440 s against 21 s for 16. Each worker more
    saves the run less training time than its start-up costs past the budget's bound; the line says which bound held."""
    unbounded = choose(SLOW, cores=2, n_steps=5, envs_per_worker=8, cap=10**6)
    assert unbounded.workers > 300  # what the env alone asks for (the throughput bound, with its headroom)
    choice = choose(SLOW, cores=2, n_steps=5, envs_per_worker=8, cap=10**6, total_steps=30_000, start_s=0.1)
    assert 16 <= choice.workers <= 80 and choice.binding == "budget"
    assert "30,000 steps" in choice.reason and f"{choice.workers} workers on 2 cores" in choice.reason
    assert "\n" not in choice.reason
    # a long run of the same env repays many more start-ups: the throughput bound (or the ceiling) holds instead
    long = choose(SLOW, cores=2, n_steps=5, envs_per_worker=8, cap=10**6, total_steps=50_000_000, start_s=0.1)
    assert long.workers > choice.workers and long.binding != "budget"


def test_auto_weighs_the_run_s_total_steps_and_the_start_method(monkeypatch):
    """--workers auto for the issue's run: its --total-steps and its workers' start-up enter the choice (measured
    timings injected: the issue's machine measured the env at ~10 ms a step, 99% asleep)."""
    monkeypatch.setattr(workers_auto, "measure", lambda config, spec: (SLOW, 0.0))
    config = Config(env="envs/SlowCartPole-v1", env_kwargs={"latency": 0.01}, total_steps=30_000)
    choice = workers_auto.auto_choice(config, preflight(config), cores=2)
    assert choice.workers <= 80, choice.reason
    assert "30,000 steps" in choice.reason
    longer = workers_auto.auto_choice(dataclasses.replace(config, total_steps=3_000_000), preflight(config), cores=2)
    assert longer.workers > choice.workers


def test_a_resumed_run_weighs_the_steps_it_has_left(monkeypatch):
    """--workers auto on a resumed run: only the steps left repay the workers' start-ups (before: the whole
    --total-steps, so a run resumed near its end took the count of a fresh one)."""
    monkeypatch.setattr(workers_auto, "measure", lambda config, spec: (SLOW, 0.0))
    config = Config(env="envs/SlowCartPole-v1", env_kwargs={"latency": 0.01}, total_steps=3_000_000)
    fresh = workers_auto.auto_choice(config, preflight(config), cores=2)
    near_end = workers_auto.auto_choice(config, preflight(config), cores=2, steps_done=2_970_000)
    assert near_end.workers < fresh.workers and "30,000 steps to run" in near_end.reason
    assert (
        near_end.workers
        == workers_auto.auto_choice(dataclasses.replace(config, total_steps=30_000), preflight(config), cores=2).workers
    )
    lines = []
    resolved = resolve_workers(config, preflight(config), log=lines.append, steps_done=2_970_000)
    assert resolved.workers == near_end.workers and "30,000 steps to run" in lines[0]


def test_a_fixed_ceiling_per_core_holds_whatever_the_env_asks_for():
    asleep = Timings(1e-5, 1.0, ACT, UPDATE)  # a second a step: the env alone would ask for thousands a core
    choice = choose(asleep, cores=2, n_steps=5, envs_per_worker=8, cap=10**6, total_steps=10**9, start_s=0.1)
    assert choice.workers == 2 * workers_auto.MAX_WORKERS_PER_CORE and choice.binding == "ceiling"
    assert f"the ceiling of {workers_auto.MAX_WORKERS_PER_CORE} workers a core" in choice.reason


def test_a_worker_s_start_up_is_its_launch_or_its_own_cpu_over_the_cores():
    # the fork server launches a worker in about 0.1 s; spawn's worker imports torch itself (seconds of a core)
    assert workers_auto.start_up_s("forkserver", cores=2) == pytest.approx(0.1, rel=0.5)
    assert workers_auto.start_up_s("spawn", cores=2) > 5 * workers_auto.start_up_s("forkserver", cores=2)
    assert workers_auto.start_up_s("spawn", cores=64) < workers_auto.start_up_s("spawn", cores=2)


timings_st = st.builds(
    Timings,
    env_cpu_s=st.floats(1e-6, 0.1),
    env_blocked_s=st.floats(0.0, 2.0),
    act_s=st.floats(1e-6, 0.01),
    update_s=st.floats(1e-6, 0.5),
)


@given(
    timings=timings_st,
    cores=st.integers(1, 256),
    n_steps=st.integers(1, 2048),
    envs=st.integers(1, 64),
    cap=st.integers(1, 10**5),
    total_steps=st.integers(1, 10**10),
    start_s=st.floats(1e-3, 10.0),
)
def test_the_choice_never_exceeds_the_cap_the_ceiling_or_what_the_budget_repays(
    timings, cores, n_steps, envs, cap, total_steps, start_s
):
    choice = choose(timings, cores, n_steps, envs, cap, total_steps=total_steps, start_s=start_s)
    w = choice.workers
    assert 1 <= w <= cap and w <= workers_auto.MAX_WORKERS_PER_CORE * cores
    if w > 1:  # the last worker added saves at least what its start-up costs the run
        rate = _worker_rate(timings, n_steps, envs)
        saved = total_steps / (rate * (w - 1)) - total_steps / (rate * w)
        assert saved >= start_s * (1 - 1e-9)
    assert choice.binding in ("env", "budget", "ceiling", "cap") and "\n" not in choice.reason


def test_memory_cap():
    # half of 3200 MB over 32 MB a worker (fork) + 0 MB of envs
    assert memory_cap("fork", 0.0, available_mb=3200) == min(50, memory_cap("fork", 0.0, available_mb=10**9))
    assert memory_cap("spawn", 0.0, available_mb=3200) == 8
    assert memory_cap("fork", 0.0, available_mb=1) == 1  # never zero


def test_hint_only_well_above_what_helps():
    cpu_bound = choose(Timings(5e-5, 0.0, ACT, UPDATE), cores=2, n_steps=5, envs_per_worker=8, cap=1000)
    message = hint(16, cpu_bound)
    assert message is not None and "--workers 16" in message and "2 keep the 2 cores busy" in message
    assert "\n" not in message
    assert hint(2, cpu_bound) is None and hint(3, cpu_bound) is None
    io_bound = choose(Timings(2e-4, 0.01, ACT, UPDATE), cores=2, n_steps=5, envs_per_worker=8, cap=1000)
    assert hint(16, io_bound) is None  # 16 workers do help a slow env


def _fake_choice(config, spec, cores=None, steps_done=0):
    return choose(Timings(5e-5, 0.0, ACT, UPDATE), cores or 2, config.n_steps, config.envs_per_worker, cap=1000)


def test_resolve_records_the_choice(monkeypatch):
    monkeypatch.setattr(workers_auto, "auto_choice", _fake_choice)
    lines = []
    config = Config()
    assert config.workers == "auto"  # the default
    resolved = resolve_workers(config, preflight(config), log=lines.append)
    assert resolved.workers == 2 and resolved.workers_auto["reason"] == lines[0].removeprefix("a3c: --workers auto: ")
    assert len(lines) == 1 and resolved.workers_auto["timings"]["update_s"] == UPDATE


def test_serial_backend_says_its_workers_take_turns_in_one_process(monkeypatch):
    """Issue 27: --backend serial printed "2 workers on 2 cores: one per core", though everything runs in one
    process."""
    monkeypatch.setattr(workers_auto, "auto_choice", _fake_choice)
    lines = []
    config = Config(backend="serial")
    resolved = resolve_workers(config, preflight(config), log=lines.append)
    assert resolved.workers == 2 and len(lines) == 1
    assert "taking turns in this one process (--backend serial" in lines[0] and "one per core" not in lines[0]


def test_resolve_hints_at_a_user_count_above_what_helps(monkeypatch):
    monkeypatch.setattr(workers_auto, "auto_choice", _fake_choice)
    monkeypatch.setattr(workers_auto, "usable_cores", lambda: 2)
    lines = []
    config = Config(workers=16)
    assert resolve_workers(config, preflight(config), log=lines.append) is config  # kept, not refused
    assert len(lines) == 1 and lines[0].startswith("a3c: hint: --workers 16")
    lines.clear()
    resolve_workers(Config(workers=2), preflight(config), log=lines.append)
    assert lines == []


def test_measure_tells_waiting_from_computing():
    """A sleeping env measures as off-CPU time, a busy-looping one as CPU time."""
    sleep = Config(env="envs/SlowCartPole-v1", env_kwargs={"latency": 0.004}, envs_per_worker=2)
    timings, _ = measure(sleep, preflight(sleep))
    # (no upper bounds on times: a busy machine makes CPU time longer too; what is measured is which kind of time)
    assert timings.env_blocked_s > 0.0035 and timings.env_cpu_s < 0.5 * timings.env_blocked_s
    cpu = Config(env="envs/SlowCartPole-v1", env_kwargs={"latency": 0.002, "mode": "cpu"}, envs_per_worker=2)
    timings, _ = measure(cpu, preflight(cpu))
    assert timings.env_cpu_s > 0.0018 and timings.env_blocked_s < 0.5 * timings.env_cpu_s
    assert all(math.isfinite(t) and t > 0 for t in (timings.act_s, timings.update_s))


@pytest.mark.parametrize("shared_torso", [False, True])  # one LSTM core, or one per network (actor and critic)
def test_measure_times_an_lstm_model_as_the_worker_calls_it(shared_torso, monkeypatch):
    """--lstm under --workers auto: the model is timed with its recurrent state (it raised IndexError without one).
    What is timed is the LSTM's path (its core stepped with an (h, c) state per core, for the K envs), and the
    times are real durations; how long they are depends on the machine, so no bound is asserted."""
    from a3c.learn.model import ActorCritic

    real, states = ActorCritic._core_step, []

    def core_step(self, features, value_features, state):
        states.append(tuple(s.shape for s in state))
        return real(self, features, value_features, state)

    monkeypatch.setattr(ActorCritic, "_core_step", core_step)
    config = Config(lstm=8, shared_torso=shared_torso, envs_per_worker=2, n_steps=3)
    timings, _ = measure(config, preflight(config))
    assert states and set(states) == {((2, 8),) * (2 if shared_torso else 4)}  # (h, c) per core, K = 2 envs
    assert all(math.isfinite(t) and t > 0 for t in (timings.act_s, timings.update_s))


def test_lstm_trains_under_workers_auto_from_the_command_line(tmp_path):
    """`--lstm 32` without --workers (the default auto) trains and exits 0."""
    run_dir = tmp_path / "run"
    cmd = [sys.executable, "-m", "a3c.train", "--env", "CartPole-v1", "--lstm", "32", "--envs-per-worker", "2"]
    cmd += ["--total-steps", "400", "--eval-every", "0", "--run-dir", str(run_dir)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "a3c: --workers auto:" in proc.stderr and "Traceback" not in proc.stderr
    config = json.loads((run_dir / "config.json").read_text())
    assert config["lstm"] == 32 and config["workers_auto"]["workers"] == config["workers"]


def test_config_json_records_auto_and_the_resolved_settings(tmp_path):
    run_dir = tmp_path / "run"
    cmd = [
        sys.executable,
        "-m",
        "a3c.train",
        "--envs-per-worker",
        "2",
        "--total-steps",
        "400",
        "--run-dir",
        str(run_dir),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    config = json.loads((run_dir / "config.json").read_text())
    assert isinstance(config["workers"], int) and config["workers"] >= 1
    assert config["workers_auto"]["workers"] == config["workers"]
    assert f"a3c: --workers auto: {config['workers_auto']['reason']}" in proc.stderr
    assert config["run_dir"] == str(run_dir) and config["start_method"] in ("fork", "forkserver", "spawn")
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["workers"] == config["workers"]


@pytest.mark.parametrize(
    "env, lstm, algo, path",
    [
        ("CartPole-v1", 0, "a3c", "mlp"),
        ("CartPole-v1", 8, "a3c", "reference"),
        ("CartPole-v1", 0, "ppo", "mlp"),
        ("CartPole-v1", 8, "ppo", "reference"),
    ],
)
def test_measure_times_the_update_path_the_worker_will_run(env, lstm, algo, path, monkeypatch):
    """--workers auto times the update as the worker runs it: the path a3c.learn.update.paths chooses for the
    objective (its acting passes, then the learn loop), not a stand-in."""
    import a3c.learn.update.paths

    chosen = []
    real = a3c.learn.update.paths.choose

    def choose(*args):
        chosen.append(real(*args).path.name)
        return real(*args)

    monkeypatch.setattr(a3c.learn.update.paths, "choose", choose)
    config = Config(env=env, lstm=lstm, envs_per_worker=2, n_steps=3, algo=algo, minibatch_size=2, n_epochs=5)
    timings, _ = measure(config, preflight(config))
    assert chosen and chosen[0].startswith(path)
    assert all(math.isfinite(t) and t > 0 for t in (timings.act_s, timings.update_s))


def test_one_worker_or_one_core_is_said_in_the_singular():
    """ "1 workers on 2 cores" (found combining flags: a cap of one worker)."""
    choice = choose(SLOW, cores=2, n_steps=5, envs_per_worker=8, cap=1)
    assert choice.workers == 1 and choice.reason.startswith("1 worker on 2 cores: "), choice.reason
    one_core = choose(SLOW, cores=1, n_steps=5, envs_per_worker=8, cap=3)
    assert one_core.reason.startswith("3 workers on 1 core: "), one_core.reason
