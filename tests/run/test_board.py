"""The episode board: every row read exactly once under concurrent writers, laps counted, the step count exact."""

import time

import numpy as np
import pytest
import torch.multiprocessing as mp

from a3c.record.rows import FIELD, FIELDS
from a3c.run.board import BoardReader, EpisodeBoard


def _row(worker, index):
    row = np.zeros(len(FIELDS))
    row[FIELD["return"]] = worker * 1_000_000 + index  # encodes who wrote it and when
    row[FIELD["length"]] = index
    return row


def test_rows_are_read_once_in_order():
    board = EpisodeBoard(workers=2, capacity=8)
    reader = BoardReader(board)
    for i in range(5):
        assert board.write(1, _row(1, i)) == i
    got = reader.drain()
    assert [(e.worker, e.index) for e in got] == [(1, i) for i in range(5)]
    assert reader.drain() == []
    board.write(0, _row(0, 0))
    assert [(e.worker, e.index, e["return"]) for e in reader.drain()] == [(0, 0, 0.0)]


def test_a_writer_that_laps_the_reader_is_counted_never_duplicated():
    board = EpisodeBoard(workers=1, capacity=4)
    reader = BoardReader(board)
    for i in range(10):
        board.write(0, _row(0, i))
    got = reader.drain()
    # the newest rows survive, except the oldest slot, which a writer at index 10 could be overwriting right now
    # (the reader cannot tell an idle writer from a busy one, so it drops that row too, and counts it)
    assert [e.index for e in got] == [7, 8, 9]
    assert [e["return"] for e in got] == [7.0, 8.0, 9.0]
    assert reader.lost == 7


def _writer(board, rank, n, pause_every):
    for i in range(n):
        board.write(rank, _row(rank, i))
        if pause_every and i % pause_every == 0:
            time.sleep(0.0005)


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_concurrent_writers_each_row_exactly_once(method):
    workers, n = 4, 3000
    board = EpisodeBoard(workers=workers, capacity=4096)
    reader = BoardReader(board)
    ctx = mp.get_context(method)
    procs = [ctx.Process(target=_writer, args=(board, r, n, 50)) for r in range(workers)]
    for p in procs:
        p.start()
    seen = []
    while any(p.is_alive() for p in procs):
        seen.extend(reader.drain())  # reading while they write
    for p in procs:
        p.join()
        assert p.exitcode == 0
    seen.extend(reader.drain())
    keys = [(e.worker, e.index) for e in seen]
    assert len(keys) == len(set(keys)) == workers * n
    assert all(e["return"] == e.worker * 1_000_000 + e.index for e in seen)  # no torn or stale row
    assert reader.lost == 0


def test_small_ring_under_concurrency_loses_only_what_it_reports():
    board = EpisodeBoard(workers=2, capacity=16)
    reader = BoardReader(board)
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(board, r, 5000, 0)) for r in range(2)]
    for p in procs:
        p.start()
    seen = []
    while any(p.is_alive() for p in procs):
        seen.extend(reader.drain())
        time.sleep(0.001)
    for p in procs:
        p.join()
    seen.extend(reader.drain())
    keys = [(e.worker, e.index) for e in seen]
    assert len(keys) == len(set(keys))
    assert len(keys) + reader.lost == 2 * 5000
    assert all(e["return"] == e.worker * 1_000_000 + e.index for e in seen)


def _stepper(board, rank, n):
    for _ in range(n):
        board.add_steps(rank, 5)


def test_global_step_counter_is_exact_under_many_processes():
    workers, n = 8, 2000
    board = EpisodeBoard(workers=workers, capacity=4)
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=_stepper, args=(board, r, n)) for r in range(workers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    assert board.global_step() == workers * n * 5
