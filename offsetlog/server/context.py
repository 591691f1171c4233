"""What every protocol handler is given: the server's state and the request being handled."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from offsetlog.server.codec import Header, build, response_schema
from offsetlog.server.config import ServerConfig
from offsetlog.server.topics import TopicRegistry

#: the one node: its id in every answer that names a broker or coordinator
NODE_ID = 0
CLUSTER_ID = "offsetlog"


@dataclass
class Context:
    store: Any  # OffsetStore
    config: ServerConfig
    topics: TopicRegistry
    host: str
    port: int
    #: transactional id -> its Transaction handle (offsetlog.transactions), from InitProducerId
    producers: dict = field(default_factory=dict)
    #: the ACLs and the authorizer's settings (``authz.AclState``); None without an
    #: authorizer (``authorizer.class.name`` unset): every request is allowed
    acl: Any = None


@dataclass(frozen=True)
class Call:
    """One decoded request."""

    api_key: int
    version: int
    header: Header
    body: Any
    client_host: str = ""
    #: who sent it (Kafka's ``KafkaPrincipal``, ``User:NAME``): an unauthenticated
    #: connection's is ``User:ANONYMOUS``; and the listener it came in on
    principal: str = "User:ANONYMOUS"
    listener: str = ""

    @property
    def client_id(self) -> str:
        return self.header.client_id or ""

    def respond(self, **values) -> Any:
        """This request's response (of its API and version) from named values."""
        return build(response_schema(self.api_key, self.version), throttle_time=0, **values)
