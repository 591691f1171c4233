"""The store's ACLs (``store.acls``): Kafka ACL bindings kept as ACL records
(docs/FORMAT.md, ``ACL``), created and deleted through the one write path, read from the
tables they were applied to.

Every ACL record goes to log partition 0: one create or delete call is one batch, atomic
across its bindings, and the ACLs of a store are the ACL entries of that partition's table.
Creation and deletion are deferred items (``store/deferred.py``): they see the table as of
their place in the queue, so of two concurrent deletions of one binding one writes the
tombstone, and creating a binding that exists writes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable

from offsetlog.acl.model import AclBinding, AclFilter
from offsetlog.log import records as rec
from offsetlog.store.commit_queue import QueueItem
from offsetlog.store.part import StorePart
from offsetlog.table import OffsetTable

#: the log partition every ACL record is written to
ACL_PARTITION = 0


def _plain(b) -> AclBinding:
    """A binding of plain ints and strs (what the log holds), from any 7-tuple of them."""
    t, name, pattern, principal, host, op, permission = b
    return AclBinding(int(t), str(name), int(pattern), str(principal), str(host), int(op),
                      int(permission))


class Acls(StorePart):
    """``create``, ``delete`` and ``list`` of ACL bindings (``offsetlog.acl.AclBinding``)."""

    def list(self, acl_filter: AclFilter | None = None) -> list[AclBinding]:
        """Every binding (those ``acl_filter`` matches), sorted."""
        self._check_open()
        part = self._parts[ACL_PARTITION]
        with part.lock:
            keys = list(part.table.acls)
        out = sorted(AclBinding(*k) for k in keys)
        return out if acl_filter is None else [b for b in out if acl_filter.matches(b)]

    def create(self, bindings: Iterable[AclBinding]) -> None:
        """Add ``bindings`` (durable on return, in one batch); those present already are
        left as they are. Bindings are not checked here (``offsetlog.acl.binding_error``
        is Kafka's check): the store keeps whatever it is given."""
        self._check_open()
        wanted = [_plain(b) for b in bindings]
        now = self._clock()

        def records(table: OffsetTable) -> tuple:
            new = []
            for b in dict.fromkeys(wanted):  # in order, once each
                if tuple(b) not in table.acls:
                    new.append(rec.acl(len(new), tuple(b), {"created_timestamp": now}))
            return tuple(new)
        self._submit(records, now)

    def delete(self, filters: Iterable[AclFilter]) -> list[list[AclBinding]]:
        """Delete every binding any of ``filters`` matches (tombstones, durable on return, in
        one batch); per filter, the bindings it matched (a binding two filters match is in
        both lists, as Kafka answers DeleteAcls)."""
        self._check_open()
        filters = list(filters)
        matched: list[list[AclBinding]] = []

        def tombstones(table: OffsetTable) -> tuple:
            present = sorted(AclBinding(*k) for k in table.acls)
            matched[:] = [[b for b in present if f.matches(b)] for f in filters]
            gone = sorted({b for m in matched for b in m})
            return tuple(rec.acl(i, tuple(b), None) for i, b in enumerate(gone))
        self._submit(tombstones, self._clock())
        return matched

    def _submit(self, producer, now: int) -> None:
        self._writer.submit_sync(self._parts[ACL_PARTITION],
                                 QueueItem(None, now, deferred=producer), None)
