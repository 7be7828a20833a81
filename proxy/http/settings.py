"""The console's configs: ``kafkad.http.listeners`` and ``kafkad.http.admin.enable``.

``kafkad.http.listeners`` is a comma-separated list of ``http://HOST:PORT``. An empty host
(``http://:9644``) binds the loopback address 127.0.0.1; anything reachable from elsewhere
must be written out (``http://0.0.0.0:9644``): the console has no authentication yet, so it
never listens beyond loopback unless told to in so many words. Only ``http`` is served.
"""

from __future__ import annotations

from typing import NamedTuple

LOOPBACK = "127.0.0.1"


class HttpListener(NamedTuple):  # a NamedTuple: cheap to import (kafkad's start-up time)
    host: str
    port: int

    @property
    def loopback(self) -> bool:
        if self.host == "localhost":
            return True
        import ipaddress  # only when the console starts

        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"


def parse_http_listeners(text: str) -> tuple[HttpListener, ...]:
    """``http://HOST:PORT,...`` -> listeners; ValueError says what is wrong."""
    out: list[HttpListener] = []
    for item in (x.strip() for x in text.split(",")):
        if not item:
            continue
        scheme, sep, rest = item.partition("://")
        if not sep or scheme.lower() != "http":
            raise ValueError(f"{item!r}: must be http://HOST:PORT (only http is served)")
        if rest.startswith("["):
            host, bracket, tail = rest[1:].partition("]")
            if not bracket or not tail.startswith(":"):
                raise ValueError(f"{item!r}: an IPv6 address is written [ADDRESS]:PORT")
            port_text = tail[1:]
        else:
            host, colon, port_text = rest.rpartition(":")
            if not colon:
                raise ValueError(f"{item!r}: no port (http://HOST:PORT)")
        if "/" in port_text or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
            raise ValueError(f"{item!r}: the port must be a number from 0 to 65535")
        out.append(HttpListener(host or LOOPBACK, int(port_text)))
    return tuple(out)
