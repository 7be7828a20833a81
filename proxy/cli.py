"""``kafkad`` command line.

    kafkad serve [--listen HOST:PORT] [--advertise HOST:PORT] [--data-dir DIR]
                 [--config server.properties] [--set name=value ...] [--log-level LEVEL]
    kafkad healthcheck [--bootstrap HOST:PORT] [--timeout SECONDS]
    kafkad proxy --upstream HOST:PORT[,...] [--listen HOST:PORT] ...  (proxy/forward/cli.py)
    kafkad replay FILE...                                     (a proxy recording's timeline)
    kafkad --version
    kafkad topics|produce|consume|groups|txns|verify ...   (a protocol client: kafkad/cli)

Each option also reads an environment variable (KAFKAD_LISTEN, KAFKAD_ADVERTISE,
KAFKAD_DATA_DIR, KAFKAD_CONFIG, KAFKAD_LOG_LEVEL); broker configs read KAFKAD_<NAME> (see
proxy/config.py), and any other KAFKAD_ variable is refused.

A broker that cannot start (a bad config, a data dir that is not kafkad's or is locked, a port
in use) prints one line, ``kafkad: <why>``, on stderr and exits with status 1 (2 for a bad
command line or config); a traceback means a bug.
"""

from __future__ import annotations

import argparse
import dataclasses
import errno
import gc
import logging
import os
import sys
from pathlib import Path

# Every noun but serve/healthcheck is a protocol client (kafkad/cli): it needs neither trio nor
# storage, so it is handed over before they are imported and with the GC left alone.
# (The same nouns as CLIENT_NOUNS below, spelled here because it runs before the imports.)
if (__name__ == "__main__" or Path(sys.argv[0]).name == "kafkad") and sys.argv[1:2] in (
    ["topics"],
    ["produce"],
    ["consume"],
    ["groups"],
    ["txns"],
    ["verify"],
):
    sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]  # (see below)
    from kafkad.cli import main as _client_main

    sys.exit(_client_main(sys.argv[1:]))
elif __name__ == "__main__" or Path(sys.argv[0]).name == "kafkad":
    # Run as the broker, not imported by tests: kio imports hypothesis if it is installed (it is
    # in the test extras), and hypothesis creates a .hypothesis/ folder in the working
    # directory. The broker has no use for it; a None entry makes kio's import fail quietly.
    sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]
    # Start-up: the imports below create ~100k objects (dataclasses, kio schemas, trio); the
    # cyclic GC would scan them over and over (~5% of start-up). It is back on, with these
    # long-lived objects frozen out of its scans, before the broker runs (_gc_after_imports).
    _GC_PAUSED = gc.isenabled()
    gc.disable()
else:
    _GC_PAUSED = False

import trio

from proxy.config import DEFAULT_DATA_DIR, DEFAULT_LISTEN, load_config, split_host_port
from proxy.features import parse_feature
from proxy.forward import cli as forward_cli
from proxy.healthcheck import check
from proxy.listeners import WILDCARD_HOSTS
from proxy.properties_file import ConfigError
from proxy.server import serve_until_signal
from storage.api import StorageError

CLIENT_NOUNS = ("topics", "produce", "consume", "groups", "txns", "verify")
_BIND_ERRORS = (errno.EADDRINUSE, errno.EADDRNOTAVAIL, errno.EACCES)
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def version() -> str:
    import importlib.metadata  # ~5 ms, kept off the serve path (crc32c imports it today)

    try:
        return importlib.metadata.version("kafkad")
    except importlib.metadata.PackageNotFoundError:
        return "unknown (not installed)"


class _VersionAction(argparse.Action):
    """--version, looking the version up only when asked."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print kafkad's version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *_args: object, **_kw: object) -> None:
        print(f"kafkad {version()}")  # on stdout, as argparse's "version" action does
        parser.exit()


SERVE_EXAMPLES = """\
examples:
  kafkad serve --data-dir memory://                     a throwaway broker on 127.0.0.1:9092
  kafkad serve --listen 127.0.0.1:0 --data-dir ./data    a free port (printed on the ready line)
  kafkad serve --listen 0.0.0.0:9092 --advertise myhost:9092 --data-dir /var/lib/kafkad
  kafkad serve --config server.properties --set num.partitions=3 --log-level DEBUG
  kafkad serve --set "kafkad.fault.injection=produce:error=not_leader_or_follower@0.3"
  kafkad serve --data-dir ./data --feature transaction.version=0   a new data dir at TV0
  KAFKAD_DATA_DIR=memory:// KAFKAD_NUM_PARTITIONS=3 kafkad serve

Ready when it prints 'kafkad ready listen=HOST:PORT advertise=HOST:PORT data_dir=DIR' on
stdout; SIGINT or SIGTERM stops it cleanly.
"""


def _parse_set(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--set expects name=value, got {item!r}")
        out[name.strip()] = value.strip()
    return out


def _parse_features(items: list[str]) -> dict[str, int]:
    try:
        return dict(parse_feature(item) for item in items)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kafkad", description="A Kafka-compatible broker.")
    p.add_argument("--version", action=_VersionAction)
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser(
        "serve",
        help="run the broker",
        description="Run a Kafka-compatible broker until SIGINT or SIGTERM.",
        epilog=SERVE_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    env = os.environ
    s.add_argument(
        "--listen",
        default=env.get("KAFKAD_LISTEN"),
        help="HOST:PORT to listen on; port 0 picks a free port (default: the config file's "
        f"listeners, else {DEFAULT_LISTEN})",
    )
    s.add_argument(
        "--advertise",
        default=env.get("KAFKAD_ADVERTISE"),
        help="HOST:PORT clients are told to connect to (default: the bound address; required "
        "when listening on 0.0.0.0)",
    )
    s.add_argument(
        "--data-dir",
        default=env.get("KAFKAD_DATA_DIR"),
        help="data directory, or memory:// for a throwaway broker (default: the config file's "
        f"log.dirs, else {DEFAULT_DATA_DIR})",
    )
    s.add_argument(
        "--config",
        default=env.get("KAFKAD_CONFIG"),
        metavar="FILE",
        help="a Kafka-style server.properties file (listeners, log.dirs and broker configs); "
        "--listen, --data-dir and --set override it",
    )
    s.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a broker config by Kafka's name, e.g. --set num.partitions=3 (repeatable; see the "
        "README's config table; also KAFKAD_<NAME> in the environment)",
    )
    s.add_argument(
        "--feature",
        action="append",
        default=[f for f in env.get("KAFKAD_FEATURE", "").split(",") if f.strip()],
        metavar="NAME=LEVEL",
        help="a feature level a new data dir is formatted with, as kafka-storage format "
        "--feature, e.g. --feature transaction.version=0 (repeatable; default: Kafka 4's, "
        "transaction.version=2; also KAFKAD_FEATURE=NAME=LEVEL,... in the environment)",
    )
    s.add_argument(
        "--log-level",
        type=str.upper,
        choices=LOG_LEVELS,
        default=env.get("KAFKAD_LOG_LEVEL", "INFO").upper(),
        help="log level of the broker's log on stderr (default %(default)s)",
    )
    h = sub.add_parser("healthcheck", help="exit 0 if a broker answers ApiVersions")
    h.add_argument(
        "--bootstrap",
        default=env.get("KAFKAD_LISTEN", DEFAULT_LISTEN),
        help="HOST:PORT of the broker (default: KAFKAD_LISTEN or %(default)s; a wildcard host "
        "means 127.0.0.1)",
    )
    h.add_argument("--timeout", type=float, default=5.0, help="seconds (default %(default)s)")
    c = sub.add_parser(
        "certs",
        help="write a throwaway CA, server and client certificates and config snippets",
        description="Write throwaway TLS material for a local broker (not for production): "
        "ca.crt, server.pem, client.crt/client.key, server.properties (an SSL listener on "
        "127.0.0.1:9093 with mutual TLS), client.properties and librdkafka.properties. "
        "Then: kafkad serve --config DIR/server.properties",
    )
    c.add_argument("dir", metavar="DIR", help="directory to write into (made if missing)")
    c.add_argument("--force", action="store_true", help="overwrite files already there")
    a = sub.add_parser(
        "add-scram",
        help="store SCRAM users in a data dir (as kafka-storage format --add-scram)",
        description="Store SCRAM credentials (salted keys, never the password) in a stopped "
        "broker's data dir, e.g. kafkad add-scram --data-dir ./data "
        "'SCRAM-SHA-512=[name=alice,password=alice-secret]'",
    )
    a.add_argument("--data-dir", required=True, help="the broker's data dir")
    a.add_argument("entries", nargs="+", metavar="MECHANISM=[name=USER,password=SECRET]")
    forward_cli.add_parsers(sub, LOG_LEVELS)
    for noun in CLIENT_NOUNS:  # listed for --help; main() hands them to kafkad/cli unparsed
        sub.add_parser(noun, help=f"protocol client (see kafkad {noun} --help)", add_help=False)
    return p


def _certs(args: argparse.Namespace) -> int:
    from proxy.certs import write_certs  # cryptography only when asked for

    try:
        paths = write_certs(Path(args.dir), force=args.force)
    except (FileExistsError, OSError) as exc:
        print(f"kafkad: {exc}", file=sys.stderr)
        return 1
    for path in paths:
        print(path)
    print(f"next: kafkad serve --config {paths[0].parent / 'server.properties'}")
    return 0


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in _leaves(sub)]
    return [exc]


def startup_failure(exc: BaseException, listen: str) -> str | None:
    """The one line to print for an error that stopped the broker, or None for a bug (whose
    traceback is then shown)."""
    lines = []
    for leaf in _leaves(exc):
        if isinstance(leaf, StorageError):
            lines.append(str(leaf))
        elif isinstance(leaf, OSError) and leaf.errno in _BIND_ERRORS:
            where = leaf.filename or listen  # the server names the listener that failed
            lines.append(f"cannot listen on {where}: {(leaf.strerror or str(leaf)).lower()}")
        elif isinstance(leaf, OSError):
            where = f" ({leaf.filename})" if leaf.filename else ""
            lines.append(f"{leaf.strerror or leaf}{where}")
        else:
            return None
    return "; ".join(dict.fromkeys(lines))


def _healthcheck(args: argparse.Namespace) -> int:
    try:
        host, port = split_host_port(args.bootstrap, "--bootstrap", lowest_port=1)
    except ConfigError as exc:
        print(f"kafkad: {exc}", file=sys.stderr)
        return 2
    problem = check("127.0.0.1" if host in WILDCARD_HOSTS else host, port, args.timeout)
    if problem is not None:
        print(f"kafkad: unhealthy: {problem}", file=sys.stderr)
        return 1
    return 0


def _gc_after_imports() -> None:
    global _GC_PAUSED
    if _GC_PAUSED:
        _GC_PAUSED = False
        gc.freeze()
        gc.enable()


def main(argv: list[str] | None = None) -> int:
    args_in = sys.argv[1:] if argv is None else argv
    if args_in and args_in[0] in CLIENT_NOUNS:
        from kafkad.cli import main as client_main

        return client_main(args_in)
    _gc_after_imports()
    args = build_parser().parse_args(argv)
    if args.command == "healthcheck":
        return _healthcheck(args)
    if args.command == "certs":
        return _certs(args)
    if args.command == "proxy":
        return forward_cli.run_proxy(args)
    if args.command == "replay":
        return forward_cli.run_replay(args)
    if args.command == "add-scram":
        from proxy.sasl.scram_cli import main as add_scram

        return add_scram(args.data_dir, args.entries)
    if args.log_level not in LOG_LEVELS:  # argparse checks choices only when given
        print(
            f"kafkad: KAFKAD_LOG_LEVEL={args.log_level} from the environment: must be one of "
            f"{', '.join(LOG_LEVELS)}",
            file=sys.stderr,
        )
        return 2
    logging.basicConfig(
        level=getattr(logging, args.log_level),
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
        config = dataclasses.replace(config, features=_parse_features(args.feature))
    except ConfigError as exc:
        print(f"kafkad: {exc}", file=sys.stderr)
        return 2
    try:
        trio.run(serve_until_signal, config)
    except (Exception, BaseExceptionGroup) as exc:
        line = startup_failure(exc, f"{config.listen_host}:{config.listen_port}")
        if line is None:
            raise
        print(f"kafkad: {line}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
