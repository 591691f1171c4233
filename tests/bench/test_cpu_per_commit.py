"""bench/cpu_per_commit.py measures what it says: commits were made and CPU was counted."""

from offsetlog import OffsetStore, TopicPartition
from offsetlog.bench.cpu_per_commit import measure


def test_measure_commits_from_every_thread_and_counts_their_cpu(tmp_path):
    r = measure(str(tmp_path / "store"), 3, 0.3)
    assert r["threads"] == 3 and r["commits_per_s"] > 0
    assert r["user_us"] > 0 and r["system_us"] >= 0
    with OffsetStore.open(str(tmp_path / "store"), snapshots=False) as store:
        for k in range(3):  # each committer's group holds its last offset
            assert store.committed(f"group-{k}", TopicPartition("orders", k % 8)) is not None
