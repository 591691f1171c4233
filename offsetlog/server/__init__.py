"""``offsetlog serve``: Kafka's wire protocol in front of an ``OffsetStore``, so unmodified
Kafka clients join groups and commit offsets against it (docs/PROTOCOL.md).

Modules, one concept each: ``codec`` (kio framing and encoding), ``apis`` (versions and
dispatch), ``groups`` / ``offsets`` / ``admin`` / ``data`` / ``txn`` (the protocol handlers:
plain functions from a decoded request to a response or ``work.Reply``), ``topics`` (the
persisted topic registry), ``config`` (Kafka broker properties), ``connection`` (asyncio:
bytes, frames, answer order) and ``main`` (the command).
"""

__all__: list[str] = []  # a suite of modules: offsetlog.server.main is the entry point
