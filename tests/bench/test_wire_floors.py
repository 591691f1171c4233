"""The wire bench's floor servers do the work their rows say they do: a floor that skipped
it would make the server's distance from it look larger than it is."""

import os
import socket

import pytest

from offsetlog.bench import cases, wire, wire_floors
from offsetlog.types import TopicPartition


def _commit_over(floor: "wire_floors.Floor", frames: list[bytes]) -> None:
    sock = socket.create_connection(("127.0.0.1", floor.port))
    try:
        for frame in frames:
            wire._round_trip(sock, frame)
    finally:
        sock.close()


def test_python_floor_commits_each_request_through_the_store(tmp_path):
    path = str(tmp_path / "store")
    floor = wire_floors.Floor(path, "--python-floor")
    try:
        _commit_over(floor, [wire._commit_frame("g-1", 3, 41, 1),
                             wire._commit_frame("g-2", 5, 42, 2),
                             wire._commit_frame("g-1", 3, 43, 3)])
    finally:
        floor.close()  # SIGKILL: answered commits must be durable
    store = cases.open_store(path)
    try:
        assert store.fetch("g-1")[TopicPartition(wire.TOPIC, 3)].offset == 43
        assert store.fetch("g-2")[TopicPartition(wire.TOPIC, 5)].offset == 42
    finally:
        store.close()


def test_floor_writes_each_request_to_its_connections_file(tmp_path):
    path = str(tmp_path / "floor")
    frames = [wire._commit_frame("g", 0, 100 + i, i) for i in range(3)]
    floor = wire_floors.Floor(path, "--floor")
    try:
        _commit_over(floor, frames)
    finally:
        floor.close()
    with open(os.path.join(path, "floor-0.log"), "rb") as f:
        data = f.read(sum(len(fr) - 4 for fr in frames))
    assert data == b"".join(fr[4:] for fr in frames)


def test_compiled_floor_writes_each_request_to_its_connections_file(tmp_path):
    """The compiled floor (bench/floor.c) does the Python floor's work: each connection's
    requests, in order, in its own file."""
    binary = wire_floors.compiled_floor(str(tmp_path / "build"))
    if binary is None:
        pytest.skip("no C compiler here: the bench leaves the compiled floor's rows out")
    path = str(tmp_path / "compiled")
    first = [wire._commit_frame("g", 0, 100 + i, i) for i in range(3)]
    second = [wire._commit_frame("h", 1, 7, 9)]
    floor = wire_floors.CompiledFloor(path, binary)
    try:
        _commit_over(floor, first)
        _commit_over(floor, second)
    finally:
        floor.close()
    for name, frames in (("cfloor-0.log", first), ("cfloor-1.log", second)):
        with open(os.path.join(path, name), "rb") as f:
            data = f.read(sum(len(fr) - 4 for fr in frames))
        assert data == b"".join(fr[4:] for fr in frames)


def test_idle_pairs_hold_the_idle_connections_in_their_windows_only(tmp_path, monkeypatch):
    """The idle row's pairs: each pair has one window with the idle connections open on the
    server (its threads up by as many) and one without, in alternating order, on one server."""
    monkeypatch.setattr(wire, "IDLE", 25)
    seen = []
    real_drive = wire.drive

    def drive(port, frames, **window):
        seen.append(wire._threads(server_pid[0]))
        return real_drive(port, frames, **window)

    server_pid = []
    real_server = wire._Server

    def server(directory):
        s = real_server(directory)
        server_pid.append(s.proc.pid)
        return s

    monkeypatch.setattr(wire, "drive", drive)
    monkeypatch.setattr(wire, "_Server", server)
    pairs = wire.idle_pairs(str(tmp_path / "store"), duration_s=0.3, warmup_s=0.1, pairs=2)
    assert len(pairs) == 2 and all(a > 0 and b > 0 for a, b in pairs)
    assert len(server_pid) == 1
    # the server's threads as each window began: the first pair alone first, the second
    # idle first (a thread per connection)
    assert len(seen) == 4
    assert seen[1] >= seen[0] + 25 and seen[2] >= seen[3] + 25
