"""``kafkad`` command line.

    kafkad serve [--listen HOST:PORT] [--advertise HOST:PORT] [--data-dir DIR]
                 [--config server.properties] [--set name=value ...] [--log-level LEVEL]

Each option also reads an environment variable (KAFKAD_LISTEN, KAFKAD_ADVERTISE,
KAFKAD_DATA_DIR, KAFKAD_CONFIG); broker configs read KAFKAD_<NAME> (see proxy/config.py).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

import trio

from proxy.config import ConfigError, load_config
from proxy.server import serve_until_signal


def _parse_set(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--set expects name=value, got {item!r}")
        out[name.strip()] = value.strip()
    return out


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kafkad", description="A Kafka-compatible broker.")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="run the broker")
    env = os.environ
    s.add_argument(
        "--listen",
        default=env.get("KAFKAD_LISTEN", "127.0.0.1:9092"),
        help="HOST:PORT to listen on; port 0 picks a free port (default %(default)s)",
    )
    s.add_argument(
        "--advertise",
        default=env.get("KAFKAD_ADVERTISE"),
        help="HOST:PORT clients are told to connect to (default: the bound address)",
    )
    s.add_argument(
        "--data-dir",
        default=env.get("KAFKAD_DATA_DIR", "./data"),
        help="data directory, or memory:// for a throwaway broker (default %(default)s)",
    )
    s.add_argument(
        "--config", default=env.get("KAFKAD_CONFIG"), help="a Kafka-style server.properties file"
    )
    s.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a broker config, Kafka's name (repeatable)",
    )
    s.add_argument("--log-level", default="INFO")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )
    try:
        config = load_config(
            listen=args.listen,
            advertise=args.advertise,
            data_dir=args.data_dir,
            config_file=args.config,
            overrides=_parse_set(args.set),
        )
    except (ConfigError, OSError) as exc:
        print(f"kafkad: {exc}", file=sys.stderr)
        return 2
    trio.run(serve_until_signal, config)
    return 0


if __name__ == "__main__":
    sys.exit(main())
