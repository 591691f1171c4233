"""Every name of the public contract (shared/SPEC.md) is importable and has its shape."""

import inspect

import offsetlog
from offsetlog import OffsetAndMetadata, OffsetStore, TopicPartition, errors


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


SPEC_NAMES = {
    "offsetlog": ["OffsetStore", "TopicPartition", "OffsetAndMetadata"],
    "offsetlog.aio": ["AsyncOffsetStore"],
    "offsetlog.partitioner": ["partition_for"],
    "offsetlog.assignors": ["PartitionAssignor", "Subscription", "RangeAssignor",
                            "RoundRobinAssignor", "StickyAssignor", "CooperativeStickyAssignor",
                            "get_assignor", "register_assignor"],
    "offsetlog.errors": ["OffsetlogError", "IllegalGenerationError", "UnknownMemberIdError",
                         "RebalanceInProgressError", "FencedInstanceIdError",
                         "OffsetMetadataTooLargeError", "CoordinatorLoadInProgressError",
                         "InvalidGroupIdError", "StoreClosedError", "CorruptLogError"],
}


def test_every_name_of_the_spec_imports_from_where_the_spec_says():
    import importlib
    for module, names in SPEC_NAMES.items():
        m = importlib.import_module(module)
        for name in names:
            assert hasattr(m, name), (module, name)


def test_every_error_class_imports_from_offsetlog():
    import importlib
    for module in ("offsetlog.errors", "offsetlog.group.errors", "offsetlog.assignors.errors",
                   "offsetlog.member.errors"):
        m = importlib.import_module(module)
        for name, value in vars(m).items():
            if inspect.isclass(value) and issubclass(value, errors.OffsetlogError):
                assert getattr(offsetlog, name, None) is value, name
                assert name in offsetlog.__all__, name


def test_every_package_declares_what_it_exports():
    import importlib
    import tomllib

    from support.layers import REPO
    with open(f"{REPO}/pyproject.toml", "rb") as f:  # test_layout checks the list is complete
        packages = tomllib.load(f)["tool"]["setuptools"]["packages"]
    for name in packages:
        package = importlib.import_module(name)
        assert isinstance(getattr(package, "__all__", None), list), name
        for exported in package.__all__:
            assert hasattr(package, exported), (name, exported)


def test_importing_offsetlog_leaves_the_heavy_optional_parts_alone():
    """A service embedding the store pays for none of kio (the Kafka schemas: they took
    longer to import than the rest of offsetlog together), pyspark, or rich; they load with
    the part that needs them."""
    import subprocess
    import sys

    code = ("import sys, offsetlog, offsetlog.store; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'kio', 'pyspark', 'rich'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"
