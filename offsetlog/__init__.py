"""offsetlog: an embedded, crash-safe consumer-offset store modelled on Kafka's __consumer_offsets.

Start at :class:`OffsetStore` (``offsetlog.store``); docs/DESIGN.md maps the modules.
"""

from offsetlog.errors import OffsetlogError
from offsetlog.store import OffsetStore
from offsetlog.types import OffsetAndMetadata, TopicPartition

__all__ = ["OffsetAndMetadata", "OffsetStore", "OffsetlogError", "TopicPartition"]
__version__ = "0.1.0"
