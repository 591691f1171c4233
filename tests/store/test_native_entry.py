"""The usual commit call's native entry (``CommitRouter.commit_sync``/``commit_async``,
native/src/route.rs): which calls take it, which are left to the Python path, and the hooks
and settings it must honour as the Python path does."""

from __future__ import annotations

import inspect
import time
from collections import OrderedDict

import pytest

from offsetlog import OffsetAndMetadata as OAM
from offsetlog import OffsetStore, StoreClosedError, StoreFailedError
from offsetlog import TopicPartition as TP
from offsetlog.store.config import system_clock_ms
from offsetlog.table import OffsetTable


class Str(str):
    """A str of another type: equal to the standalone member id, but not the usual call."""


@pytest.fixture
def other_calls(monkeypatch):
    """Records every call that ``OffsetStore`` hands to its Python path (and lets it run)."""
    seen = []
    for name in ("_commit_sync_other", "_commit_async_other"):
        real = getattr(OffsetStore, name)

        def spy(self, group_id, *args, _real=real, _name=name):
            seen.append((_name, group_id))
            return _real(self, group_id, *args)

        monkeypatch.setattr(OffsetStore, name, spy)
    return seen


def test_the_usual_call_is_committed_natively_and_every_other_by_python(tmp_path, other_calls):
    with OffsetStore.open(tmp_path, partitions=2) as store:
        store.commit_sync("g", {TP("t", 0): 1, TP("t", 1): OAM(2)})
        store.commit_async("g", {TP("t", 2): 3}).result(10)
        store.commit_async("g", {TP("t", 3): 4}, callback=lambda o, e: None).result(10)
        # metadata and leader epochs too, Kafka's clients' usual commit
        store.commit_sync("metadata", {TP("t", 0): OAM(1, "m"), TP("t", 1): OAM(2, None, -1)})
        store.commit_async("epoch", {TP("t", 0): OAM(1, "", 7), TP("t", 1): OAM(2, "é", 0)}
                           ).result(10)
        # and a timeout: None, or seconds as the Python path takes them
        for timeout in (None, 5, 0.5, 0, float("inf"), 10.0**300):
            store.commit_sync("timeouts", {TP("t", 0): 1}, timeout=timeout)
        # (a keyword argument given as its default goes through the method, to the same entry)
        store.commit_sync("timeouts", {TP("t", 0): 2}, timeout=5, member_id="")
        assert other_calls == []
        # within the limit of 4096 UTF-16 code units, but not surely by its 6000 UTF-8 bytes
        store.commit_sync("wide", {TP("t", 0): OAM(1, "é" * 3000)})
        store.commit_sync("empty", {})
        store.commit_sync("member-str", {TP("t", 0): 1}, member_id=Str(""))
        store.commit_async("mapping", OrderedDict({TP("t", 0): 1})).result(10)
        store.commit_async("wide-epoch", {TP("t", 0): OAM(1, "é" * 3000, 3)}).result(10)
        assert other_calls == [
            ("_commit_sync_other", "wide"),
            ("_commit_sync_other", "empty"), ("_commit_sync_other", "member-str"),
            ("_commit_async_other", "mapping"), ("_commit_async_other", "wide-epoch")]
        assert store.fetch("g") == {TP("t", 0): OAM(1), TP("t", 1): OAM(2),
                                    TP("t", 2): OAM(3), TP("t", 3): OAM(4)}
        assert store.fetch("metadata") == {TP("t", 0): OAM(1, "m"), TP("t", 1): OAM(2)}
        assert store.fetch("epoch") == {TP("t", 0): OAM(1, "", 7), TP("t", 1): OAM(2, "é", 0)}
        assert store.fetch("wide") == {TP("t", 0): OAM(1, "é" * 3000)}
        assert store.fetch("timeouts") == {TP("t", 0): OAM(2)}
        assert store.fetch("wide-epoch") == {TP("t", 0): OAM(1, "é" * 3000, 3)}
    with OffsetStore.open(tmp_path, partitions=2) as store:  # and so does the replay
        assert store.fetch("metadata") == {TP("t", 0): OAM(1, "m"), TP("t", 1): OAM(2)}
        assert store.fetch("epoch") == {TP("t", 0): OAM(1, "", 7), TP("t", 1): OAM(2, "é", 0)}


def test_bad_arguments_are_refused_by_the_python_path_as_before(tmp_path, other_calls):
    from offsetlog.errors import InvalidArgumentError, InvalidCommitError
    with OffsetStore.open(tmp_path, partitions=1) as store:
        with pytest.raises(TypeError):
            store.commit_async("g", {TP("t", 0): 1}, callback=5)
        with pytest.raises(InvalidCommitError):
            store.commit_sync("g", {TP("t", 0): -1})
        with pytest.raises(InvalidCommitError):
            store.commit_sync("", {TP("t", 0): 1})  # (no route is made for a bad group id)
        for timeout in (-1, float("nan"), True, "5"):
            with pytest.raises(InvalidArgumentError):
                store.commit_sync("g", {TP("t", 0): 1}, timeout=timeout)
        store.commit_sync("g", {TP("t", 0): 1}, timeout=10**400)  # (no float holds it: none)
        assert [name for name, _ in other_calls] == [
            "_commit_async_other", "_commit_sync_other"] + ["_commit_sync_other"] * 5
        assert "" not in store._router.routes
        assert store.fetch("g") == {TP("t", 0): OAM(1)}
    with pytest.raises(StoreClosedError):
        store.commit_sync("g", {TP("t", 0): 1})
    with pytest.raises(StoreClosedError):
        store.commit_async("g", {TP("t", 0): 1})


def test_a_call_on_a_failed_store_fails_its_future_and_runs_its_callback(tmp_path,
                                                                         monkeypatch):
    """The native entry finds the store failed in its lock hold and leaves the call to the
    Python path, which reports the failure the way it always has: the future, the callback."""
    def boom(*_args):
        raise RuntimeError("bug in apply")

    with OffsetStore.open(tmp_path, partitions=1) as store:
        monkeypatch.setattr(OffsetTable, "apply_commit_calls", boom)
        with pytest.raises(StoreFailedError):
            store.commit_sync("g", {TP("t", 0): 1})
        monkeypatch.undo()
        called = []
        fut = store.commit_async("g", {TP("t", 0): 2}, callback=lambda o, e: called.append(e))
        assert isinstance(fut.exception(10), StoreFailedError)
    assert len(called) == 1 and isinstance(called[0], StoreFailedError)


def test_a_lone_commit_applies_through_the_tables_hook_when_a_test_replaces_it(
        tmp_path, monkeypatch):
    """The lone commit applies natively, unless ``OffsetTable.apply_commit_calls`` was
    replaced: then it calls the replacement, and its failure poisons the store with the
    offsets durable but never applied (a reopen replays them)."""
    applied = []

    def spy(self, base, calls):
        applied.append((base, [tuple(fields) for fields in calls]))
        raise RuntimeError("bug in apply")

    with OffsetStore.open(tmp_path, partitions=1, fsync="always") as store:
        store.commit_sync("g", {TP("t", 0): 1})
        monkeypatch.setattr(OffsetTable, "apply_commit_calls", spy)
        with pytest.raises(StoreFailedError) as err:
            store.commit_sync("g", {TP("t", 0): 2})
        assert isinstance(err.value.cause, RuntimeError)
        assert [(base, len(calls)) for base, calls in applied] == [(1, 1)]
        monkeypatch.undo()
        assert store.fetch("g") == {TP("t", 0): OAM(1)}
    with OffsetStore.open(tmp_path) as again:
        assert again.fetch("g") == {TP("t", 0): OAM(2)}


def test_the_default_clock_is_wall_clock_milliseconds():
    before = time.time_ns() // 1_000_000
    now = system_clock_ms()
    after = time.time_ns() // 1_000_000
    assert before <= now <= after and type(now) is int


def test_a_store_clock_of_its_own_stamps_the_usual_call(tmp_path):
    """The native entry reads the store's clock when it is not the default one: offsets
    committed at t expire at t + retention, by that clock."""
    now = [1_000_000]
    with OffsetStore.open(tmp_path, partitions=1, clock=lambda: now[0],
                          retention_ms=1000, retention_check_interval_ms=0) as store:
        store.commit_sync("g", {TP("t", 0): 1})
        store.commit_async("g", {TP("t", 1): 1}).result(10)
        now[0] += 999
        assert store.expire_offsets() == 0
        now[0] += 2
        assert store.expire_offsets() == 2


def test_a_cycle_through_a_stores_clock_is_collected(tmp_path):
    """The router and each route hold the store's clock natively; a clock that holds the
    store (a bound method of its owner, say) must not keep both alive for ever."""
    import gc
    import weakref

    class Clock:
        def __call__(self):
            return 1_000_000

    clock = Clock()
    store = OffsetStore.open(tmp_path, partitions=1, clock=clock)
    clock.store = store
    store.commit_sync("g", {TP("t", 0): 1})  # its route holds the clock too
    store.commit_async("g", {TP("t", 0): 2}).result(10)
    store.close()
    gone = weakref.ref(clock)
    del clock, store
    gc.collect()
    assert gone() is None


# -- the store's own commit attributes (native/src/store_entry.rs) -----------------------------

def _outcome(call):
    """What a call did: its exception's type and text, or what it returned (a future's
    outcome once resolved)."""
    try:
        result = call()
    except TypeError:  # (argument binding: worded by CPython or by PyO3)
        return ("raised", TypeError)
    except Exception as e:  # noqa: BLE001 - the outcome itself is what is compared
        return ("raised", type(e), str(e))
    if hasattr(result, "exception"):
        error = result.exception(10)
        return ("future", type(error), str(error)) if error else ("future", None, None)
    return ("returned", result)


#: (args, kwargs) of calls, right and wrong: each must end as the Python method ends it
CALLS = [
    (("g", {TP("t", 0): 1}), {}),
    (("g", {TP("t", 0): OAM(2)}), {}),
    (("g", {TP("t", 0): 3}), {"generation_id": -1}),
    (("g", {TP("t", 0): 4}), {"member_id": ""}),
    (("g", {TP("t", 0): 5}), {"group_instance_id": None}),
    (("g", {TP("t", 0): 6}), {"generation_id": None}),
    (("g", {TP("t", 0): 7}), {"member_id": None}),
    (("g", {TP("t", 0): 8}), {"generation_id": True}),
    (("g", {TP("t", 0): 9}), {"group_instance_id": 5}),
    (("g", {TP("t", 0): 10}), {"no_such_argument": 1}),
    (("g", {TP("t", 0): 11}, -1), {}),
    (("g",), {}),
    ((), {"group_id": "g", "offsets": {TP("t", 0): 12}}),
    (("g", {TP("t", 0): -1}), {}),
    (("g", {("t", 0): 13}), {}),
    ((b"g", {TP("t", 0): 14}), {}),
    (("g", [(TP("t", 0), 15)]), {}),
    (("g", {}), {}),
    # a member's arguments (the group is not the coordinator's: fenced)
    (("g", {TP("t", 0): 16}), {"generation_id": 3, "member_id": "m"}),
    (("g", {TP("t", 0): 17}), {"generation_id": 2**31, "member_id": "m"}),
    (("g", {TP("t", 0): 18}), {"member_id": "m"}),
    (("g", {TP("t", 0): 19}), {"group_instance_id": "i"}),
    (("g", {TP("t", 0): 20}), {"generation_id": -1, "member_id": "", "group_instance_id": None}),
    (("g", {TP("t", 0): 21}), {"generation_id": 3, "member_id": "m\ud800"}),
]


@pytest.mark.parametrize("name", ["commit_sync", "commit_async"])
def test_the_stores_attributes_end_every_call_as_its_methods_do(tmp_path, name):
    """``store.commit_sync`` and ``store.commit_async`` are native attributes of the store
    that take the usual call and hand every other to the class's method: every call, right or
    wrong, ends the same way through either (a store each, the same calls in the same order),
    and both stores hold the same offsets after."""
    extra = [(("g", {TP("t", 1): 20}), {"timeout": 5}), (("g", {TP("t", 1): 21}),
                                                         {"timeout": -1})]
    if name == "commit_async":
        extra = [(("g", {TP("t", 1): 22}), {"callback": None}),
                 (("g", {TP("t", 1): 23}), {"callback": lambda o, e: None}),
                 (("g", {TP("t", 1): 24}), {"callback": 5})]
    with OffsetStore.open(tmp_path / "a", partitions=2) as a, \
            OffsetStore.open(tmp_path / "b", partitions=2) as b:
        attribute = getattr(a, name)
        method = getattr(OffsetStore, name).__get__(b)
        assert type(attribute).__name__ == "builtin_function_or_method"
        ours = inspect.signature(attribute).parameters.values()
        theirs = list(inspect.signature(getattr(OffsetStore, name)).parameters.values())[1:]
        assert ([(p.name, p.kind, p.default) for p in ours]
                == [(p.name, p.kind, p.default) for p in theirs])
        for args, kwargs in CALLS + extra:
            assert (_outcome(lambda: attribute(*args, **kwargs))
                    == _outcome(lambda: method(*args, **kwargs))), (args, kwargs)
        a.flush()
        b.flush()
        assert a.fetch("g") == b.fetch("g") != {}


@pytest.mark.parametrize("name", ["commit_sync", "commit_async"])
def test_a_members_commits_end_as_the_methods_end_them(tmp_path, name, other_calls):
    """A consumer group member's commits (right generation, stale, unknown member, a static
    member's instance, a timeout) through the store's attribute, natively, end as through the
    class's method, on two stores whose group went through the same join."""
    from offsetlog.group import GroupConfig

    def joined(path):
        ids = iter(range(1, 100))
        store = OffsetStore.open(path, partitions=2, group_config=GroupConfig(
            initial_rebalance_delay_ms=0, member_id_factory=lambda p: f"{p}-{next(ids)}"))
        join = store.join_group("grp", protocols=[("range", b"")], client_id="c",
                                group_instance_id="inst").result(10)
        assert store.sync_group("grp", member_id=join.member_id,
                                generation_id=join.generation_id, group_instance_id="inst",
                                assignments={join.member_id: b""}).result(10).error is None
        return store, join

    (a, join), (b, _) = joined(tmp_path / "a"), joined(tmp_path / "b")
    gen, member = join.generation_id, join.member_id
    calls = [{"generation_id": gen, "member_id": member, "group_instance_id": "inst"},
             {"generation_id": gen, "member_id": member},  # (a static member named without)
             {"generation_id": gen + 1, "member_id": member, "group_instance_id": "inst"},
             {"generation_id": gen, "member_id": "nobody"},
             {"generation_id": gen, "member_id": member, "group_instance_id": "other"},
             {"generation_id": -1, "member_id": ""}]  # (a simple consumer's, in a managed group)
    if name == "commit_sync":
        calls.append({"generation_id": gen, "member_id": member, "group_instance_id": "inst",
                      "timeout": 5})
    with a, b:
        attribute = getattr(a, name)
        method = getattr(OffsetStore, name).__get__(b)
        for i, kwargs in enumerate(calls):
            offsets = {TP("t", 0): 100 + i, TP("t", 1): OAM(200 + i, "m", 4)}
            assert (_outcome(lambda: attribute("grp", offsets, **kwargs))
                    == _outcome(lambda: method("grp", offsets, **kwargs))), kwargs
        a.flush()
        b.flush()
        assert a.fetch("grp") == b.fetch("grp") != {}
    # the attribute took every one of them natively; the method, the Python path (but the
    # simple consumer's, which its router takes natively too)
    assert {(where, group) for where, group in other_calls} == {(f"_{name}_other", "grp")}
    assert len(other_calls) == len(calls) - 1


def test_a_subclass_that_overrides_a_commit_call_keeps_its_override(tmp_path):
    seen = []

    class Audited(OffsetStore):
        def commit_async(self, group_id, offsets, **kwargs):
            seen.append(group_id)
            return super().commit_async(group_id, offsets, **kwargs)

    with Audited.open(tmp_path, partitions=1) as store:
        store.commit_async("g", {TP("t", 0): 1}).result(10)
        store.commit_sync("g", {TP("t", 0): 2})
        assert seen == ["g"]
        assert "commit_async" not in vars(store) and "commit_sync" not in vars(store)
        assert store.fetch("g") == {TP("t", 0): OAM(2)}


def test_a_closed_store_is_collected_with_its_commit_attributes(tmp_path):
    """The store holds its native commit attributes and they hold its methods: a cycle the
    collector must break."""
    import gc
    import weakref

    store = OffsetStore.open(tmp_path, partitions=1)
    store.commit_sync("g", {TP("t", 0): 1})
    store.commit_async("g", {TP("t", 0): 2}).result(10)
    store.close()
    gone = weakref.ref(store)
    del store
    gc.collect()
    assert gone() is None
