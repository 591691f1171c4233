"""The log layer: everything that is bytes on disk, and nothing above it.

Bottom to top: ``format`` (the constants of docs/FORMAT.md: record kinds, the batch header),
``records`` (record schemas), ``framing`` (a batch's bytes and checksums: encode, frame, read
back, report corruption), ``naming`` (file and directory names), ``segment`` (one segment
file: the only module that opens log files or calls fsync) and ``partition_log`` (one log
partition's segments, rolling). Nothing here knows about tables, groups or the store.
"""

from offsetlog.log.format import Attribute, RecordType
from offsetlog.log.partition_log import PartitionLog

__all__ = ["Attribute", "PartitionLog", "RecordType"]
