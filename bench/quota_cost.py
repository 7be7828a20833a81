"""What client-quota enforcement costs a broker on which no quota is set.

    python bench/quota_cost.py [--requests 2000] [--rounds 15] [--with-other-quota]

An in-memory broker and its dispatcher, in this process (no sockets: the figure is the
broker's own work per request, where a per-request hook would show most). Two dispatchers
share the broker:

* ``hook``: ``Dispatcher.handle`` as it is (the quota hook: with no quota set, one attribute
  test per request);
* ``no hook``: the same method with every statement of the quota hook removed (its source,
  less each statement naming ``quota_bound`` or ``throttles``, compiled again), i.e. the code
  without the hook.

For each request kind (a 10-record Produce acks=1, a Fetch of one partition, ApiVersions) the
two are timed in alternating blocks, ``--rounds`` times; reported: the best process time per
request of each and the throughput ratio ``no hook / hook`` (1.000 = free). A last line, with
``--with-other-quota``, also times the hooked dispatcher while a ``request_percentage`` quota
is set for another client id (every request is then timed, by a trio instrument, and charged
to its sensor) against the code without the hook and without that instrument.
"""

from __future__ import annotations

import argparse
import ast
import datetime
import inspect
import sys
import textwrap
import time
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # run as a script: the repository's packages, tests' raw client too
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import trio
from kio.schema.alter_client_quotas.v1 import request as aq
from kio.schema.api_versions.v3 import request as av
from kio.schema.create_topics.v5 import request as ct
from kio.schema.fetch.v12 import request as fr
from kio.schema.produce.v9 import request as pr
from kio.static.primitive import f64

import proxy.dispatch
from proxy.broker import Broker
from proxy.config import load_config
from proxy.dispatch import Dispatcher
from storage.backends import open_store
from tests.proxy.harness import encode_request
from wire.records import Record, build_batch

MS = datetime.timedelta(milliseconds=1)
TOPIC, FETCHED = "quota-cost", "quota-cost-fetched"
HOOK_NAMES = ("quota_bound", "throttles")


class _StripHook(ast.NodeTransformer):
    """Removes every statement that names the quota hook."""

    def __init__(self) -> None:
        self.removed = 0

    def generic_visit(self, node: ast.AST) -> ast.AST:
        super().generic_visit(node)
        for name in ("body", "orelse", "finalbody"):
            stmts = getattr(node, name, None)
            if not isinstance(stmts, list):
                continue
            kept = [s for s in stmts if not _names_hook(s)]
            self.removed += len(stmts) - len(kept)
            setattr(node, name, kept or [ast.Pass()])
        return node


def _names_hook(stmt: ast.AST) -> bool:
    if not isinstance(stmt, (ast.Assign, ast.If, ast.Expr, ast.AnnAssign)):
        return False
    return any(isinstance(n, ast.Name) and n.id in HOOK_NAMES for n in ast.walk(stmt))


def without_hook() -> Callable[..., Any]:
    """``Dispatcher.handle`` compiled again without the quota hook's statements."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(Dispatcher.handle)))
    strip = _StripHook()
    tree = ast.fix_missing_locations(strip.visit(tree))
    assert strip.removed >= 3, f"the quota hook was not found ({strip.removed} statements)"
    namespace: dict[str, Any] = {}
    exec(compile(tree, "<handle without the quota hook>", "exec"), vars(proxy.dispatch), namespace)
    return namespace["handle"]  # type: ignore[no-any-return]


def hook_cost(broker: Broker) -> float:
    """Seconds per request of the hook's statements with no quota set, timed alone: the
    difference the dispatchers' timings measure, free of their noise."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(Dispatcher.handle)))
    stmts = [  # the hook's assignments, then its ifs (whose bodies do not run: no quota)
        s
        for s in ast.walk(tree)
        if (isinstance(s, ast.If) and _top_if(s))
        or (
            isinstance(s, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id in HOOK_NAMES for t in s.targets)
        )
    ]
    src = "\n".join(ast.unparse(s) for s in stmts)
    env = dict(vars(proxy.dispatch), self=_Self(broker), header=_Header(), ctx=None, req=None)
    n = 1_000_000
    best = min(timeit.repeat(src, globals=env, number=n, repeat=5))
    return best / n


def _top_if(stmt: ast.If) -> bool:
    return isinstance(stmt.test, ast.Name) and stmt.test.id == "quota_bound"


class _Self:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker


class _Header:
    api_key = 0  # Produce


class NoHook(Dispatcher):
    pass


def frame(req: Any, cid: int = 1) -> bytes:
    return encode_request(req, cid)[4:]  # what Dispatcher.handle takes: no size prefix


async def per_request(d: Dispatcher, f: bytes, n: int) -> float:
    started = time.process_time()
    for _ in range(n):
        await d.handle(f)
    return (time.process_time() - started) / n


async def run(requests: int, rounds: int, other_quota: bool) -> None:
    NoHook.handle = without_hook()  # type: ignore[method-assign]
    cfg = load_config(
        listen="127.0.0.1:0",
        advertise=None,
        data_dir="memory://",
        config_file=None,
        overrides={},
        environ={},
    )
    async with open_store(cfg.data_dir) as store:
        broker = Broker(cfg, store)
        hooked, bare = Dispatcher(broker), NoHook(broker)
        topics = tuple(  # one written to, one read from (a fetch from a growing log slows)
            ct.CreatableTopic(
                name=name, num_partitions=1, replication_factor=-1, assignments=(), configs=()
            )
            for name in (TOPIC, FETCHED)
        )
        await hooked.handle(
            frame(ct.CreateTopicsRequest(topics=topics, timeout=1000 * MS, validate_only=False))
        )
        records = [
            Record(offset_delta=i, timestamp_delta=0, key=None, value=b"v" * 100, headers=[])
            for i in range(10)
        ]
        data = build_batch(records, base_timestamp=1_700_000_000_000)
        part = pr.PartitionProduceData(index=0, records=data)
        produce, fill = (
            frame(
                pr.ProduceRequest(
                    transactional_id=None,
                    acks=1,
                    timeout=1000 * MS,
                    topic_data=(pr.TopicProduceData(name=name, partition_data=(part,)),),
                )
            )
            for name in (TOPIC, FETCHED)
        )
        await hooked.handle(fill)
        fetch = frame(
            fr.FetchRequest(
                max_wait=0 * MS,
                min_bytes=0,
                max_bytes=1 << 20,
                isolation_level=0,
                session_id=0,
                session_epoch=-1,
                topics=(
                    fr.FetchTopic(
                        topic=FETCHED,
                        partitions=(
                            fr.FetchPartition(
                                partition=0, fetch_offset=0, partition_max_bytes=4096
                            ),
                        ),
                    ),
                ),
                forgotten_topics_data=(),
                rack_id="",
            )
        )
        versions = frame(
            av.ApiVersionsRequest(client_software_name="bench", client_software_version="1")
        )
        kinds = {"produce acks=1": produce, "fetch": fetch, "api_versions": versions}
        print(f"{rounds} blocks of {requests} requests per kind, best µs per request (CPU)")
        print(f"{'':16}{'hook':>9}{'no hook':>9}{'ratio':>8}")
        hook_s = float("inf")
        for name, f in kinds.items():
            best = {"hook": float("inf"), "bare": float("inf")}
            for r in range(rounds):  # alternated, so load on the machine hits both alike
                order = (("hook", hooked), ("bare", bare))
                for key, d in order if r % 2 else reversed(order):
                    best[key] = min(best[key], await per_request(d, f, requests))
            ratio = best["bare"] / best["hook"]
            print(f"{name:16}{best['hook'] * 1e6:>9.2f}{best['bare'] * 1e6:>9.2f}{ratio:>8.3f}")
            hook_s = min(hook_s, best["bare"])
        cost = hook_cost(broker)
        print(
            f"the hook's own statements: {cost * 1e9:.0f} ns per request, so at most "
            f"{cost / hook_s * 100:.3f} % of the cheapest request above "
            f"(ratio {hook_s / (hook_s + cost):.4f})"
        )
        if other_quota:
            entity = aq.EntityData(entity_type="client-id", entity_name="someone-else")
            op = aq.OpData(key="request_percentage", value=f64(50.0), remove=False)
            await hooked.handle(
                frame(
                    aq.AlterClientQuotasRequest(
                        entries=(aq.EntryData(entity=(entity,), ops=(op,)),), validate_only=False
                    )
                )
            )
            clock = broker.throttles.clock
            assert clock is not None
            print("hook with a request_percentage quota for another client id, against no hook")
            print("and no quota (the request clock's trio instrument removed meanwhile):")
            for name, f in kinds.items():
                hook = bare_t = float("inf")
                for _ in range(rounds):
                    hook = min(hook, await per_request(hooked, f, requests))
                    trio.lowlevel.remove_instrument(clock)
                    bare_t = min(bare_t, await per_request(bare, f, requests))
                    trio.lowlevel.add_instrument(clock)
                print(f"{name:16}{hook * 1e6:>9.2f}{bare_t * 1e6:>9.2f}{bare_t / hook:>8.3f}")
        broker.shutting_down.set()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int, default=2_000, help="requests per timed block")
    ap.add_argument("--rounds", type=int, default=15, help="alternated blocks per variant")
    ap.add_argument("--with-other-quota", action="store_true")
    args = ap.parse_args()
    trio.run(run, args.requests, args.rounds, args.with_other_quota)


if __name__ == "__main__":
    main()
