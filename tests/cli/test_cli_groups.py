"""describe (kafka-consumer-groups' columns, --members, --state, pending offsets), groups, and
dump (batch headers, decoded group metadata, transaction outcomes) (issue 15, items 5-7)."""

import json

from offsetlog.cli import main


def test_describe_shows_owner_unknown_lag_and_pending(group_store, capsys):
    assert main(["describe", group_store]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    billing0 = next(line.split() for line in lines if line.startswith("billing ")
                    and " 0 " in line)
    # GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID ...
    assert billing0[:6] == ["billing", "orders", "0", "10", "-", "-"]
    assert billing0[6].startswith("billing-1-") and billing0[7:9] == ["/10.0.0.1", "c1"]
    pending = [line for line in lines if "pending" in line and line.startswith("solo")]
    assert len(pending) == 1 and " 300 " in pending[0]
    assert out.count("cannot know") == 1  # said once, under the table
    assert " 200 " not in out  # the aborted offset is not an offset


def test_describe_json_marks_pending(group_store, capsys):
    assert main(["describe", group_store, "--group", "solo", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["offsets"]
    assert {(r["partition"], r["current_offset"], r["pending"]) for r in rows} == {
        (0, 100, False), (2, 7, False), (2, 300, True)}


def test_describe_members_and_state(group_store, capsys):
    assert main(["describe", group_store, "--group", "billing", "--members"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "CLIENT-ID",
                                "HOST", "#PARTITIONS", "ASSIGNMENT"]
    rows = sorted(line.split() for line in lines[1:])
    assert rows[0][2:] == ["billing-1", "c1", "/10.0.0.1", "2", "orders-0,orders-1"]
    assert rows[1][2:] == ["-", "c2", "/10.0.0.2", "1", "orders-2"]
    assert main(["describe", group_store, "--state", "--json"]) == 0
    groups = {g["group"]: g for g in json.loads(capsys.readouterr().out)["groups"]}
    assert groups["billing"] | {"leader": None} == {
        "group": "billing", "state": "Stable", "generation": 1, "protocol_type": "consumer",
        "protocol": "range", "leader": None, "num_members": 2}
    assert groups["solo"]["state"] == "Empty" and groups["solo"]["num_members"] == 0


def test_describe_of_an_unknown_group_fails(group_store, capsys):
    assert main(["describe", group_store, "--group", "nobody"]) == 1
    assert "does not exist" in capsys.readouterr().err


def test_groups_lists_state_and_offset_count(group_store, capsys):
    assert main(["groups", group_store]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["GROUP", "STATE", "OFFSETS"]
    assert [line.split()[:3] for line in lines[1:]] == [["billing", "Stable", "2"],
                                                        ["solo", "Empty", "2"]]


def test_dump_shows_batch_headers_like_kafka_dump_log(group_store, capsys):
    assert main(["dump", group_store]) == 0
    lines = capsys.readouterr().out.splitlines()
    headers = [line for line in lines if line.startswith("baseOffset: ")]
    assert headers
    for field in ("lastOffset:", "count:", "producerId:", "producerEpoch:", "isTransactional:",
                  "isControl:", "position:", "CreateTime:", "size:", "crc:"):
        assert all(field in h for h in headers), field
    assert any("isTransactional: true isControl: true" in h for h in headers)


def test_dump_decodes_members_and_marks_transactions(group_store, capsys):
    assert main(["dump", group_store]) == 0
    out = capsys.readouterr().out
    metadata = next(line for line in out.splitlines() if "GROUP_METADATA" in line)
    assert "subscription={topics=[orders]" in metadata
    assert "assignment=[orders-0,orders-1]" in metadata and "assignment=[orders-2]" in metadata
    records = [line for line in out.splitlines() if line.startswith("| offset:")]
    by_offset = {line.split("offset=")[1].split(",")[0]: line for line in records
                 if "group=solo" in line}
    assert by_offset["200"].endswith("transaction: aborted")
    assert by_offset["100"].endswith("transaction: committed")
    assert by_offset["300"].endswith("transaction: open")
    assert "transaction:" not in by_offset["7"]
    assert any("endTxnMarker: ABORT" in line for line in records)


def test_dump_json_decodes_and_marks(group_store, capsys):
    assert main(["dump", group_store, "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    md = next(r for r in rows if r["type"] == "GROUP_METADATA")
    assert sorted(m["assignment"] for m in md["value"]["members"]) == [
        ["orders-0", "orders-1"], ["orders-2"]]
    aborted = [r for r in rows if r["transaction"] == "aborted"]
    assert [r["value"]["offset"] for r in aborted] == [200]
    assert aborted[0]["batch"]["is_transactional"] and aborted[0]["batch"]["producer_id"] == 0


def test_transactions_lists_each_id_with_its_open_transaction(group_store, capsys):
    """``tx-a`` committed one transaction, aborted one and left a third open (pending offset
    300 of group solo): its state record says Ongoing, on solo's log partition."""
    from offsetlog.partitioner import partition_for

    assert main(["transactions", group_store]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["TRANSACTIONAL-ID", "PRODUCER-ID", "PRODUCER-EPOCH", "STATE",
                                "TIMEOUT-MS", "STARTED-AT", "PARTITIONS", "LOG-PARTITION"]
    assert main(["transactions", group_store, "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["transactions"]
    partitions = 3  # the fixture's store
    assert (row["transactional_id"], row["state"], row["producer_epoch"]) == ("tx-a", "Ongoing", 0)
    assert row["partitions"] == [partition_for("solo", partitions)]
    assert row["log_partition"] == partition_for("tx-a", partitions)
    assert row["started_at"].endswith("Z")
    text = next(line.split() for line in lines[1:] if line.startswith("tx-a"))
    assert text[3] == "Ongoing" and text[6] == str(row["partitions"][0])
