"""The store's part for the wire server's registries: its topics (``TOPIC`` records) and its
SASL/SCRAM users (docs/SECURITY.md).

A topic is a ``TOPIC`` record on the log partition ``partition_for(topic)``. A credential is a ``USER_SCRAM_CREDENTIAL`` record (docs/FORMAT.md) keyed by (user,
mechanism) on the log partition ``partition_for(user)``, written through the writer like a
topic registration, applied by the table's one apply path, kept by the cleaner by key and
carried by snapshots. It holds what RFC 5802 has a server keep (salt, iteration count,
StoredKey, ServerKey), never the password.
"""

from __future__ import annotations

from offsetlog.partitioner import partition_for
from offsetlog.store import deferred
from offsetlog.store.commit_queue import QueueItem
from offsetlog.store.part import StorePart
from offsetlog.validation import check_topic

#: the mechanisms a credential may be stored for (Kafka's ScramMechanism)
MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
#: RFC 7677's minimum, and Kafka's
MIN_ITERATIONS = 4096
#: Kafka's maximum (ScramMechanism.maxIterations)
MAX_ITERATIONS = 16384


def check_credential(user, mechanism, value) -> None:
    """A credential the store accepts.

    :raises ValueError: with what is wrong
    """
    if not isinstance(user, str) or not user:
        raise ValueError("the user name must be a non-empty string")
    if mechanism not in MECHANISMS:
        raise ValueError(f"unknown SCRAM mechanism {mechanism!r}; known: {', '.join(MECHANISMS)}")
    if value is None:
        return
    if not isinstance(value, dict):
        raise ValueError("a credential is a dict")
    for name in ("salt", "stored_key", "server_key"):
        if not isinstance(value.get(name), bytes) or not value[name]:
            raise ValueError(f"credential {name} must be non-empty bytes")
    it = value.get("iterations")
    if not isinstance(it, int) or isinstance(it, bool) or not (
            MIN_ITERATIONS <= it <= MAX_ITERATIONS):
        raise ValueError(f"iterations must be from {MIN_ITERATIONS} to {MAX_ITERATIONS}")


class Registries(StorePart):
    # -- topics (docs/FORMAT.md, TOPIC) ----------------------------------------------------

    def topics(self) -> dict[str, dict]:
        """topic -> ``{"partitions", "topic_id", "created_timestamp"}``, every one registered."""
        self._check_open()
        out: dict[str, dict] = {}
        for part in self._parts:
            with part.lock:
                out.update(part.table.topics)
        return dict(sorted(out.items()))

    def create_topic(self, name: str, partitions: int, *, topic_id: bytes) -> dict:
        """Register topic ``name`` (a TOPIC record, durable on return); its value. Checked in
        its partition's queue: of two concurrent creations of one name, one succeeds.

        :raises InvalidTopicError: a name or partition count Kafka would refuse, or a bad id
        :raises TopicAlreadyExistsError: the topic is registered already
        """
        self._check_open()
        check_topic(name, partitions, topic_id)
        now = self._clock()
        value = {"partitions": partitions, "topic_id": topic_id, "created_timestamp": now}
        self._submit(name, deferred.topic_creation(name, value), now)
        return dict(value)

    def _submit(self, key: str, producer, now: int) -> None:
        part = self._parts[partition_for(key, len(self._parts))]
        self._writer.submit_sync(part, QueueItem(None, now, deferred=producer), None)

    # -- SASL/SCRAM credentials (docs/FORMAT.md, USER_SCRAM_CREDENTIAL) ---------------------

    def scram_credentials(self) -> dict[tuple[str, str], dict]:
        """(user, mechanism) -> ``{"salt", "iterations", "stored_key", "server_key"}``, every
        credential stored, sorted."""
        self._check_open()
        out: dict[tuple[str, str], dict] = {}
        for part in self._parts:
            with part.lock:
                out.update(part.table.scram_credentials)
        return dict(sorted(out.items()))

    def scram_credential(self, user: str, mechanism: str) -> dict | None:
        """The credential of ``user`` for ``mechanism``, or None."""
        self._check_open()
        part = self._parts[partition_for(user, len(self._parts))]
        with part.lock:
            return part.table.scram_credentials.get((user, mechanism))

    def set_scram_credential(self, user: str, mechanism: str, value: dict | None) -> None:
        """Write ``value`` as the credential of ``user`` for ``mechanism``, or delete it
        (None: a tombstone, none written if there is nothing to delete); durable on return.

        :raises ValueError: a bad user, mechanism or value (``check_credential``)
        """
        self._check_open()
        check_credential(user, mechanism, value)
        self._submit(user, deferred.scram_credential(user, mechanism, value), self._clock())
