"""``kafkad.http.listeners``: loopback unless a host is written out; bad values are refused at
start-up with the config's name."""

from __future__ import annotations

import pytest

from proxy.http.settings import HttpListener, parse_http_listeners
from proxy.properties_file import ConfigError
from tests.proxy.http.conftest import make_config


def test_listeners_default_to_loopback() -> None:
    assert parse_http_listeners("") == ()
    assert parse_http_listeners("http://:9644") == (HttpListener("127.0.0.1", 9644),)
    got = parse_http_listeners("http://localhost:1, http://[::1]:2,http://0.0.0.0:3")
    assert got == (HttpListener("localhost", 1), HttpListener("::1", 2), HttpListener("0.0.0.0", 3))
    assert [x.loopback for x in got] == [True, True, False]
    assert str(got[1]) == "http://[::1]:2"


@pytest.mark.parametrize(
    "bad", ["https://:1", "127.0.0.1:9644", "http://host", "http://:99999", "http://[::1:2"]
)
def test_bad_listeners_are_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_http_listeners(bad)
    with pytest.raises(ConfigError, match=r"kafkad\.http\.listeners"):
        make_config(**{"kafkad.http.listeners": bad})


def test_console_configs_default_off_and_read_only() -> None:
    cfg = make_config()
    assert cfg.get("kafkad.http.listeners") == ""
    assert cfg.get("kafkad.http.admin.enable") is False
    assert cfg.get("kafkad.http.hanging.transaction.ms") == 900_000
