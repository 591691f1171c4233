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
    #: listener name -> the (host, port) Metadata and FindCoordinator answer to its clients
    addresses: dict = field(default_factory=dict)

    def address(self, listener: str) -> tuple[str, int]:
        """The address of ``listener`` (the one a client came in on), as answered to it."""
        return self.addresses.get(listener) or (self.host, self.port)


@dataclass(frozen=True)
class Call:
    """One decoded request."""

    api_key: int
    version: int
    header: Header
    body: Any
    client_host: str = ""
    #: who sent it: ``User:NAME`` once authenticated (SASL's user, or a client certificate's
    #: subject), ``User:ANONYMOUS`` otherwise, as Kafka's principals (server/sasl.py)
    principal: str = "User:ANONYMOUS"
    #: the name of the listener it came in on (``PLAINTEXT`` for ``--listen``'s)
    listener: str = ""

    @property
    def client_id(self) -> str:
        return self.header.client_id or ""

    def respond(self, **values) -> Any:
        """This request's response (of its API and version) from named values."""
        return build(response_schema(self.api_key, self.version), throttle_time=0, **values)
