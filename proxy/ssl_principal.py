"""``ssl.principal.mapping.rules``: a client certificate's distinguished name to a user name,
with the semantics of Kafka's ``SslPrincipalMapper``.

The rules are a comma-separated list, tried in order; the first that matches names the user.
``DEFAULT`` is the DN itself. ``RULE:pattern/replacement/`` matches when ``pattern`` matches
the whole DN (Java's ``Matcher.matches``) and yields the DN with every match of ``pattern``
replaced (Java's ``String.replaceAll``); a trailing ``L`` or ``U`` lower- or upper-cases the
result. A DN no rule matches fails the authentication (Kafka's ``NoMatchingRule``). Rules are
split and parsed with Kafka's own two regular expressions, so the same odd inputs (empty rules,
escaped slashes, commas inside a rule) split the same way.

Java's replacement syntax is kept: ``$n`` is a group (a back reference past the group count
is taken literally, as Kafka's ``escapeLiteralBackReferences`` arranges), ``\\x`` a literal x.

The DN is Java's ``X500Principal.getName()`` form (RFC 2253, most specific RDN first, e.g.
``CN=alice,OU=Eng,O=Acme,C=US``); ``certificate_dn`` builds it from the certificate.
Deviation: an attribute without an RFC 2253 keyword (an emailAddress, say) is written as
``OID=value`` rather than Java's ``OID=#<hex DER>``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cryptography import x509

# Kafka's RULE_PATTERN / RULE_SPLITTER / RULE_PARSER (SslPrincipalMapper.java), unchanged.
_RULE_PATTERN = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_RULE_SPLITTER = re.compile(r"\s*(" + _RULE_PATTERN + r")\s*(,\s*|$)")
_RULE_PARSER = re.compile(_RULE_PATTERN)
_BACK_REFERENCE = re.compile(r"\$(\d+)")


class NoMatchingRule(ValueError):
    pass


@dataclass(frozen=True)
class Rule:
    is_default: bool
    pattern: re.Pattern[str] | None = None
    replacement: str = ""
    to_lower: bool = False
    to_upper: bool = False

    def apply(self, dn: str) -> str | None:
        if self.is_default:
            return dn
        assert self.pattern is not None
        if self.pattern.fullmatch(dn) is None:
            return None
        groups = self.pattern.groups
        replacement = _escape_literal_back_references(self.replacement, groups)
        result = self.pattern.sub(lambda m: _java_replacement(replacement, m), dn)
        if self.to_lower:
            return result.lower()
        if self.to_upper:
            return result.upper()
        return result

    def __str__(self) -> str:
        if self.is_default:
            return "DEFAULT"
        assert self.pattern is not None
        flag = "/L" if self.to_lower else "/U" if self.to_upper else ""
        return f"RULE:{self.pattern.pattern}/{self.replacement}{flag}"


def _escape_literal_back_references(unescaped: str, groups: int) -> str:
    """Kafka's escapeLiteralBackReferences: ``$N`` past the group count (after dropping
    trailing digits down to one) becomes a literal ``\\$N``. As in Kafka, the positions come
    from the unescaped text while insertions go into the growing result."""
    if groups == 0:
        return unescaped
    value = unescaped
    for m in _BACK_REFERENCE.finditer(unescaped):
        digits = m.group(1)
        if digits.startswith("0"):
            continue
        index = int(digits)
        while index > groups and index >= 10:
            index //= 10
        if index > groups:
            start = m.start(1)
            value = value[: start - 1] + "\\" + value[start - 1 :]
    return value


def _java_replacement(replacement: str, m: re.Match[str]) -> str:
    """Java's ``Matcher.appendReplacement`` expansion of ``replacement`` for match ``m``."""
    out: list[str] = []
    groups = m.re.groups
    i = 0
    while i < len(replacement):
        c = replacement[i]
        if c == "\\":
            if i + 1 == len(replacement):
                raise ValueError("character to be escaped is missing")
            out.append(replacement[i + 1])
            i += 2
        elif c == "$":
            i += 1
            if i == len(replacement):
                raise ValueError("Illegal group reference: group index is missing")
            if replacement[i] == "{":
                end = replacement.find("}", i)
                if end < 0:
                    raise ValueError("named capturing group is missing trailing '}'")
                name = replacement[i + 1 : end]
                if name not in m.re.groupindex:
                    raise ValueError(f"No group with name {{{name}}}")
                out.append(m.group(name) or "")
                i = end + 1
                continue
            if not replacement[i].isdigit():
                raise ValueError("Illegal group reference")
            ref = int(replacement[i])
            if ref > groups:
                raise ValueError(f"No group {ref}")
            i += 1
            while i < len(replacement) and replacement[i].isdigit():
                longer = ref * 10 + int(replacement[i])
                if longer > groups:
                    break
                ref = longer
                i += 1
            out.append(m.group(ref) or "")
        else:
            out.append(c)
            i += 1
    return "".join(out)


class SslPrincipalMapper:
    def __init__(self, rules: str | None) -> None:
        self.rules = _parse_rules(_split_rules("DEFAULT" if rules is None else rules))

    def name(self, dn: str) -> str:
        for rule in self.rules:
            name = rule.apply(dn)
            if name is not None:
                return name
        raise NoMatchingRule(f"No rules apply to {dn}, rules [{', '.join(map(str, self.rules))}]")

    def __str__(self) -> str:
        return f"SslPrincipalMapper(rules = [{', '.join(map(str, self.rules))}])"


def _split_rules(rules: str) -> list[str]:
    return [m.group(1) for m in _RULE_SPLITTER.finditer(rules.strip())]


def _parse_rules(rules: list[str]) -> list[Rule]:
    out: list[Rule] = []
    for rule in rules:
        m = _RULE_PARSER.match(rule)
        if m is None:
            raise ValueError(f"Invalid rule: {rule}")
        if m.end() != len(rule):
            raise ValueError(f"Invalid rule: `{rule}`, unmatched substring: `{rule[m.end() :]}`")
        if m.group(1) is not None:
            out.append(Rule(is_default=True))
        elif m.group(2) is not None:
            try:
                pattern = re.compile(m.group(2))
            except re.error as exc:
                raise ValueError(f"Invalid rule: {rule}: {exc}") from None
            out.append(Rule(False, pattern, m.group(4), m.group(6) == "L", m.group(6) == "U"))
        # else: an empty rule, ignored as in Kafka
    return out


def check_rules(value: str) -> str:
    """The config parser of ``ssl.principal.mapping.rules``: raises ValueError if invalid."""
    SslPrincipalMapper(value)
    return value


def certificate_dn(der: bytes) -> str:
    """The subject of a DER certificate in Java's X500Principal.getName() form."""
    return x509.load_der_x509_certificate(der).subject.rfc4514_string()
