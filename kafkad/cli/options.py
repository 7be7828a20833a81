"""Option parsing shared by every noun: the common options and small value parsers."""

from __future__ import annotations

import argparse
import math
import os

__all__ = [
    "DEFAULT_BOOTSTRAP",
    "UsageError",
    "add_common",
    "bootstrap_default",
    "key_value",
    "non_negative_int",
    "positive_seconds",
]

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
ENV_BOOTSTRAP = "KAFKAD_BOOTSTRAP_SERVER"


class UsageError(Exception):
    """A bad command line found after argparse (exit status 2)."""


def bootstrap_default(environ: dict[str, str] | None = None) -> str:
    env = os.environ if environ is None else environ
    return env.get(ENV_BOOTSTRAP) or DEFAULT_BOOTSTRAP


def add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bootstrap-server",
        default=None,
        metavar="HOST:PORT",
        help=f"a broker to start from (default: ${ENV_BOOTSTRAP}, else {DEFAULT_BOOTSTRAP})",
    )
    parser.add_argument(
        "--command-config",
        default=None,
        metavar="FILE",
        help="client properties as Kafka's tools take them: security.protocol, ssl.*, "
        "sasl.mechanism, sasl.jaas.config (e.g. the client.properties `kafkad certs` writes)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON for scripts")
    parser.add_argument(
        "--timeout",
        type=positive_seconds,
        default=30.0,
        metavar="SECONDS",
        help="give up after this long",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks")


def key_value(text: str) -> tuple[str, str]:
    """``name=value`` (value may be empty, may contain ``=``)."""
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=VALUE")
    return name, value


def non_negative_int(text: str) -> int:
    """An offset: a whole number >= 0 (as kafka-console-consumer's --offset)."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a non-negative whole number")
    return value


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return value
