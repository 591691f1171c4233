"""The event loop's wake-ups from connection threads (``Connections.later``).

Every ``call_soon_threadsafe`` writes a byte to the loop's self-pipe, and a signal's
wake-up is a byte in the same pipe: a thousand connections closing at once, a byte each,
filled it, and the SIGTERM sent next was dropped with its byte (the server never stopped;
found by the bench's idle case). ``later`` wakes the loop once per batch of calls."""

from __future__ import annotations

import asyncio
import threading
import types

from offsetlog.server.connection import Connections

CALLS = 5000


def _connections() -> Connections:
    config = types.SimpleNamespace(connections_max_idle_ms=600_000)
    return Connections(types.SimpleNamespace(config=config), clock=lambda: 0)


def test_a_burst_of_calls_from_threads_wakes_the_loop_a_few_times_and_runs_all_in_order():
    async def main():
        loop = asyncio.get_running_loop()
        conns = _connections()
        wakes = 0
        write = loop._write_to_self

        def counted():
            nonlocal wakes
            wakes += 1
            write()
        loop._write_to_self = counted
        ran: list = []
        done = threading.Event()

        def burst(part):
            for i in range(CALLS):
                conns.later(ran.append, (part, i))
            done.set()
        threads = [threading.Thread(target=burst, args=(p,)) for p in range(2)]
        for t in threads:
            t.start()
        while len(ran) < 2 * CALLS:
            await asyncio.sleep(0.005)
        for t in threads:
            t.join()
        return wakes, ran

    wakes, ran = asyncio.run(main())
    for part in range(2):  # each thread's calls ran once each, in the order it made them
        assert [i for p, i in ran if p == part] == list(range(CALLS))
    # a wake-up per call would be 10,000 bytes: far past a self-pipe's buffer
    assert wakes < 200, wakes


def test_a_failing_call_is_logged_and_the_batch_goes_on(caplog):
    async def main():
        conns = _connections()
        ran: list = []

        def fail():
            raise ValueError("boom")
        await asyncio.to_thread(lambda: (conns.later(ran.append, 1), conns.later(fail),
                                         conns.later(ran.append, 2)))
        for _ in range(100):
            if len(ran) == 2:
                break
            await asyncio.sleep(0.01)
        return ran

    assert asyncio.run(main()) == [1, 2]
    assert "boom" in caplog.text
