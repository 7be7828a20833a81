"""``kafkad proxy`` and ``kafkad replay``: their arguments and entry points.

kafkad proxy --upstream HOST:PORT[,HOST:PORT...] [--listen HOST:PORT] [--advertise HOST]
             [--set kafkad.fault.injection=SPEC] [--record DIR]
             [--tls --set ssl.NAME=VALUE...] [--upstream-tls --set upstream.ssl.NAME=VALUE...]
             [--upstream-timeout S] [--connect-timeout S] [--http HOST:PORT] [--log-level LEVEL]
kafkad replay FILE...
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from proxy.config import split_host_port
from proxy.properties_file import ConfigError

FAULTS = "kafkad.fault.injection"
TLS_SETTINGS_HELP = "ssl.* (toward clients, with --tls), upstream.ssl.* (with --upstream-tls)"
PROXY_EXAMPLES = """\
examples:
  kafkad proxy --upstream kafka-1:9092,kafka-2:9092 --listen 127.0.0.1:19092
  kafkad proxy --upstream localhost:9092 --listen 127.0.0.1:0 --record ./recordings
  kafkad proxy --upstream kafka-1:9093 --tls --set ssl.keystore.type=PEM \
      --set ssl.keystore.location=proxy.pem --upstream-tls \
      --set upstream.ssl.truststore.location=ca.crt
  kafkad proxy --upstream localhost:9092 --set "kafkad.fault.injection=seed=3; \\
      produce[my-app]:error=not_leader_or_follower@0.2; partition broker=1 for=5000 after=10000"

Clients bootstrap at --listen; every broker the upstream names gets its own port on the
--listen host (the following ports, or free ones with port 0), and clients are told
--advertise HOST (default: the --listen host) with those ports. Ready when it prints
'kafkad proxy ready listen=HOST:PORT upstream=...'; SIGINT or SIGTERM stops it.
"""


def add_parsers(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], levels: tuple[str, ...]
) -> None:
    env = os.environ
    p = sub.add_parser(
        "proxy",
        help="forward clients to a Kafka cluster, with fault injection and recording",
        description="Forward Kafka clients to an upstream cluster, rewriting broker addresses "
        "so every connection goes through the proxy.",
        epilog=PROXY_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--upstream", required=True, help="bootstrap HOST:PORT[,HOST:PORT...]")
    p.add_argument("--listen", default="127.0.0.1:9092", help="HOST:PORT (default %(default)s)")
    p.add_argument("--advertise", default="", metavar="HOST", help="host handed to clients")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help=f"{FAULTS}, or TLS: {TLS_SETTINGS_HELP}",
    )
    p.add_argument(
        "--tls",
        action="store_true",
        help="TLS toward clients (SSL / SASL_SSL), with Kafka's ssl.* settings",
    )
    p.add_argument(
        "--upstream-tls",
        action="store_true",
        help="TLS toward the upstream, with upstream.ssl.truststore.location etc.",
    )
    p.add_argument("--record", metavar="DIR", help="write every connection's frames to DIR")
    p.add_argument(
        "--upstream-timeout",
        type=float,
        default=300.0,
        metavar="S",
        help="close a connection whose upstream owes an answer this long (default %(default)s)",
    )
    p.add_argument("--connect-timeout", type=float, default=10.0, metavar="S")
    p.add_argument(
        "--http",
        metavar="HOST:PORT",
        help="serve the observed transaction view (/, /transactions.json) and /metrics",
    )
    p.add_argument(
        "--log-level",
        type=str.upper,
        choices=levels,
        default=env.get("KAFKAD_LOG_LEVEL", "INFO").upper(),
    )
    r = sub.add_parser("replay", help="print a proxy recording as a timeline")
    r.add_argument("files", nargs="+", metavar="FILE")


def run_proxy(args: argparse.Namespace) -> int:
    import trio

    from proxy.fault_injection import parse_spec
    from proxy.forward.security import SETTINGS, client_facing, upstream_context
    from proxy.forward.server import ProxyConfig, serve_until_signal
    from proxy.tls import TlsConfigError

    try:
        upstreams = tuple(
            split_host_port(a.strip(), "--upstream", lowest_port=1)
            for a in args.upstream.split(",")
            if a.strip()
        )
        host, port = split_host_port(args.listen, "--listen", lowest_port=0)
        http = split_host_port(args.http, "--http", lowest_port=0) if args.http else None
        settings: dict[str, str] = {}
        for item in args.set:
            name, eq, value = item.partition("=")
            if not eq or (name.strip() != FAULTS and name.strip() not in SETTINGS):
                raise ConfigError(
                    f"--set {item!r}: kafkad proxy takes {FAULTS} and {TLS_SETTINGS_HELP}"
                )
            settings[name.strip()] = value.strip()
        faults = settings.get(FAULTS, "")
        parse_spec(faults)
        for name in settings:
            upstream_side = name.startswith("upstream.")
            if name != FAULTS and not (args.upstream_tls if upstream_side else args.tls):
                flag = "--upstream-tls" if upstream_side else "--tls"
                raise ConfigError(f"--set {name}: only with {flag}")
        client_tls = client_facing(settings) if args.tls else None
        upstream_tls = upstream_context(settings) if args.upstream_tls else None
    except (ConfigError, ValueError, TlsConfigError) as exc:
        print(f"kafkad: {exc}", file=sys.stderr)
        return 2
    if not upstreams:
        print("kafkad: --upstream names no address", file=sys.stderr)
        return 2
    if host in ("0.0.0.0", "::", "") and not args.advertise:
        print("kafkad: --listen on a wildcard host needs --advertise HOST", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=getattr(logging, args.log_level),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )
    config = ProxyConfig(
        upstreams=upstreams,
        listen_host=host,
        listen_port=port,
        advertise_host=args.advertise,
        fault_injection=faults,
        record_dir=Path(args.record) if args.record else None,
        connect_timeout_s=args.connect_timeout,
        upstream_timeout_s=args.upstream_timeout,
        client_tls=client_tls,
        upstream_tls=upstream_tls,
        http=http,
    )
    try:
        trio.run(serve_until_signal, config)
    except (OSError, BaseExceptionGroup) as exc:
        leaf = _first_oserror(exc)
        if leaf is None:
            raise
        print(f"kafkad: cannot listen on {args.listen}: {leaf.strerror or leaf}", file=sys.stderr)
        return 1
    return 0


def _first_oserror(exc: BaseException) -> OSError | None:
    if isinstance(exc, BaseExceptionGroup):
        leaves = [_first_oserror(e) for e in exc.exceptions]
        return leaves[0] if leaves and all(leaves) else None
    return exc if isinstance(exc, OSError) else None


def run_replay(args: argparse.Namespace) -> int:
    from proxy.forward.replay import main

    try:
        return main(args.files)
    except BrokenPipeError:  # `kafkad replay ... | head`: the reader has what it wanted
        # what is still buffered for stdout would fail again at exit: send it nowhere
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
