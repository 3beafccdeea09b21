"""Shared running statistics: the exact merge against numpy over the concatenated data, self-validating slots (a torn
row is never used), state round trips, observation clipping, reward scaling against a slow reference, and non-finite
samples left out of the statistics and counted."""

import io
import multiprocessing
import pickle
import time
from multiprocessing.reduction import ForkingPickler

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from a3c.learn.running_stats import EPS, Moments, ObsNormalizer, RewardScaler, SharedMoments


def _data(rng, counts, shape, loc=0.0):
    return [rng.normal(loc, rng.uniform(0.1, 5.0), size=(n, *shape)) for n in counts]


@pytest.mark.parametrize("shape", [(3,), (2, 2), ()])
def test_merge_of_worker_slots_equals_numpy_over_the_concatenated_data(shape):
    rng = np.random.default_rng(0)
    counts = [0, 1, 7, 300, 0, 45]  # uneven, with empty slots; the last one goes into the base row
    parts = _data(rng, counts, shape, loc=1e4)  # a large offset: a naive sum-of-squares formula loses digits here
    shared = SharedMoments(shape, slots=len(counts) - 1)
    for slot, part in enumerate(parts[:-1]):
        moments = Moments.empty(shape)
        for chunk in np.array_split(part, 4):  # each worker folds its data in in several (some empty) batches
            moments = moments.merge(Moments.of(chunk))
        shared.publish(slot, moments)
    m = Moments.of(parts[-1])
    shared.load_state_dict({"count": m.count, "mean": m.mean, "var": m.var})  # the base row
    for slot, part in enumerate(parts[:-1]):  # load_state_dict emptied the slots: publish again
        shared.publish(slot, Moments.of(part))
    everything = np.concatenate(parts)
    merged = shared.merged()
    assert merged.count == len(everything)
    np.testing.assert_allclose(merged.mean, everything.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(merged.var, everything.var(axis=0), rtol=1e-9)
    # any order of merging gives the same moments
    reverse = Moments.empty(shape)
    for part in reversed(parts):
        reverse = reverse.merge(Moments.of(part))
    np.testing.assert_allclose(reverse.var, merged.var, rtol=1e-9)


def test_no_samples_means_no_change():
    shared = SharedMoments((4,), slots=3)
    merged = shared.merged()
    assert merged.count == 0
    np.testing.assert_array_equal(merged.mean, np.zeros(4))
    np.testing.assert_array_equal(merged.var, np.ones(4))


def test_a_torn_row_is_never_used():
    shared = SharedMoments((1000,), slots=2)
    a = Moments(3.0, np.full(1000, 1.0), np.full(1000, 2.0))
    b = Moments(5.0, np.full(1000, 7.0), np.full(1000, 9.0))
    shared.publish(0, a)
    assert shared.read(0).count == 3.0  # this reader's last valid copy of row 0 is now a
    # the writer was caught mid-copy: the first half of the row is b's, the rest still a's
    row_a, row_b = shared.tensor.numpy()[0].copy(), shared._encode(b, version=2)
    torn = np.concatenate((row_b[:1000], row_a[1000:]))
    shared.tensor.numpy()[0] = torn
    got = shared.read(0)
    assert got.count == 3.0 and np.all(got.mean == 1.0) and np.all(got.m2 == 2.0)
    fresh = SharedMoments.__new__(SharedMoments)  # another process that never saw a valid row 0: empty, not torn
    fresh.__setstate__(shared.__getstate__())
    assert fresh.read(0).count == 0
    shared.tensor.numpy()[0] = row_b  # the copy completes
    got = shared.read(0)
    assert got.count == 5.0 and np.all(got.mean == 7.0) and np.all(got.m2 == 9.0)


def _hammer(shared, seconds):
    k = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        k += 1
        shared.publish(0, Moments(float(k), np.full(shared.shape, float(k)), np.full(shared.shape, float(k))))


def test_reads_during_concurrent_writes_are_consistent():
    """A writer process publishes rows whose every value equals its version while this process reads: every read
    must be one whole row (raw copies tear on this machine, see ``torn``; validated reads never do)."""
    shared = SharedMoments((20_000,), slots=1)
    writer = multiprocessing.get_context("fork").Process(target=_hammer, args=(shared, 1.0))
    writer.start()
    torn = reads = 0
    while not writer.is_alive():
        time.sleep(0.001)
    while writer.is_alive():
        raw = shared.tensor.numpy()[0].copy()
        torn += int(raw[3] != raw[-1])
        m = shared.read(0)
        assert np.all(m.mean == m.count) and np.all(m.m2 == m.count), "a torn row was used"
        reads += 1
    writer.join()
    assert writer.exitcode == 0 and reads > 10
    print(f"{reads} reads, {torn} raw copies torn")


def test_shared_moments_travel_to_workers_by_handle():
    shared = SharedMoments((2,), slots=2)
    other = pickle.loads(ForkingPickler.dumps(shared))  # as torch.multiprocessing sends it to a worker
    other.publish(1, Moments.of(np.array([[1.0, 2.0], [3.0, 4.0]])))
    assert shared.read(1).count == 2  # the same memory


def test_state_round_trip_through_a_checkpoint_and_a_different_worker_count():
    rng = np.random.default_rng(1)
    first, later = rng.normal(2, 3, (500, 3)), rng.normal(-1, 1, (200, 3))
    shared = SharedMoments((3,), slots=4)
    for slot, part in enumerate(np.array_split(first, 4)):
        shared.publish(slot, Moments.of(part))
    buf = io.BytesIO()
    torch.save({"obs_stats": shared.state_dict()}, buf)
    buf.seek(0)
    state = torch.load(buf, weights_only=True)["obs_stats"]  # as a3c's checkpoints are loaded

    resumed = SharedMoments((3,), slots=2)  # resumed with another --workers
    resumed.load_state_dict(state)
    np.testing.assert_allclose(resumed.merged().mean, first.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(resumed.merged().var, first.var(axis=0), rtol=1e-12)
    resumed.publish(1, Moments.of(later))  # training goes on: the restored statistics count as earlier data
    both = np.concatenate((first, later))
    np.testing.assert_allclose(resumed.merged().var, both.var(axis=0), rtol=1e-12)
    with pytest.raises(ValueError, match="do not fit"):
        SharedMoments((4,), slots=1).load_state_dict(state)


def test_obs_normalizer_normalises_clips_and_freezes():
    rng = np.random.default_rng(2)
    shared = SharedMoments((2,), slots=2)
    worker = ObsNormalizer(shared, slot=0, clip=5.0)
    batches = [rng.normal([10.0, -3.0], [2.0, 0.1], (8, 2)) for _ in range(20)]
    for batch in batches:
        worker(batch)
    worker.sync()
    seen = np.concatenate(batches)
    x = np.array([[10.0, -3.0], [12.0, -2.95], [1e6, -1e6]])
    expected = np.clip((x - seen.mean(0)) / np.sqrt(seen.var(0) + EPS), -5.0, 5.0)
    np.testing.assert_allclose(worker(x.copy()), expected, rtol=1e-5)  # the view as of the last sync
    assert worker(np.array([[1e6, -1e6]]))[0].tolist() == [5.0, -5.0]  # clipped exactly at +-clip

    other = ObsNormalizer(shared, slot=1, clip=5.0)  # a second worker starts from everything published ...
    np.testing.assert_allclose(other.mean, seen.mean(0))  # ... (worker 0 has not synced its last two calls yet)
    other.sync()  # (past its first sync: it applies the view as of a sync, not one with each new row in it)

    frozen = ObsNormalizer.frozen_from(shared.state_dict(), (2,), clip=5.0)
    before = shared.merged()
    out1 = frozen(x)
    frozen(rng.normal(100, 1, (50, 2)))
    frozen.sync()
    np.testing.assert_array_equal(frozen(x), out1)  # never updated ...
    assert shared.merged().count == before.count  # ... and never wrote anything
    np.testing.assert_allclose(out1, other(x.copy()), rtol=1e-6)  # applies what the live workers apply


def test_first_observations_are_normalised_by_their_own_statistics():
    shared = SharedMoments((1,), slots=1)
    out = ObsNormalizer(shared, slot=0, clip=10.0)(np.array([[100.0], [102.0]]))
    np.testing.assert_allclose(out[:, 0], [-1.0, 1.0], rtol=1e-6)  # not (100, 102) / 1 clipped to 10


def test_the_first_rollout_is_normalised_by_everything_seen_up_to_each_step():
    """Found in review: the first observation alone set the view for the whole first rollout, so with one env per
    worker (variance 0: std 1e-4) every later observation of that rollout came out pinned at +-clip, and every
    reward at +-clip too. Until its first sync a worker folds each step in at once (as SB3's VecNormalize does at
    every step); from then on the view refreshes at each sync."""
    xs = [3.0, 4.0, 6.0, 5.0, 9.0, 7.0]
    shared = SharedMoments((1,), slots=2)
    worker = ObsNormalizer(shared, slot=0, clip=10.0)
    got = [float(worker(np.array([[x]]))[0, 0]) for x in xs]
    expected = [
        np.clip((x - np.mean(xs[: t + 1])) / np.sqrt(np.var(xs[: t + 1]) + EPS), -10, 10) for t, x in enumerate(xs)
    ]
    np.testing.assert_allclose(got, expected, rtol=1e-6)
    assert max(abs(v) for v in got[1:]) < 2.0  # (before: 10.0, the clip)
    worker.sync()
    after = float(worker(np.array([[100.0]]))[0, 0])  # after the first sync: the view as of that sync, not this row
    assert after == pytest.approx(np.clip((100.0 - np.mean(xs)) / np.sqrt(np.var(xs) + EPS), -10, 10))

    other = ObsNormalizer(shared, slot=1, clip=10.0)  # a worker that starts later starts from what was published
    ys = [20.0, 22.0]  # (worker 0's 100.0 is not published until its next sync)
    got = [float(other(np.array([[y]]))[0, 0]) for y in ys]
    np.testing.assert_allclose(got[1], np.clip((22.0 - np.mean(xs + ys)) / np.sqrt(np.var(xs + ys) + EPS), -10, 10))

    scaler = RewardScaler(SharedMoments((), slots=1), slot=0, n_envs=1, gamma=0.5, clip=10.0)
    rewards = [1.0, 1.0, 2.0, -1.0]
    scaled = [float(scaler(np.array([r]), np.array([False]))[0]) for r in rewards]
    returns = [1.0, 1.5, 2.75, 0.375]  # G <- 0.5 G + r
    std = [np.sqrt(np.var(returns[: t + 1]) + EPS) for t in range(len(rewards))]
    np.testing.assert_allclose(scaled[1:], np.clip(np.divide(rewards, std)[1:], -10, 10), rtol=1e-6)
    assert max(abs(v) for v in scaled[1:]) < 10.0


def test_a_restarted_worker_continues_its_slot():
    rng = np.random.default_rng(3)
    a, b = rng.normal(0, 1, (30, 2)), rng.normal(5, 2, (40, 2))
    shared = SharedMoments((2,), slots=1)
    first = ObsNormalizer(shared, slot=0, clip=10.0)
    first(a)
    first.sync()
    second = ObsNormalizer(shared, slot=0, clip=10.0)  # the next incarnation of worker 0
    second(b)
    second.sync()
    np.testing.assert_allclose(shared.merged().var, np.concatenate((a, b)).var(0), rtol=1e-12)


def _slow_reward_reference(rewards, dones, gamma, clip, sync_every):
    """Reward scaling as written in words: each env's discounted return, the population variance of every return
    seen up to the last sync (before the first sync: up to this step), rewards divided by its sqrt, clipped."""
    n_envs = len(rewards[0])
    ret = [0.0] * n_envs
    seen, var, out = [], None, []
    for t, (r, d) in enumerate(zip(rewards, dones, strict=True)):
        ret = [ret[i] * gamma + r[i] for i in range(n_envs)]
        seen.extend(ret)
        if t < sync_every:
            var = float(np.var(seen))
        out.append([max(-clip, min(clip, r[i] / (var + EPS) ** 0.5)) for i in range(n_envs)])
        ret = [0.0 if d[i] else ret[i] for i in range(n_envs)]
        if (t + 1) % sync_every == 0:
            var = float(np.var(seen))
    return np.array(out)


@pytest.mark.parametrize("sync_every", [1, 5])
def test_reward_scaling_matches_a_slow_reference(sync_every):
    rng = np.random.default_rng(4)
    steps, n_envs, gamma = 300, 3, 0.9
    rewards = rng.normal(1.0, 2.0, (steps, n_envs))
    rewards[::37] = 50.0  # rare large rewards: some scaled rewards hit the clip
    dones = rng.random((steps, n_envs)) < 0.05
    scaler = RewardScaler(SharedMoments((), slots=1), slot=0, n_envs=n_envs, gamma=gamma, clip=3.0)
    got = []
    for t in range(steps):
        got.append(scaler(rewards[t], dones[t]))
        if (t + 1) % sync_every == 0:
            scaler.sync()
    expected = _slow_reward_reference(rewards.tolist(), dones.tolist(), gamma, 3.0, sync_every)
    np.testing.assert_allclose(np.array(got), expected, rtol=1e-5)
    assert np.any(np.abs(expected) == 3.0)  # the clip was exercised
    assert np.all(np.sign(np.array(got)) == np.sign(rewards))  # scaled, not centred


def test_reward_statistics_merge_over_workers_and_freeze():
    rng = np.random.default_rng(5)
    shared = SharedMoments((), slots=2)
    scalers = [RewardScaler(shared, slot=s, n_envs=2, gamma=0.99, clip=10.0) for s in range(2)]
    seen = []
    for _ in range(50):
        for s in scalers:
            s(rng.normal(size=2), np.zeros(2, dtype=bool))
            seen.extend(s.returns.tolist())
    for s in scalers:
        s.sync()
    scalers[0].sync()  # worker 0 synced before worker 1 had published: its view lags by one sync until now
    np.testing.assert_allclose(shared.merged().var, np.var(seen), rtol=1e-10)
    np.testing.assert_allclose(scalers[0].std, np.sqrt(np.var(seen) + EPS), rtol=1e-10)
    frozen = RewardScaler.frozen_from(shared.state_dict(), n_envs=2, gamma=0.99, clip=10.0)
    np.testing.assert_allclose(frozen(np.array([1.0, -2.0]), np.zeros(2)), np.array([1.0, -2.0]) / scalers[0].std)
    assert shared.merged().count == len(seen)


# -- non-finite samples never reach the statistics (docs/design.md) ---------------------------------------------------
# entries: ordinary values, with NaN and +-inf drawn often enough that most batches hold a few such rows
_ENTRY = st.one_of(
    st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False),
    st.sampled_from([np.nan, np.inf, -np.inf]),
)
_BATCH = arrays(np.float64, st.tuples(st.integers(0, 6), st.just(3)), elements=_ENTRY)  # [0..6 rows, 3]
_BATCHES = st.lists(_BATCH, min_size=1, max_size=5)


@settings(max_examples=60, deadline=None)
@given(batches=_BATCHES, sync_after=st.integers(1, 3))
def test_non_finite_rows_are_left_out_counted_and_come_out_nan(batches, sync_after):
    """Whatever the batches and wherever the syncs fall, the shared moments are those of the finite rows alone, every
    row with a NaN or infinite entry is counted once, and the normalised batch is NaN exactly where the raw one was
    not finite (never clipped to a made-up +-clip)."""
    shared = SharedMoments((3,), slots=2)
    worker = ObsNormalizer(shared, slot=0, clip=5.0)
    for i, batch in enumerate(batches):
        out = worker(batch)
        np.testing.assert_array_equal(np.isnan(out), ~np.isfinite(batch))
        if (i + 1) % sync_after == 0:
            worker.sync()
    worker.sync()
    rows = np.concatenate(batches)
    finite = np.isfinite(rows).all(axis=1)
    merged, expected = shared.merged(), Moments.of(rows[finite])
    assert merged.count == expected.count
    assert np.isfinite(merged.mean).all() and np.isfinite(merged.var).all()
    np.testing.assert_allclose(merged.mean, expected.mean, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(merged.m2, expected.m2, rtol=1e-9, atol=1e-6)
    assert worker.pop_nonfinite() == int((~finite).sum()) and worker.pop_nonfinite() == 0
    state = shared.state_dict()  # what a checkpoint saves
    assert all(torch.isfinite(value).all() for value in state.values())


def test_a_scalar_observation_s_final_value_is_normalised_and_clipped():
    """A Box(()) observation: ``apply`` on one 0-d final observation (the bootstrap at truncation) gives what np.clip
    gives, +-inf clipped to NaN's rule (non-finite comes out NaN), where the ufunc clip once wrote into a numpy scalar
    and raised."""
    shared = SharedMoments((), slots=1)
    norm = ObsNormalizer(shared, slot=0, clip=2.0)
    norm(np.array([1.0, 3.0, 5.0]))
    norm.sync()
    expected = np.clip((np.float64(100.0) - 3.0) / np.sqrt(np.var([1.0, 3.0, 5.0]) + EPS), -2.0, 2.0)
    assert float(norm.apply(np.float32(100.0))) == pytest.approx(expected) == 2.0
    assert np.isnan(norm.apply(np.float32(np.inf)))


def test_a_nan_observation_before_any_statistics_leaves_the_view_empty():
    shared = SharedMoments((2,), slots=1)
    worker = ObsNormalizer(shared, slot=0, clip=10.0)
    out = worker(np.array([[np.nan, 1.0], [np.inf, 2.0]]))
    assert np.isnan(out[:, 0]).all() and shared.merged().count == 0 and worker.pop_nonfinite() == 2
    out = worker(np.array([[100.0, 3.0], [102.0, 5.0]]))  # the first finite rows are normalised by themselves
    np.testing.assert_allclose(out, [[-1.0, -1.0], [1.0, 1.0]], rtol=1e-6)


def test_a_frozen_normalizer_passes_non_finite_entries_on_as_nan():
    frozen = ObsNormalizer.frozen_from({"count": 4.0, "mean": np.zeros(2), "var": np.ones(2)}, (2,), clip=5.0)
    out = frozen(np.array([[np.inf, 1.0], [-np.inf, 100.0]]))
    assert np.isnan(out[:, 0]).all() and out[:, 1].tolist() == [1.0, 5.0]


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_a_non_finite_reward_is_left_out_and_its_return_restarts(bad):
    """A non-finite reward in one env: its return is counted as non-finite, never merged, and restarts from 0 (the
    env's later returns count again); its scaled reward is NaN (the update skipped, as without scaling); the other
    env is scaled as ever."""
    gamma = 0.5
    shared = SharedMoments((), slots=1)
    scaler = RewardScaler(shared, slot=0, n_envs=2, gamma=gamma, clip=10.0)
    no_dones = np.zeros(2, dtype=bool)
    scaler(np.array([1.0, 2.0]), no_dones)
    scaled = scaler(np.array([bad, 2.0]), no_dones)
    assert np.isnan(scaled[0]) and np.isfinite(scaled[1])
    assert scaler.returns.tolist() == [0.0, 3.0]  # env 0's return restarted; env 1's is 2 * 0.5 + 2
    scaler(np.array([4.0, 2.0]), no_dones)
    scaler.sync()
    seen = [1.0, 2.0, 3.0, 4.0, 3.5]  # env 0: 1, (left out), 4; env 1: 2, 3, 3.5
    merged = shared.merged()
    assert merged.count == len(seen) and scaler.pop_nonfinite() == 1
    np.testing.assert_allclose([merged.mean, merged.var], [np.mean(seen), np.var(seen)], rtol=1e-12)
