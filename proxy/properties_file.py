"""Java's ``Properties.load`` for kafkad's ``--config FILE`` (a Kafka ``server.properties``):
logical lines (backslash continuations), ``=``/``:``/blank separators, escapes; and
``ConfigError``, what every unusable broker config is reported as."""

from __future__ import annotations

import re


class ConfigError(ValueError):
    pass


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


# Java's line terminators only: str.splitlines would also break at \f (a blank in Java), \v,
# \x1c-\x1e and \x85, which latin-1 files may hold inside a value.
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """Java ``Properties.load``'s logical lines: comments and blank lines dropped, a line ending
    in an odd number of backslashes continued on the next (whose leading blanks are dropped).
    Each comes with its first physical line number."""
    out: list[tuple[int, str]] = []
    parts: list[str] = []
    start = 0
    for number, raw in enumerate(_LINE_BREAK.split(text), 1):
        line = raw.lstrip(" \t\f")
        if not parts:
            if not line or line[0] in "#!":
                continue
            start = number
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2:
            parts.append(line[:-1])
            continue
        parts.append(line)
        out.append((start, "".join(parts)))
        parts = []
    if parts:
        out.append((start, "".join(parts)))
    return out


def _unescape(text: str, where: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c != "\\" or i + 1 == len(text):
            out.append(c)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u":
            digits = text[i + 2 : i + 6]
            if len(digits) != 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise ConfigError(f"{where}: malformed \\uxxxx escape")
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)


def parse_properties(text: str, source: str = "config file") -> dict[str, str]:
    """Java ``.properties`` syntax in full (``java.util.Properties.load``): ``#``/``!``
    comments, ``=``, ``:`` or blanks between key and value, ``\\`` line continuations and
    escapes (``\\t``, ``\\uXXXX``, ``\\=`` ...). A later duplicate key wins, as in Java."""
    out: dict[str, str] = {}
    for number, line in _logical_lines(text):
        i = 0
        while i < len(line):
            c = line[i]
            if c == "\\":
                i += 2
                continue
            if c in "=: \t\f":
                break
            i += 1
        key = line[:i]
        rest = line[i:].lstrip(" \t\f")
        if rest[:1] in ("=", ":") and (i == len(line) or line[i] in " \t\f=:"):
            rest = rest[1:].lstrip(" \t\f")
        where = f"{source} line {number}"
        out[_unescape(key, where)] = _unescape(rest, where)
    return out


# Environment variables that are not broker configs: the CLI's options and the test tools'.
