"""Client sessions of tests/clients/, each run against a target (a wire server or the Kafka
broker: anything with ``.bootstrap``) and returning what the clients saw, normalised so the
two targets' outcomes can be compared with ``==``.

A *client* here is anything with ``member(bootstrap, group, topic, strategy, client_id,
instance_id, session_ms) -> MemberProcess`` (a long-lived member in a child process, see
client_runners.MemberProcess). Member ids are generated (``<client.id>-<uuid>`` on both
targets), so the clients get client ids that sort in the order they are named: the
client-side assignors order members by member id, and their outcome is then the same on
every target.
"""

from __future__ import annotations

import threading
import time

from support.client_runners import MemberProcess
from support.wire_clients import described

SESSION_MS = 3000
#: a member that stops heartbeating is evicted this long after its last heartbeat
SHORT_SESSION_MS = 1500


def on_targets(targets: dict, fn) -> dict:
    """``{name: fn(target)}``, the targets run side by side (threads): the sessions mostly
    wait for the coordinator, so running them together halves the time."""
    out: dict = {}
    errors: dict = {}

    def run(name, target):
        try:
            out[name] = fn(target)
        except BaseException as e:  # re-raised below, in the test's thread
            errors[name] = e

    threads = [threading.Thread(target=run, args=item) for item in targets.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for name, e in errors.items():
        raise AssertionError(f"on {name}: {e}") from e
    return out


def same(results: dict, what: str = "") -> None:
    """The outcome on offsetlog equals the outcome on Kafka (when both ran)."""
    if "kafka" in results:
        assert results["offsetlog"] == results["kafka"], (
            f"{what}: offsetlog and Kafka differ:\noffsetlog: {results['offsetlog']}\n"
            f"kafka:     {results['kafka']}")


def assigned_count(m: MemberProcess) -> int:
    return sum(1 for e in m.seen if e.get("event") == "assigned")


def wait_settled(members: list[MemberProcess], partitions: int, *, after: int | None = None,
                 since: dict | None = None, timeout: float = 45) -> list[dict]:
    """Wait until every member's latest assignment is of one generation (above ``after``)
    and together they hold each of ``partitions`` exactly once; return those events.

    A client that does not tell its generation (librdkafka: ``None``) is judged by its
    events instead: each member named in ``since`` (name -> ``assigned_count`` then) must
    have had a new assignment since."""
    deadline = time.monotonic() + timeout
    while True:
        for m in members:
            m.drain()
            if m.proc.poll() is not None:
                raise AssertionError(f"{m.name} exited {m.proc.returncode}: "
                                     f"{''.join(m.stderr)[-3000:]}")
        lasts = [m.last("assigned") for m in members]
        generations = {e["generation"] for e in lasts if e}
        known = None not in generations
        if (all(lasts) and (not known or len(generations) == 1)
                and (after is None or not known or lasts[0]["generation"] > after)
                and all(assigned_count(m) > (since or {}).get(m.name, -1) for m in members)
                and sorted(p for e in lasts for p in e["partitions"]) == list(range(partitions))):
            return lasts
        if time.monotonic() > deadline:
            raise AssertionError(f"not settled: {[(m.name, m.seen[-4:]) for m in members]}\n"
                                 + "\n".join(''.join(m.stderr)[-1500:] for m in members))
        time.sleep(0.05)


def wait_stable(target, group: str, members: int, timeout: float = 30) -> dict:
    """DescribeGroups (kafka-python's admin) until the group is Stable with ``members``."""
    deadline = time.monotonic() + timeout
    while True:
        view = described(target, group)
        if view["state"] == "Stable" and len(view["members"]) == members:
            return view
        if time.monotonic() > deadline:
            raise AssertionError(f"group {group} not Stable with {members}: {view}")
        time.sleep(0.1)


def group_session(client, target, group: str, topic: str, partitions: int,
                  strategy: str = "range", static: bool = True) -> dict:
    """Formation, a rebalance on join, a leave, a missed heartbeat, a static member's
    rejoin (unless ``static`` is false: a client without static membership), and commits as
    a member: the assignments and relative generations at each step.
    """
    steps: dict = {}
    started: list[MemberProcess] = []

    def member(client_id, instance_id=None, session_ms=SESSION_MS):
        m = client.member(target.bootstrap, group, topic, strategy, client_id, instance_id,
                          session_ms)
        started.append(m)
        return m

    def record(name, events, names, base):
        gen = events[0]["generation"]
        steps[name] = {"assignment": {n: e["partitions"] for n, e in zip(names, events)},
                       "generation": None if gen is None else gen - base}
        return gen

    def now(*ms):
        """What each member has seen so far (for ``wait_settled``'s ``since``)."""
        return {m.name: assigned_count(m) for m in ms}

    try:
        a = member("m1-a")
        (first,) = wait_settled([a], partitions)
        base = first["generation"]
        record("formed", [first], ["a"], base)
        view = wait_stable(target, group, 1)
        steps["formed"]["described"] = {"state": view["state"], "protocol": view["protocol"]}

        b = member("m2-b")
        g = record("joined", wait_settled([a, b], partitions, after=base, since=now(a)),
                   ["a", "b"], base)

        b.close()
        g = record("left", wait_settled([a], partitions, after=g, since=now(a)), ["a"], base)

        c = member("m3-c", session_ms=SHORT_SESSION_MS)
        g = record("joined_again", wait_settled([a, c], partitions, after=g, since=now(a)),
                   ["a", "c"], base)
        c.kill()  # no LeaveGroup: it just stops heartbeating
        g = record("heartbeat_missed", wait_settled([a], partitions, after=g, since=now(a)),
                   ["a"], base)

        s2 = None
        if static:
            s = member("m4-s", instance_id="static-s", session_ms=6000)
            g = record("static_joined", wait_settled([a, s], partitions, after=g,
                                                     since=now(a)), ["a", "s"], base)
            wait_stable(target, group, 2)
            seen_by_a = now(a)
            s.kill()
            s2 = member("m4-s", instance_id="static-s", session_ms=6000)
            # the same instance id back within its session: its partitions, no rebalance
            back = s2.wait_for(lambda e: e.get("event") == "assigned", what="its rejoin")
            view = wait_stable(target, group, 2)
            a.drain()
            steps["static_rejoined"] = {
                "partitions": back["partitions"],
                "generation": None if g is None else back["generation"] - base,
                "others_rebalanced": now(a) != seen_by_a,
                "described_members": len(view["members"])}
        mine = steps["static_joined" if static else "heartbeat_missed"]["assignment"]["a"]
        a.send(f"commit {mine[0]} 42")
        steps["commit"] = a.wait_for(lambda e: e.get("event") == "committed", what="commit")
        a.send("committed")
        offsets = a.wait_for(lambda e: e.get("event") == "offsets", what="offsets")["offsets"]
        steps["fetched"] = {int(p): o for p, o in offsets.items()}
        if s2 is not None:
            s2.kill()
        a.close()
        steps["after_close"] = described(target, group)["state"]
    finally:
        for m in started:
            m.kill()
    return steps


def cooperative_session(client, target, group: str, topic: str, partitions: int) -> dict:
    """cooperative-sticky: one member takes everything, a second joins (two rebalances:
    the first revokes what moves, the second assigns it), then leaves."""
    started: list[MemberProcess] = []
    try:
        a = client.member(target.bootstrap, group, topic, "cooperative-sticky", "m1-a", None,
                          SESSION_MS)
        started.append(a)
        (first,) = wait_settled([a], partitions)
        base = first["generation"]
        before = {a.name: assigned_count(a)}
        b = client.member(target.bootstrap, group, topic, "cooperative-sticky", "m2-b", None,
                          SESSION_MS)
        started.append(b)
        ea, eb = wait_settled([a, b], partitions, after=base, since=before)
        # what a held between the two rebalances (the revocation leaves it a subset)
        a_history = [e["partitions"] for e in a.seen if e.get("event") == "assigned"]
        view = wait_stable(target, group, 2)
        before = {a.name: assigned_count(a)}
        b.close()
        (after,) = wait_settled([a], partitions, after=ea["generation"], since=before)

        def rel(gen):
            return None if gen is None else gen - base

        return {"alone": first["partitions"],
                "joined": {"a": ea["partitions"], "b": eb["partitions"],
                           "generation": rel(ea["generation"])},
                "a_kept_throughout": sorted(set.intersection(*map(set, a_history))),
                "protocol": view["protocol"],
                "left": {"a": after["partitions"], "generation": rel(after["generation"])}}
    finally:
        for m in started:
            m.kill()
