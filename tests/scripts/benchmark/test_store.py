"""The results store (scripts/benchmark/store.py): a row is one JSON line keyed by env, arm, seed, budget and commit,
appended whole; a run is found by its key (or of any commit); a row with a key misspelt is refused."""

import json
import subprocess

import pytest

from scripts.benchmark import store as store_


def row(**overrides):
    """A complete row (every key of store.FIELDS), its numbers made up for the test."""
    base = {k: None for k in store_.FIELDS}
    base.update(
        env="CartPole-v1",
        arm="a3c",
        seed=1,
        budget=1000,
        commit="abc",
        arm_spec={"kind": "a3c", "flags": []},
        final_mean_100=10.0,
        wall_s=1.0,
        sessions=1,
        curve=[],
        extra={},
    )
    base.update(overrides)
    return base


def test_append_writes_one_line_per_row_and_find_goes_by_the_key(tmp_path):
    store = store_.Store(tmp_path / "data" / "results.jsonl")
    assert store.rows() == [] and store.find("CartPole-v1", "a3c", 1, 1000, "abc") is None
    store.append(row())
    store.append(row(seed=2, final_mean_100=20.0))
    store.append(row(commit="def", final_mean_100=30.0))
    lines = (tmp_path / "data" / "results.jsonl").read_text().splitlines()
    assert [json.loads(line)["final_mean_100"] for line in lines] == [10.0, 20.0, 30.0]
    assert store.find("CartPole-v1", "a3c", 1, 1000, "abc")["final_mean_100"] == 10.0
    assert store.find("CartPole-v1", "a3c", 2, 1000, "abc")["final_mean_100"] == 20.0
    assert store.find("CartPole-v1", "a3c", 1, 1000, None)["final_mean_100"] == 30.0  # any commit: the newest
    for other in (("Acrobot-v1", "a3c", 1, 1000), ("CartPole-v1", "ppo", 1, 1000), ("CartPole-v1", "a3c", 1, 2000)):
        assert store.find(*other, None) is None
    assert store.find("CartPole-v1", "a3c", 2, 1000, "def") is None
    assert store_.key_of(row()) == ("CartPole-v1", "a3c", 1, 1000, "abc")


def test_a_row_with_a_key_missing_or_misspelt_is_refused(tmp_path):
    store = store_.Store(tmp_path / "r.jsonl")
    bad = row()
    bad["final_mean"] = bad.pop("final_mean_100")
    with pytest.raises(ValueError, match=r"missing \['final_mean_100'\], unknown \['final_mean'\]"):
        store.append(bad)
    assert not (tmp_path / "r.jsonl").exists()


def test_a_line_that_is_not_json_is_named(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(row()) + "\n{cut off\n")
    with pytest.raises(store_.StoreError, match=r"r\.jsonl:2: not a JSON object"):
        store_.Store(path).rows()


@pytest.mark.parametrize(
    "line",
    [
        '[{"env": "CartPole-v1"}]',
        '{"env": "CartPole-v1"}',
        "3",
        json.dumps({k: v for k, v in row().items() if k != "final_mean_100"}),
    ],
)
def test_a_line_that_is_json_but_no_row_is_named(tmp_path, line):
    """Found by probing: `table` over such a line ended in a TypeError or KeyError traceback."""
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(row()) + "\n" + line + "\n")
    with pytest.raises(store_.StoreError, match=r"r\.jsonl:2: not a results row"):
        store_.Store(path).rows()


def test_a_store_that_cannot_be_written_is_named_before_a_run(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    store = store_.Store(blocker / "r.jsonl")
    with pytest.raises(store_.StoreError, match="cannot write it"):
        store.check_writable()
    with pytest.raises(store_.StoreError, match="cannot write it"):
        store.append(row())


def test_latest_keeps_the_last_row_of_each_run():
    rows = [row(final_mean_100=1.0), row(seed=2), row(commit="new", final_mean_100=5.0)]
    assert [r["final_mean_100"] for r in store_.latest(rows)] == [5.0, 10.0]


def test_the_code_commit_ignores_changes_outside_the_code(tmp_path):
    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    git("config", "user.email", "t@t")
    git("config", "user.name", "t")
    (tmp_path / "a3c").mkdir()
    (tmp_path / "a3c" / "m.py").write_text("x = 1\n")
    git("add", ".")
    git("commit", "-qm", "code")
    code = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True).stdout[:12]
    assert store_.code_commit(tmp_path) == code
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "results.jsonl").write_text("{}\n")
    git("add", ".")
    git("commit", "-qm", "results")
    assert store_.code_commit(tmp_path) == code  # committing results keeps the stored runs current
    (tmp_path / "a3c" / "m.py").write_text("x = 2\n")
    assert store_.code_commit(tmp_path) == code + "-dirty"


def test_commit_store_commits_the_store_alone(tmp_path):
    def git(*args):
        return subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True, text=True).stdout

    git("init", "-q")
    git("config", "user.email", "t@t")
    git("config", "user.name", "t")
    (tmp_path / "other.txt").write_text("staged, not the store's\n")
    git("add", "other.txt")
    store = store_.Store(tmp_path / "data" / "results.jsonl")
    store.append(row())
    assert store_.commit_store(store.path, "results: one run") is None
    assert git("log", "--format=%s") == "results: one run\n"
    assert git("show", "--name-only", "--format=") == "data/results.jsonl\n"
    assert git("diff", "--cached", "--name-only") == "other.txt\n"  # still staged
    assert store_.commit_store(store.path, "nothing new") is not None  # nothing to commit: git's line
