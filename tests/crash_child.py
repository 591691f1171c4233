"""The process test_crash.py kills: commits from several threads until SIGKILL.

Usage: python crash_child.py CONFIG_JSON

Each thread ``t`` commits, for seq = start, start+1, ..., one call to group ``group_of(t)``
whose offsets are all ``seq``, on the keys ``call_keys(seed, t, seq)`` (always the thread's
"progress" key ``TP(f"t{t}", 0)`` plus a seeded subset of its others). The line
``ACK <t> <seq>`` is appended to the ack file only *after* the commit is durable: after
``commit_sync`` returns, or in the ``commit_async`` callback without an error.

With ``sync_log`` set, every successful ``segment._sync`` appends ``SYNC <path> <size>`` there
*after* the fsync returned, so the parent knows which bytes were durable and may simulate a
power failure by dropping any of the rest. ``sync_delay_ms`` sleeps before each fsync, to
widen the window in which written-but-unsynced data exists.
"""

from __future__ import annotations

import json
import os
import random
import sys
import threading
import time

from offsetlog import OffsetStore, TopicPartition

TOPIC_PARTITIONS = 6  # keys per thread: TP(f"t{t}", 0..5)


def group_of(t: int, groups: int) -> str:
    return f"crash-group-{t % groups}"


def call_keys(seed: int, t: int, seq: int) -> list[TopicPartition]:
    """The keys of thread ``t``'s call ``seq``: its progress key plus a seeded subset."""
    rng = random.Random(f"{seed}:{t}:{seq}")
    others = [p for p in range(1, TOPIC_PARTITIONS) if rng.random() < 0.5]
    return [TopicPartition(f"t{t}", p) for p in [0, *others]]


def _install_sync_log(path: str, delay_ms: float) -> None:
    from offsetlog import segment

    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    real = segment._sync

    def logged_sync(sync_fd: int) -> None:
        if delay_ms:
            time.sleep(delay_ms / 1000.0)
        real(sync_fd)
        target = os.readlink(f"/proc/self/fd/{sync_fd}")
        size = os.lseek(sync_fd, 0, os.SEEK_CUR)  # end of the data (the file may be preallocated)
        os.write(fd, f"SYNC {target} {size}\n".encode())

    segment._sync = logged_sync


def main(config: dict) -> None:
    if config.get("sync_log"):
        _install_sync_log(config["sync_log"], config.get("sync_delay_ms", 0))
    ack = os.open(config["ack_file"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def acknowledge(t: int, seq: int) -> None:
        os.write(ack, f"ACK {t} {seq}\n".encode())  # one write: a line is whole or absent

    store = OffsetStore.open(config["dir"], partitions=config["partitions"], fsync="always",
                             segment_bytes=config["segment_bytes"],
                             retention_check_interval_ms=0)
    os.write(ack, b"READY\n")
    seed, groups, mode = config["seed"], config["groups"], config["mode"]

    def run(t: int) -> None:
        rng = random.Random(f"{seed}:{t}:mode")
        window = []
        seq = config["start"]
        while True:
            offsets = {tp: seq for tp in call_keys(seed, t, seq)}
            group = group_of(t, groups)
            if mode == "mixed" and rng.random() < 0.6:
                def callback(_offsets, exc, t=t, seq=seq):
                    if exc is None:
                        acknowledge(t, seq)
                window.append(store.commit_async(group, offsets, callback=callback))
                if len(window) > 16:  # bound the work in flight
                    window.pop(0).result()
            else:
                store.commit_sync(group, offsets)
                acknowledge(t, seq)
            seq += 1

    threads = [threading.Thread(target=run, args=(t,), daemon=True)
               for t in range(config["threads"])]
    for th in threads:
        th.start()
    for th in threads:
        th.join()


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
