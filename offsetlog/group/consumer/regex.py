"""Topic subscriptions by regular expression (ConsumerGroupHeartbeat's SubscribedTopicRegex).

Kafka compiles a member's regex with RE2/J (``com.google.re2j.Pattern``) and a topic matches
when the whole name matches (``matcher(name).matches()``). Here the same RE2 syntax is
compiled by Google's RE2 itself (the ``google-re2`` binding): RE2/J is a port of it, so the
two accept the same patterns and match topic names (ASCII letters, digits, ``.``, ``_``,
``-``) alike, except ``\\C`` (any byte), which RE2 accepts and RE2/J does not: it is refused
here as Kafka refuses it. A pattern that does not compile is INVALID_REGULAR_EXPRESSION.

Resolution is a pure function of the pattern and the topic names, so the coordinator resolves
in the heartbeat itself (Kafka does it off the request path, at most every 10 s per group).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

import re2

from offsetlog.group.consumer.errors import InvalidRegularExpressionError

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # errors are answered to the member, not logged by RE2


def _refused_escape(pattern: str) -> str | None:
    """RE2/J's refusal of what RE2 accepts: the ``\\C`` escape."""
    i = 0
    while i < len(pattern) - 1:
        if pattern[i] == "\\":
            if pattern[i + 1] == "C":
                return "invalid escape sequence: `\\C`"
            i += 2
            continue
        i += 1
    return None


@functools.lru_cache(maxsize=1024)
def _compiled(pattern: str):
    refused = _refused_escape(pattern)
    if refused is not None:
        return refused
    try:
        return re2.compile(pattern, options=_OPTIONS)
    except re2.error as e:
        detail = e.args[0] if e.args else str(e)
        return detail.decode("utf-8", "replace") if isinstance(detail, bytes) else str(detail)


def check(pattern: str) -> None:
    """Raise InvalidRegularExpressionError, with Kafka's message, if ``pattern`` does not
    compile."""
    compiled = _compiled(pattern)
    if isinstance(compiled, str):
        raise InvalidRegularExpressionError(
            f"SubscribedTopicRegex `{pattern}` is not a valid regular expression: {compiled}.")


def matches(pattern: str, topic: str) -> bool:
    """Whether ``topic``, whole, matches ``pattern`` (False for a pattern that does not
    compile: the coordinator never keeps one)."""
    compiled = _compiled(pattern)
    return not isinstance(compiled, str) and compiled.fullmatch(topic) is not None


def resolve(pattern: str, topics: Iterable[str]) -> frozenset[str]:
    """The topics of ``topics`` that ``pattern`` matches."""
    compiled = _compiled(pattern)
    if isinstance(compiled, str):
        return frozenset()
    return frozenset(t for t in topics if compiled.fullmatch(t) is not None)
