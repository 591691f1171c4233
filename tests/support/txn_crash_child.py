"""The process test_txn_crash.py kills: transactional offset commits until SIGKILL.

Usage: python txn_crash_child.py CONFIG_JSON

``mode == "step"``: one plain commit, then one transaction writing ``TXN_VALUE`` to a key of
group ``g`` and one of group ``h`` (different log partitions), finished by ``action``
("commit", "abort", "prepare", "prepare-commit", "prepare-abort"; "open" kills it before;
"timeout" has the store abort it for its timeout, in a store that fences on timeouts); the store's transaction
fault hook SIGKILLs the process at its ``kill_at``-th call (steps "decided", "marker" per
partition, "completed"). Reaching the end prints DONE to the ack file.

``mode == "loop"``: transactions i = start, start+1, ... each writing i to both keys and
committing; after the decision is durable (the "decided" hook) the line ``D i`` is appended
to the ack file, after ``commit()`` returns ``C i``. The parent kills it at a random moment.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

from offsetlog import OffsetStore, TopicPartition

KEY_G = TopicPartition("in", 0)
KEY_H = TopicPartition("in", 1)
TXN_VALUE = 10
PLAIN_VALUE = 1


def now_ms() -> int:
    return int(time.time() * 1000)


def main(config: dict) -> None:
    ack = os.open(config["ack_file"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    store = OffsetStore.open(config["dir"], partitions=config["partitions"],
                             retention_check_interval_ms=0, cleaner_backoff_ms=0,
                             transaction_check_interval_ms=0,
                             fence_on_transaction_timeout=config["mode"] == "step"
                             and config["action"] == "timeout")
    os.write(ack, b"READY\n")
    if config["mode"] == "step":
        calls = [0]

        def hook(step, meta):
            calls[0] += 1
            if calls[0] == config["kill_at"]:
                os.kill(os.getpid(), signal.SIGKILL)

        store.commit_sync("g", {KEY_G: PLAIN_VALUE})
        store.commit_sync("h", {KEY_H: PLAIN_VALUE})
        txn = store.init_transactions("t")
        store._transactions.fault_hook = hook
        txn.begin()
        txn.commit_offsets("g", {KEY_G: TXN_VALUE})
        txn.commit_offsets("h", {KEY_H: TXN_VALUE})
        action = config["action"]
        if action == "open":
            os.kill(os.getpid(), signal.SIGKILL)
        if action == "timeout":  # as the timer would, once the transaction is old enough
            store.poll_transactions(now_ms=now_ms() + txn.transaction_timeout_ms)
        if action.startswith("prepare"):
            txn.prepare()
            os.write(ack, b"PREPARED\n")
        if action.endswith("commit"):
            txn.commit()
        elif action.endswith("abort"):
            txn.abort()
        os.write(ack, b"DONE\n")
        os.kill(os.getpid(), signal.SIGKILL)  # never close: a crash at the very end too

    def decided(step, meta):
        if step == "decided" and meta.state == "PrepareCommit":
            os.write(ack, f"D {current[0]}\n".encode())

    current = [0]
    txn = store.init_transactions("t")
    store._transactions.fault_hook = decided
    i = config["start"]
    while True:
        current[0] = i
        with txn:
            txn.commit_offsets("g", {KEY_G: i})
            txn.commit_offsets("h", {KEY_H: i})
        os.write(ack, f"C {i}\n".encode())
        i += 1


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
