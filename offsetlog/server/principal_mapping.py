"""``ssl.principal.mapping.rules``: Kafka's rules that turn a client certificate's
distinguished name into the principal's name (docs/SECURITY.md).

The setting is a comma-separated list of rules, tried in order; the first that applies
gives the name, and a name no rule applies to fails the connection (Kafka closes it):

* ``DEFAULT``: the distinguished name itself (RFC 2253, as Java's ``X500Principal`` gives it);
* ``RULE:PATTERN/REPLACEMENT/`` with ``L`` or ``U`` after the last ``/`` to lower- or
  upper-case the result: applies when the regular expression PATTERN matches the whole
  name, which every match of PATTERN in it is then replaced by, REPLACEMENT's ``$1``, ``$2``...
  being the groups (a ``/`` inside PATTERN or REPLACEMENT is written ``\\/``).

So ``RULE:^CN=(.*?),OU=(.*?),.*$/$1@$2/L,DEFAULT`` makes ``CN=Client-1,OU=payments,O=x``
``client-1@payments`` and leaves names it does not match as they are.

Kafka's patterns are Java's regular expressions; Python's ``re`` reads the common ones alike
(classes, groups, lazy and greedy quantifiers, anchors), not Java's possessive quantifiers
or ``\\p{...}`` classes. A replacement reads as Java's: ``\\x`` is ``x``, ``$N`` takes as many
digits as name a group, and a ``$N`` past the last group is kept as text (Kafka's rule).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: one rule: DEFAULT, RULE:pattern/replacement/[LU] (escaped characters allowed), or empty
_RULE = r"(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLIT = re.compile(r"\s*(" + _RULE + r")\s*(?:,\s*|$)")
_PARSE = re.compile(_RULE)
_BACK_REFERENCE = re.compile(r"\$(\d+)")


@dataclass(frozen=True)
class Rule:
    pattern: re.Pattern | None  #: None: DEFAULT
    replacement: str = ""
    case: str = ""  #: "L", "U" or ""

    def apply(self, name: str) -> str | None:
        """The name this rule makes of ``name``, or None: it does not apply."""
        if self.pattern is None:
            return name
        match = self.pattern.fullmatch(name)
        if match is None:
            return None
        groups = self.pattern.groups
        replacement = _literal_missing_groups(self.replacement, groups)
        out = self.pattern.sub(lambda m: _expand(replacement, m, groups), name)
        return out.lower() if self.case == "L" else out.upper() if self.case == "U" else out


def parse_rules(text: str) -> tuple[Rule, ...]:
    """The rules of an ``ssl.principal.mapping.rules`` value.
    :raises ValueError: a rule that is not one (Kafka's message)"""
    rules = []
    for found in _SPLIT.finditer(text.strip()):
        rule = found.group(1)
        m = _PARSE.match(rule)
        if m is None or m.end() != len(rule):
            rest = rule[m.end():] if m else rule
            raise ValueError(f"Invalid rule: `{rule}`, unmatched substring: `{rest}`")
        if m.group(1):
            rules.append(Rule(None))
        elif m.group(2) is not None:
            try:
                pattern = re.compile(m.group(2))
            except re.error as e:
                raise ValueError(f"Invalid rule: `{rule}`: {e}") from None
            rules.append(Rule(pattern, m.group(3), m.group(4)))
        if found.end() == len(text.strip()):
            break
    return tuple(rules)


def map_name(rules: tuple[Rule, ...], name: str) -> str | None:
    """The principal's name of the distinguished name ``name``: the first rule that applies
    gives it; None: none applies."""
    for rule in rules:
        mapped = rule.apply(name)
        if mapped is not None:
            return mapped
    return None


def _literal_missing_groups(replacement: str, groups: int) -> str:
    """Kafka's step before Java's: a ``$N`` that names no group (after dropping trailing
    digits, as Java reads ``$12`` with fewer groups as ``$1`` and ``2``) becomes text."""
    if groups == 0:
        return replacement
    out, last = [], 0
    for m in _BACK_REFERENCE.finditer(replacement):
        digits = m.group(1)
        if digits.startswith("0"):
            continue
        index = int(digits)
        while index > groups and index >= 10:
            index //= 10
        if index > groups:
            out.append(replacement[last:m.start()] + "\\")
            last = m.start()
    return "".join(out) + replacement[last:]


def _expand(replacement: str, match: re.Match, groups: int) -> str:
    """Java's ``Matcher.appendReplacement``: ``\\x`` is x; ``$N`` is group N, its digits
    taken while they name a group."""
    out, i = [], 0
    while i < len(replacement):
        c = replacement[i]
        if c == "\\" and i + 1 < len(replacement):
            out.append(replacement[i + 1])
            i += 2
        elif c == "$" and i + 1 < len(replacement) and replacement[i + 1].isdigit():
            index, i = int(replacement[i + 1]), i + 2
            if index > groups:
                raise ValueError(f"No group {index}")
            while i < len(replacement) and replacement[i].isdigit() and \
                    index * 10 + int(replacement[i]) <= groups:
                index, i = index * 10 + int(replacement[i]), i + 1
            out.append(match.group(index) or "")
        else:
            out.append(c)
            i += 1
    return "".join(out)
