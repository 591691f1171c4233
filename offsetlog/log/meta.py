"""``<store>/meta.json``: what a store is (docs/FORMAT.md, "meta.json").

It holds the partition count, fixed when the store is created: groups are placed by hash
modulo that count, so a wrong count (one flipped bit turns 1 into 3) would hide every group's
offsets. So the file carries a CRC-32 of its own fields, and every field is type-checked: a
file that does not check out is a ``MetaFileError`` naming it, never a guess.

A ``meta.json`` written before the checksum existed (no ``crc32`` field) is read as before;
opening the store rewrites it with one (``write``: temporary file, fsync, rename, fsync of the
directory).
"""

from __future__ import annotations

import json
import os
import zlib
from dataclasses import dataclass

from offsetlog.errors import MetaFileError, UnsupportedVersionError
from offsetlog.log import naming, segment
from offsetlog.log.format import STORE_FORMAT_VERSION, WRITE_AHEAD_FORMAT_VERSION

FORMAT_NAME = "offsetlog"
CRC_FIELD = "crc32"
#: more log partitions than this cannot be meant (Kafka's partition numbers are int32)
MAX_PARTITIONS = (1 << 31) - 1
#: a meta.json is a few dozen bytes; anything this large is not one
MAX_META_BYTES = 64 * 1024


@dataclass(frozen=True)
class StoreMeta:
    partitions: int
    #: the store keeps a MANIFEST (offsetlog.log.manifest): one missing is damage, not age
    manifest: bool = False
    #: the file carried a checksum (False: an older store's, to be rewritten)
    checksummed: bool = False
    #: the store format it says (``WRITE_AHEAD_FORMAT_VERSION``: its WRITE-AHEAD file may hold
    #: entries)
    version: int = STORE_FORMAT_VERSION


def checksum(fields: dict) -> int:
    """CRC-32 of the canonical JSON of ``fields`` without ``crc32``: keys sorted, no spaces."""
    body = {k: v for k, v in fields.items() if k != CRC_FIELD}
    return zlib.crc32(json.dumps(body, sort_keys=True, separators=(",", ":")).encode())


def encode(partitions: int, *, manifest: bool = True, write_ahead: bool = False) -> bytes:
    """``write_ahead``: the store's WRITE-AHEAD file may hold entries (its format version)."""
    version = WRITE_AHEAD_FORMAT_VERSION if write_ahead else STORE_FORMAT_VERSION
    fields = {"format": FORMAT_NAME, "version": version, "partitions": partitions,
              "manifest": manifest}
    fields[CRC_FIELD] = checksum(fields)
    return (json.dumps(fields, indent=2) + "\n").encode()


def write(root: str, partitions: int, *, manifest: bool = True, write_ahead: bool = False
          ) -> None:
    """Write ``meta.json`` crash-safely (the old file or the new one, whole)."""
    segment.atomic_write(naming.meta_path(root),
                         encode(partitions, manifest=manifest, write_ahead=write_ahead))


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def parse(data: bytes, meta_file: str) -> StoreMeta:
    """Check and decode the bytes of ``meta_file``.

    :raises MetaFileError: not JSON, not an object, a field missing or of the wrong type, or
        a checksum mismatch
    :raises UnsupportedVersionError: a store format newer than this code reads
    """
    def bad(why: str) -> MetaFileError:
        return MetaFileError(f"{meta_file}: {why}", path=meta_file)

    try:
        meta = json.loads(data)
    except (ValueError, RecursionError) as e:  # UnicodeDecodeError is a ValueError
        raise bad(f"unreadable ({e})") from None
    if not isinstance(meta, dict):
        raise bad(f"holds a JSON {type(meta).__name__}, not an object: not an offsetlog store")
    if meta.get("format") != FORMAT_NAME:
        raise bad("does not describe an offsetlog store")
    version = meta.get("version", 0)
    if not _is_int(version) or version < 1:
        raise bad(f"version must be a positive integer, not {version!r}")
    # A newer format may check itself differently: say so rather than "checksum mismatch".
    if version > WRITE_AHEAD_FORMAT_VERSION:
        raise UnsupportedVersionError(
            f"{os.path.dirname(meta_file)} is store format {version}, newer than this offsetlog "
            f"reads ({WRITE_AHEAD_FORMAT_VERSION})")
    if CRC_FIELD in meta:
        crc = meta[CRC_FIELD]
        if not _is_int(crc) or crc != checksum(meta):
            raise bad(f"checksum mismatch (stored {crc!r}, computed {checksum(meta)}): the file "
                      "was damaged or edited; restore it, or repair it with the store's real "
                      "partition count")
    partitions = meta.get("partitions")
    if not _is_int(partitions) or not 1 <= partitions <= MAX_PARTITIONS:
        raise bad(f"has no valid partition count ({partitions!r})")
    manifest = meta.get("manifest", False)
    if not isinstance(manifest, bool):
        raise bad(f"manifest must be true or false, not {manifest!r}")
    return StoreMeta(partitions, manifest, CRC_FIELD in meta, version)


def read(root: str) -> StoreMeta | None:
    """The store's meta.json, checked; None if there is none.

    :raises MetaFileError, UnsupportedVersionError: see ``parse``
    :raises SymlinkError: meta.json is a symbolic link
    """
    meta_file = naming.meta_path(root)
    try:
        fd = segment.open_fd(meta_file, os.O_RDONLY)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as f:
        data = f.read(MAX_META_BYTES + 1)
    if len(data) > MAX_META_BYTES:
        raise MetaFileError(f"{meta_file}: larger than {MAX_META_BYTES} bytes: not a meta.json",
                            path=meta_file)
    return parse(data, meta_file)
