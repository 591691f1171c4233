"""Topic subscriptions by regular expression (ConsumerGroupHeartbeat's SubscribedTopicRegex).

Kafka compiles a member's regex with RE2/J (``com.google.re2j.Pattern``) and a topic matches
when the whole name matches (``matcher(name).matches()``). Here the same RE2 syntax is
compiled by Google's RE2 itself (the ``google-re2`` binding): RE2/J is a port of it, so the
two accept the same patterns and match topic names (ASCII letters, digits, ``.``, ``_``,
``-``) alike, except where RE2/J is stricter, which is refused here as Kafka refuses it: the
``\\C`` escape (any byte), a capture group name other than ASCII letters, digits and ``_``,
and one name given to two groups. A pattern that does not compile is
INVALID_REGULAR_EXPRESSION, with Kafka's message: RE2/J's description of the error (not
RE2's, which also quotes the offending text). The other way round, RE2 refuses nested repeat
counts whose product passes 1,000 (``((a{10}){10}){11}``), which RE2/J compiles: such a
pattern is refused here (docs/PROTOCOL.md). Kafka 4.4's answers to all of these are pinned
by tests/kafka/test_diff_consumer_group_regex.py.

Resolution is a pure function of the pattern and the topic names, so the coordinator resolves
in the heartbeat itself (Kafka does it off the request path, at most every 10 s per group).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

import re2

from offsetlog.group.consumer.errors import InvalidRegularExpressionError

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # errors are answered to the member, not logged by RE2

#: RE2's error text (before its ``: <the offending text>``) -> RE2/J's description of the
#: same error, as Kafka 4.4 answers it
_RE2J_DESCRIPTION = {
    "invalid escape sequence": "invalid escape sequence",
    # (RE2 says so of an unterminated ``\x{``, which RE2/J takes for a bad escape)
    "invalid UTF-8": "invalid escape sequence",
    "invalid character class": "invalid character class",
    "invalid character class range": "invalid character class range",
    "missing ]": "missing closing ]",
    "missing )": "missing closing )",
    # (RE2/J's parser meets a ``)`` with no group open as an internal error, and says so)
    "unexpected )": "regexp/syntax: internal error",
    "trailing \\": "trailing backslash at end of expression",
    "no argument for repetition operator": "missing argument to repetition operator",
    "bad repetition operator": "invalid nested repetition operator",
    "invalid repetition size": "invalid repeat count",
    "invalid perl operator": "invalid or unsupported Perl syntax",
    "invalid named capture group": "invalid named capture",
}
_BAD_ESCAPE, _BAD_NAME, _DUPLICATE_NAME = ("invalid escape sequence", "invalid named capture",
                                           "duplicate capture group name")
_CAPTURE_NAME = re.compile(r"[A-Za-z0-9_]+")  # RE2/J's (RE2 takes any word character)


def _re2j_description(re2_error: str) -> str:
    """RE2/J's description of the error RE2 reported as ``re2_error``."""
    text, _, culprit = re2_error.partition(": ")
    if text == "invalid perl operator" and culprit.startswith("(?<"):
        # ``(?<=`` and ``(?<!``: RE2/J takes ``(?<`` for the start of a named group
        return _BAD_NAME
    return _RE2J_DESCRIPTION.get(text, re2_error)


def _re2j_refusal(pattern: str) -> str | None:
    """What RE2/J refuses in ``pattern``, which RE2 has compiled: the first, left to right,
    of a ``\\C`` escape, a group name RE2/J does not take, or a name used twice."""
    names: set[str] = set()
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            if pattern.startswith("\\Q", i):  # literal text up to \E (or the end)
                end = pattern.find("\\E", i + 2)
                i = n if end < 0 else end + 2
                continue
            if pattern.startswith("\\C", i):
                return _BAD_ESCAPE
            i += 2
        elif c == "[":
            i = _class_end(pattern, i)
        elif pattern.startswith(("(?P<", "(?<"), i):
            start = pattern.index("<", i) + 1
            end = pattern.index(">", start)
            name = pattern[start:end]
            if not _CAPTURE_NAME.fullmatch(name):
                return _BAD_NAME
            if name in names:
                return _DUPLICATE_NAME
            names.add(name)
            i = end + 1
        else:
            i += 1
    return None


def _class_end(pattern: str, i: int) -> int:
    """Past the character class opening at ``pattern[i]`` (RE2 compiled it, so it closes):
    a ``]`` first (after any ``^``) is a member, ``[:alpha:]`` a named class within."""
    i += 1
    if pattern.startswith("^", i):
        i += 1
    if pattern.startswith("]", i):
        i += 1
    while i < len(pattern) and pattern[i] != "]":
        if pattern[i] == "\\":
            if pattern.startswith("\\C", i):
                return i  # (RE2 refuses it here first; never reached for a compiled one)
            i += 2
        elif pattern.startswith("[:", i) and ":]" in pattern[i + 2:]:
            i = pattern.index(":]", i + 2) + 2
        else:
            i += 1
    return i + 1


@functools.lru_cache(maxsize=1024)
def _compiled(pattern: str):
    """``(RE2's compiled pattern or None, RE2/J's description of why it refuses the pattern
    or None)``. A pattern RE2/J alone refuses is still compiled: the check refuses it at the
    door, but a member record of an older store may hold it, and it matches as it did."""
    try:
        compiled = re2.compile(pattern, options=_OPTIONS)
    except re2.error as e:
        detail = e.args[0] if e.args else str(e)
        detail = detail.decode("utf-8", "replace") if isinstance(detail, bytes) else str(detail)
        return None, _re2j_description(detail)
    return compiled, _re2j_refusal(pattern)


def check(pattern: str) -> None:
    """Raise InvalidRegularExpressionError, with Kafka's message, if ``pattern`` does not
    compile as Kafka compiles it."""
    refused = _compiled(pattern)[1]
    if refused is not None:
        raise InvalidRegularExpressionError(
            f"SubscribedTopicRegex `{pattern}` is not a valid regular expression: {refused}.")


def matches(pattern: str, topic: str) -> bool:
    """Whether ``topic``, whole, matches ``pattern`` (False for a pattern RE2 does not
    compile: the coordinator never keeps one)."""
    compiled = _compiled(pattern)[0]
    return compiled is not None and compiled.fullmatch(topic) is not None


def resolve(pattern: str, topics: Iterable[str]) -> frozenset[str]:
    """The topics of ``topics`` that ``pattern`` matches."""
    compiled = _compiled(pattern)[0]
    if compiled is None:
        return frozenset()
    return frozenset(t for t in topics if compiled.fullmatch(t) is not None)
