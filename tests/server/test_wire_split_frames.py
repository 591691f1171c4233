"""A request that arrives in several reads is answered (the connection's buffer is a
bytearray, which kio's int reader refused: the reader raised in the event loop and the
client waited forever)."""

from __future__ import annotations

import time

from support.wire_raw import frame, read_answer
from support.wire_server import raw_socket


def test_a_frame_split_across_reads_is_answered(server):
    data = frame(18, 3, correlation_id=7, client_software_name="split",
                 client_software_version="1")
    with raw_socket(server) as s:
        for cut in (1, 3, 5, len(data) - 1):
            s.sendall(data[:cut])
            time.sleep(0.05)
            s.sendall(data[cut:])
            correlation_id, answer = read_answer(s, 18, 3)
            assert correlation_id == 7 and answer.api_keys
