"""``kafkad <noun> <verb>``: a Kafka protocol client for topics, records, groups and
transactions (``kafkad serve`` stays in proxy/cli.py, which hands every other noun here).

Exit status: 0 ok, 1 a failed operation or a finding, 2 a bad command line. Every failure
prints one line, ``kafkad: <why>``, on stderr; ``--debug`` adds the traceback.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Callable, Sequence

from kafkad.cli import consume, groups, produce, topics, txns, verify
from kafkad.cli.options import UsageError, bootstrap_default
from kafkad.client.cluster import Client
from kafkad.client.errors import ClientError
from kafkad.client.security import from_properties, read_properties

__all__ = ["NOUNS", "main"]

NOUNS = ("topics", "produce", "consume", "groups", "txns", "verify")
_MODULES = (topics, produce, consume, groups, txns, verify)

Run = Callable[[argparse.Namespace, Client], int]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kafkad", description=__doc__.split("\n\n")[0])
    nouns = parser.add_subparsers(dest="noun", required=True, metavar="NOUN")
    for module in _MODULES:
        module.register(nouns)
    return parser


def main(argv: Sequence[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(list(argv))
    run: Run | None = getattr(args, "run", None)
    if run is None:  # a noun without a verb
        words = " ".join(a for a in argv if not a.startswith("-"))
        print(f"kafkad: `kafkad {words}` needs a verb (see kafkad {words} --help)", file=sys.stderr)
        return 2
    try:
        security = None
        if getattr(args, "command_config", None):
            security = from_properties(read_properties(args.command_config))
        bootstrap = args.bootstrap_server or bootstrap_default()
        with Client(bootstrap, args.timeout, security) as client:
            return run(args, client)
    except UsageError as exc:
        print(f"kafkad: {exc}", file=sys.stderr)
        return 2
    except ClientError as exc:
        if args.debug:
            traceback.print_exc()
        print(f"kafkad: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `kafkad consume ... | head`
        return 0
    except Exception as exc:  # a bug: still one line unless asked
        if args.debug:
            traceback.print_exc()
        print(
            f"kafkad: unexpected {type(exc).__name__}: {exc} (--debug shows where)", file=sys.stderr
        )
        return 1
