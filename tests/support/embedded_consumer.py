"""A consumer-protocol (KIP-848) member of an embedded store's group, heartbeating through
``OffsetStore.consumer_groups``: for the store's tests of consumer groups."""

from __future__ import annotations

#: the topics (and partition counts) the members' heartbeats say exist
TOPICS = {"t": 4, "u": 2}
#: a heartbeat interval within the default session (45 s)
BEAT = 5_000


class Member:
    """One consumer-protocol member of ``group`` (default "g"), subscribed to ``topics``
    (default "t")."""

    def __init__(self, store, member_id="a", group="g", topics=("t",)):
        self.store, self.member_id, self.group = store, member_id, group
        r = self._beat(0, owned=frozenset(), rebalance_timeout_ms=30_000,
                       subscribed_topic_names=list(topics))
        self.epoch, self.owned = r.member_epoch, r.assignment

    def _beat(self, epoch, **kw):
        return self.store.consumer_groups.heartbeat(
            self.group, topics=TOPICS, member_id=self.member_id, member_epoch=epoch,
            **kw).result(timeout=10)

    def beat(self, *, check=True):
        """Heartbeat; False if the group no longer knows the member (``check=False``: one
        whose session may have lapsed), else an assertion."""
        r = self._beat(self.epoch, owned=self.owned)
        if r.error is not None:
            assert not check, r.error
            return False
        self.epoch = r.member_epoch if r.member_epoch is not None else self.epoch
        self.owned = r.assignment if r.assignment is not None else self.owned
        return True

    def leave(self, *, check=True):
        r = self._beat(-1)
        assert r.member_epoch == -1 or not check, r
