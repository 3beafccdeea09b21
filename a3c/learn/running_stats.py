"""Running statistics shared by all workers: observation normalisation (--normalize-obs, --clip-obs) and reward
scaling by the running std of the discounted return (--normalize-reward, --clip-reward), as SB3's VecNormalize does
for one process, here merged exactly over every worker.

Statistics are kept as moments (count, mean, M2 = sum of squared deviations from the mean), which merge exactly:
Chan, Golub & LeVeque (1979), "Updating formulae and a pairwise algorithm for computing sample variances". The merge of
any split of the data equals the moments of the whole (up to float rounding), so no worker's data counts twice and
the order of merging does not matter.

Shared layout (``SharedMoments``, one float64 tensor in shared memory, [slots + 1, 3 + 2 * size]):
  row r < slots   worker r's moments of everything it has seen (one writer: that worker; it never resets them, so a
                  restarted worker continues its slot)
  row slots       the base: moments restored from a checkpoint (written by the main process before workers start)
  each row        [version, checksum, count, mean[size], M2[size]]
The merged statistics (base + every slot) are what every worker applies and what a checkpoint saves.

No lock. A worker publishes its row by building it locally and copying it into shared memory in one slice
assignment; a reader copies the row, then checks the copy's checksum (CRC-32 of version, count, mean and M2). A copy
taken while the writer was mid-copy mixes two versions and fails the check; the reader then retries, and after a few
failures uses the last valid copy it read of that row. Rows are thus self-validating and nothing depends on the
order in which another core sees the stores (x86 or not). A torn copy passes only on a CRC-32 collision (2^-32).

Workers fold what they have seen into their own moments and refresh the merged view once per update (``sync``), so
the statistics a worker applies lag the other workers by at most one rollout. Until its first sync a worker folds
each step's samples into its view at once, as SB3's VecNormalize does at every step: its first rollout is normalised
by everything seen up to each step. (A view fixed at the first step would hold one sample per env: with one env, a
variance of 0 and a std of 1e-4, which pinned every later observation and reward of that rollout at +-clip, and PPO
then spent all its epochs on them.) Afterwards the view lags by a rollout; the per-step refresh would cost every step.

Non-finite samples (an observation with a NaN or infinite entry, a non-finite discounted return) never enter the
statistics: one would make the mean NaN for every worker, every later update and every checkpoint. The applier
leaves the sample out and counts it (``pop_nonfinite``; the worker adds the count to its stats row). What the model
is fed for it stays non-finite (NaN), so that the update that sees it is skipped and counted exactly as without
normalisation; clipping it to +-clip would instead train on a made-up value.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch

EPS = 1e-8  # added to the variance before the square root (SB3's VecNormalize epsilon)
READ_RETRIES = 8


@dataclass
class Moments:
    """count, mean and M2 (sum of squared deviations) of a set of samples of one shape; count 0: no samples."""

    count: float
    mean: np.ndarray
    m2: np.ndarray

    @classmethod
    def empty(cls, shape: tuple[int, ...]) -> Moments:
        return cls(0.0, np.zeros(shape), np.zeros(shape))

    @classmethod
    def of(cls, batch: np.ndarray) -> Moments:
        """The moments of ``batch`` along its first axis."""
        x = np.asarray(batch, dtype=np.float64)
        if len(x) == 0:
            return cls.empty(x.shape[1:])
        mean = x.mean(axis=0)
        return cls(float(len(x)), mean, np.square(x - mean).sum(axis=0))

    @property
    def var(self) -> np.ndarray:
        """The population variance (numpy's ddof=0); 1 before any sample, so that applying it changes nothing."""
        return self.m2 / self.count if self.count > 0 else np.ones_like(self.mean)

    def merge(self, other: Moments) -> Moments:
        """The moments of both sets of samples together (Chan et al.'s pairwise update); exact for empty sides."""
        if other.count == 0:
            return self
        if self.count == 0:
            return other
        n = self.count + other.count
        delta = other.mean - self.mean
        mean = self.mean + delta * (other.count / n)
        m2 = self.m2 + other.m2 + np.square(delta) * (self.count * other.count / n)
        return Moments(n, mean, m2)


def merge_all(parts: list[Moments], shape: tuple[int, ...]) -> Moments:
    total = Moments.empty(shape)
    for part in parts:
        total = total.merge(part)
    return total


class MomentsStore(Protocol):
    """Where the workers' moments are kept, as an applier reads and writes them: ``SharedMoments`` (shared memory),
    or a Ray worker's handle on the parameter server's (a3c.run.backends.ray.server.RemoteMoments)."""

    @property
    def shape(self) -> tuple[int, ...]: ...

    def read(self, row: int) -> Moments: ...

    def publish(self, slot: int, moments: Moments) -> None: ...

    def merged(self, skip: int | None = None) -> Moments: ...


class SharedMoments:
    """One row of moments per worker slot plus a base row, in shared memory (see the module docstring). Pass it to
    worker processes as is (the tensor travels by its shared-memory handle)."""

    def __init__(self, shape: tuple[int, ...], slots: int) -> None:
        self.shape = tuple(shape)
        self.slots = slots
        self.size = int(np.prod(self.shape, dtype=np.int64))
        self.tensor = torch.zeros(slots + 1, 3 + 2 * self.size, dtype=torch.float64).share_memory_()
        self._last: dict[int, np.ndarray] = {}  # this process's last valid copy of each row
        for row in range(slots + 1):
            self._write(row, Moments.empty(self.shape), version=0)

    def __getstate__(self) -> dict[str, Any]:
        return {"shape": self.shape, "slots": self.slots, "size": self.size, "tensor": self.tensor}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._last = {}

    @property
    def base(self) -> int:
        return self.slots

    def _encode(self, moments: Moments, version: float) -> np.ndarray:
        row = np.empty(3 + 2 * self.size)
        row[0], row[2] = version, moments.count
        row[3 : 3 + self.size] = np.reshape(moments.mean, -1)
        row[3 + self.size :] = np.reshape(moments.m2, -1)
        row[1] = _checksum(row)
        return row

    def _write(self, row: int, moments: Moments, version: float) -> None:
        self.tensor.numpy()[row] = self._encode(moments, version)  # one slice copy; readers validate the checksum

    def publish(self, slot: int, moments: Moments) -> None:
        """Replace the moments of ``slot`` (only its own worker may call this for a worker slot)."""
        version = self._read_row(slot)[0] + 1
        self._write(slot, moments, version)

    def _read_row(self, row: int) -> np.ndarray:
        shared = self.tensor.numpy()[row]
        for _ in range(READ_RETRIES):
            copy = shared.copy()
            if copy[1] == _checksum(copy):
                self._last[row] = copy
                return copy
        return self._last.get(row, self._encode(Moments.empty(self.shape), 0.0))  # the writer is mid-copy

    def read(self, row: int) -> Moments:
        """A consistent copy of one row's moments (a worker slot, or ``base``)."""
        values = self._read_row(row)
        mean = values[3 : 3 + self.size].reshape(self.shape)
        return Moments(float(values[2]), mean, values[3 + self.size :].reshape(self.shape))

    def merged(self, skip: int | None = None) -> Moments:
        """The base merged with every worker slot (but ``skip``)."""
        rows = [r for r in range(self.slots + 1) if r != skip]
        return merge_all([self.read(r) for r in rows], self.shape)

    def state_dict(self) -> dict[str, torch.Tensor]:
        """The merged statistics, as tensors (a checkpoint loads with torch.load(weights_only=True))."""
        m = self.merged()
        return {
            "count": torch.tensor(m.count, dtype=torch.float64),
            "mean": torch.from_numpy(np.array(m.mean, dtype=np.float64)),
            "var": torch.from_numpy(np.array(m.var, dtype=np.float64)),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore merged statistics into the base row and empty every worker slot. Call it only while no worker
        runs (before they start, at a resume): the slots are written here, not by their workers."""
        moments = moments_from_state(state, self.shape)
        for slot in range(self.slots):
            self._write(slot, Moments.empty(self.shape), version=self._read_row(slot)[0] + 1)
        self._write(self.base, moments, version=self._read_row(self.base)[0] + 1)


def moments_from_state(state: dict[str, Any], shape: tuple[int, ...]) -> Moments:
    """Moments from a state_dict (count, mean, var); ValueError if its shape is not ``shape``."""
    count = float(np.asarray(state["count"]))
    mean = np.asarray(state["mean"], dtype=np.float64)
    var = np.asarray(state["var"], dtype=np.float64)
    if mean.shape != tuple(shape) or var.shape != tuple(shape):
        raise ValueError(f"normalisation statistics of shape {mean.shape} do not fit observations of shape {shape}")
    return Moments(count, mean.copy(), var * count)


def _checksum(row: np.ndarray) -> float:
    data = np.concatenate((row[:1], row[2:]))
    return float(zlib.crc32(data.tobytes()))


class _Applier:
    """What ObsNormalizer and RewardScaler share: this worker's moments (own slot), what it has seen since the last
    sync, and the merged view (mean, std) it applies. Frozen: a fixed view, never updated (evaluation, loading)."""

    def __init__(self, shared: MomentsStore | None, slot: int | None, shape: tuple[int, ...]) -> None:
        self.shared, self.slot, self.shape = shared, slot, shape
        self.frozen = shared is None
        self.nonfinite = 0  # samples left out of the statistics since the last pop_nonfinite
        self._pending: list[np.ndarray] = []
        self._own = shared.read(slot) if shared is not None and slot is not None else Moments.empty(shape)
        self._view = Moments.empty(shape)
        self._set_view(shared.merged() if shared is not None else self._view)
        # until the first sync: the view at the start, and what has been seen since (folded in at every step)
        self._warm_up: tuple[Moments, Moments] | None = (self._view, Moments.empty(shape)) if not self.frozen else None

    def _set_view(self, moments: Moments) -> None:
        self._view = moments
        self.mean = np.asarray(moments.mean, dtype=np.float64)
        self.std = np.sqrt(moments.var + EPS)

    def _freeze(self, state: dict[str, Any]) -> None:
        self._set_view(moments_from_state(state, self.shape))

    def _observe(self, batch: np.ndarray) -> bool:
        """Count the finite samples of ``batch`` [n, *shape] into this worker's pending statistics and leave the
        others out (counted in ``nonfinite``). True if every sample was finite (always True when frozen: nothing is
        checked)."""
        if self.frozen:
            return True
        x = np.array(batch, dtype=np.float64).reshape(-1, *self.shape)
        finite = bool(np.isfinite(x).all())  # the one check on the usual path: a whole batch at once
        if not finite:
            keep = np.isfinite(x.reshape(len(x), -1)).all(axis=1)  # a sample with any non-finite entry goes
            self.nonfinite += int(len(x) - keep.sum())
            x = x[keep]
            if len(x) == 0:
                return False
        self._pending.append(x)
        if self._warm_up is not None:  # before the first sync: these samples count at once (the module docstring)
            start, seen = self._warm_up
            seen = seen.merge(Moments.of(x))
            self._warm_up = (start, seen)
            self._set_view(start.merge(seen))
        return finite

    def pop_nonfinite(self) -> int:
        """The number of non-finite samples left out of the statistics since the last call (reset to 0)."""
        count, self.nonfinite = self.nonfinite, 0
        return count

    def sync(self) -> None:
        """Fold what this worker has seen into its slot, publish it, and refresh the merged view (once per update)."""
        shared, slot = self.shared, self.slot
        if shared is None:  # frozen
            return
        assert slot is not None, "a live applier publishes into its own slot"
        self._warm_up = None
        if self._pending:
            self._own = self._own.merge(Moments.of(np.concatenate(self._pending)))
            self._pending.clear()
            shared.publish(slot, self._own)
        self._set_view(shared.merged(skip=slot).merge(self._own))

    def state_dict(self) -> dict[str, torch.Tensor]:
        """The view this applier applies (for a frozen copy of it)."""
        return {
            "count": torch.tensor(self._view.count, dtype=torch.float64),
            "mean": torch.from_numpy(np.array(self._view.mean, dtype=np.float64)),
            "var": torch.from_numpy(np.array(self._view.var, dtype=np.float64)),
        }


class ObsNormalizer(_Applier):
    """(obs - mean) / sqrt(var + eps), clipped to [-clip, clip], with the mean and var merged over all workers."""

    def __init__(self, shared: MomentsStore, slot: int, clip: float) -> None:
        super().__init__(shared, slot, shared.shape)
        self.clip = clip

    @classmethod
    def frozen_from(cls, state: dict[str, Any], shape: tuple[int, ...], clip: float) -> ObsNormalizer:
        """Apply-only: the statistics of ``state`` (a state_dict), never updated (evaluation, a loaded agent)."""
        self = cls.__new__(cls)
        _Applier.__init__(self, None, None, tuple(shape))
        self.clip = clip
        self._freeze(state)
        return self

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        """Normalise a batch of observations [n, *shape] (and count the finite ones into the statistics unless
        frozen)."""
        finite = self._observe(obs)
        return self.apply(obs, None if self.frozen else finite)

    def apply(self, obs: np.ndarray, finite: bool | None = None) -> np.ndarray:
        """Normalise without counting (a final observation at truncation, seen once already by the env's step).
        Non-finite entries come out NaN, never clipped (see the module docstring); ``finite``: whether the caller
        already knows that every entry is finite (None: check here)."""
        out = _clip((obs - self.mean) / self.std, self.clip).astype(np.float32)
        if finite is None:
            finite = bool(np.isfinite(obs).all())
        if not finite:
            out[~np.isfinite(obs)] = np.nan  # np.clip would turn +-inf into +-clip (NaN it leaves NaN)
        return out


class RewardScaler(_Applier):
    """reward / sqrt(var(G) + eps), clipped to [-clip, clip], where G is each env's running discounted return
    (G <- gamma * G + reward, reset to 0 when its episode ends) and var(G) is merged over all workers. Rewards are
    scaled, not centred: subtracting a mean would change which policy is optimal."""

    def __init__(self, shared: MomentsStore, slot: int, n_envs: int, gamma: float, clip: float) -> None:
        if shared.shape != ():
            raise ValueError(f"reward statistics are scalar; got shape {shared.shape}")
        super().__init__(shared, slot, ())
        self.gamma, self.clip = gamma, clip
        self.returns = np.zeros(n_envs)

    @classmethod
    def frozen_from(cls, state: dict[str, Any], n_envs: int, gamma: float, clip: float) -> RewardScaler:
        self = cls.__new__(cls)
        _Applier.__init__(self, None, None, ())
        self.gamma, self.clip = gamma, clip
        self.returns = np.zeros(n_envs)
        self._freeze(state)
        return self

    def __call__(self, rewards: np.ndarray, dones: np.ndarray) -> np.ndarray:
        """Scale one step's rewards [n_envs]; ``dones`` (terminated or truncated) resets those envs' returns. A
        non-finite reward makes its env's return non-finite: left out of the statistics, the reward scaled to NaN
        (the update skipped, as without scaling), and that return restarts from 0 (it would stay NaN or inf until
        the episode ended, and every return of that episode would be left out)."""
        self.returns = self.returns * self.gamma + rewards
        finite = self._observe(self.returns)
        scaled = _clip(rewards / self.std, self.clip).astype(np.float32)
        if not finite:
            self.returns[~np.isfinite(self.returns)] = 0.0
            scaled[~np.isfinite(rewards)] = np.nan  # np.clip would turn +-inf into +-clip
        self.returns[np.asarray(dones, dtype=bool)] = 0.0
        return scaled


def _clip(x: np.ndarray, bound: float) -> np.ndarray:
    """np.clip(x, -bound, bound) (NaN stays NaN, +-inf becomes +-bound) by two ufuncs, in place on ``x`` (a temporary
    of the caller's, or a numpy scalar: a 0-d observation's): np.clip's Python wrapper costs ~10 us, twice on every env
    step with normalisation on."""
    x = np.asarray(x)  # (a numpy scalar as a 0-d array: ufuncs write into arrays only)
    np.maximum(x, -bound, out=x)
    return np.minimum(x, bound, out=x)
