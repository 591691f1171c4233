"""Every name of the public contract (shared/SPEC.md) is importable and has its shape."""

import inspect

import offsetlog
from offsetlog import OffsetAndMetadata, OffsetStore, TopicPartition
from offsetlog import errors
def test_exports():
    for name in offsetlog.__all__:
        assert hasattr(offsetlog, name), name
    from offsetlog.aio import AsyncOffsetStore  # noqa: F401
    from offsetlog.partitioner import partition_for  # noqa: F401


def test_value_types():
    tp = TopicPartition("t", 1)
    assert tp == ("t", 1) and hash(tp) == hash(("t", 1))
    assert sorted([TopicPartition("b", 0), TopicPartition("a", 2), TopicPartition("a", 1)]) == [
        ("a", 1), ("a", 2), ("b", 0)]
    assert OffsetAndMetadata(5) == (5, "", None)


def test_store_signatures():
    params = inspect.signature(OffsetStore.open).parameters
    for name in ("partitions", "fsync", "retention_ms", "segment_bytes", "clock"):
        assert params[name].kind is inspect.Parameter.KEYWORD_ONLY, name
    commit = inspect.signature(OffsetStore.commit_sync).parameters
    for name in ("generation_id", "member_id", "group_instance_id", "timeout"):
        assert commit[name].kind is inspect.Parameter.KEYWORD_ONLY
    assert "callback" in inspect.signature(OffsetStore.commit_async).parameters
    for method in ("fetch", "committed", "groups", "delete_offsets", "delete_group",
                   "expire_offsets", "flush", "close", "init_transactions"):
        assert callable(getattr(OffsetStore, method))
    for name in ("keep_prepared", "transaction_timeout_ms"):
        assert (inspect.signature(OffsetStore.init_transactions).parameters[name].kind
                is inspect.Parameter.KEYWORD_ONLY)
    assert "require_stable" in inspect.signature(OffsetStore.fetch).parameters


def test_error_names():
    for name in ("IllegalGenerationError", "UnknownMemberIdError", "RebalanceInProgressError",
                 "FencedInstanceIdError", "OffsetMetadataTooLargeError",
                 "CoordinatorLoadInProgressError", "InvalidGroupIdError", "StoreClosedError",
                 "CorruptLogError", "StoreFailedError", "StoreLockedError",
                 "ProducerFencedError", "InvalidTxnStateError", "TransactionTimeoutError",
                 "UnstableOffsetCommitError"):
        assert issubclass(getattr(errors, name), errors.OffsetlogError), name


def test_every_error_class_imports_from_offsetlog():
    """Every exception class offsetlog defines is in ``offsetlog.__all__`` and importable
    from ``offsetlog`` (issue 15, item 14)."""
    import importlib
    import pkgutil

    found = {}
    for info in pkgutil.walk_packages(offsetlog.__path__, "offsetlog."):
        if info.name.endswith(".errors") or info.name == "offsetlog.errors":
            module = importlib.import_module(info.name)
            for name, value in vars(module).items():
                if (isinstance(value, type) and issubclass(value, errors.OffsetlogError)
                        and value.__module__ == module.__name__):
                    found[name] = value
    assert {"OffsetlogError", "GroupIdNotFoundError", "UnknownAssignorError",
            "MemberClosedError", "StoreNotFoundError"} <= set(found)
    for name, cls in found.items():
        assert name in offsetlog.__all__, name
        assert getattr(offsetlog, name) is cls, name
