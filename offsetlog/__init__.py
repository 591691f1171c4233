"""offsetlog: an embedded, crash-safe consumer-offset store modelled on Kafka's __consumer_offsets.

Start at :class:`OffsetStore` (``offsetlog.store``); docs/DESIGN.md maps the modules.
"""

from offsetlog.errors import OffsetlogError
from offsetlog.types import OffsetAndMetadata, TopicPartition

__all__ = ["OffsetAndMetadata", "OffsetStore", "OffsetlogError", "TopicPartition"]
__version__ = "0.1.0"


def __getattr__(name: str):
    # OffsetStore is imported on first use: the store wires recovery and compaction, which
    # import the format layer from this package, so an eager import here would be circular.
    if name == "OffsetStore":
        from offsetlog.store import OffsetStore
        return OffsetStore
    raise AttributeError(f"module 'offsetlog' has no attribute {name!r}")
