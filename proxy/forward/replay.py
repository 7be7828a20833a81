"""``kafkad replay FILE...``: a recording (``proxy/forward/record.py``) as a readable timeline.

One line per entry: the time since the connection started, an arrow (``->`` request,
``<-`` response, ``<=`` an answer the proxy made up, ``**`` a note), the API, its version and
correlation id, then the request's key fields (topics and partitions, group, transactional
id, producer id and epoch, coordinator key, acks) or the response's latency (since its request)
and error codes (every non-zero code in it, counted), and the addresses a rewritten response
handed out. Frames kio cannot decode are shown as their API key, version and size only.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map

from proxy.forward import rewrite
from proxy.forward.frames import read_body, response_body_start
from proxy.forward.record import Kind, Recording, RecordingError, read
from proxy.forward.rewrite import field_names, nested_fields
from wire.headers import read_request_header

KEY_FIELDS = (
    "transactional_id",
    "producer_id",
    "producer_epoch",
    "group_id",
    "member_id",
    "generation_id",
    "key",
    "coordinator_keys",
    "acks",
    "isolation_level",
    "committed",
)
TOPIC_NAMES = ("name", "topic")
PARTITION_NAMES = ("partition_index", "index", "partition")
MAX_TOPICS = 4


def api_name(api_key: int) -> str:
    name = api_key_map.get(api_key)
    if name is None:
        return f"api{api_key}"
    return "".join(part.capitalize() for part in str(name).split("_"))


def timeline(rec: Recording, name: str = "") -> Iterator[str]:
    meta = rec.meta
    started = datetime.datetime.fromtimestamp(meta.get("started_unix", 0), datetime.UTC)
    node = meta.get("node_id")
    where = meta.get("upstream", "?") + (f" (broker {node})" if node is not None else "")
    yield (
        f"{name}: client {meta.get('client', '?')} via {meta.get('listener', '?')} -> "
        f"upstream {where}, started {started.isoformat(timespec='milliseconds')}"
    )
    asked: dict[int, tuple[int, int, int]] = {}  # corr -> api key, version, micros
    for entry in rec.entries:
        stamp = f"{entry.micros / 1000:12.3f} ms"
        if entry.kind is Kind.NOTE:
            yield f"{stamp}  ** {entry.payload.decode('utf-8', 'replace')}"
        elif entry.kind is Kind.REQUEST:
            header, _pos = read_request_header(entry.payload, False)
            asked[header.correlation_id] = (header.api_key, header.api_version, entry.micros)
            detail = _request_detail(header.api_key, header.api_version, entry.payload)
            yield (
                f"{stamp}  -> {api_name(header.api_key)} v{header.api_version} "
                f"corr={header.correlation_id} client={header.client_id}{detail}"
            )
        else:
            corr = int.from_bytes(entry.payload[:4], "big", signed=True)
            key, version, t0 = asked.get(corr, (-1, -1, entry.micros))
            if entry.kind is Kind.REWRITTEN:
                yield f"{stamp}     handed out {_endpoints(key, version, entry.payload)}"
                continue
            arrow = "<=" if entry.kind is Kind.LOCAL else "<-"
            made = " (answered by the proxy)" if entry.kind is Kind.LOCAL else ""
            latency = (entry.micros - t0) / 1000
            yield (
                f"{stamp}  {arrow} {api_name(key)} v{version} corr={corr}{made} "
                f"{latency:.3f} ms {_errors(key, version, entry.payload)}"
            )
    if rec.truncated:
        yield "(the recording ends inside an entry: the proxy stopped while writing it)"


def _request_detail(api_key: int, version: int, frame: bytes) -> str:
    try:
        cls = load_request_schema(api_key, version)
        _header, pos = read_request_header(frame, bool(cls.__flexible__))
        body = read_body(cls, frame, pos)
    except Exception:
        return f" ({len(frame)} bytes, not decoded)"
    fields: dict[str, list[str]] = {}
    topics: list[str] = []
    _collect(body, fields, topics, in_topics=False)
    parts = [f"{k}={','.join(dict.fromkeys(v))}" for k, v in fields.items()]
    if topics:
        more = f",+{len(topics) - MAX_TOPICS}" if len(topics) > MAX_TOPICS else ""
        parts.append("topics=" + ",".join(topics[:MAX_TOPICS]) + more)
    return "  " + " ".join(parts) if parts else ""


def _collect(entity: Any, fields: dict[str, list[str]], topics: list[str], in_topics: bool) -> None:
    names = field_names(type(entity))
    for name in KEY_FIELDS:
        if name in names:
            value = getattr(entity, name)
            if value is not None and value != "":
                fields.setdefault(name, []).append(_show(value))
    if in_topics:
        label = next((str(getattr(entity, n)) for n in TOPIC_NAMES if n in names), None)
        if label is None and "topic_id" in names:
            label = str(entity.topic_id)[:8]
        parts = [
            str(getattr(p, n))
            for f in nested_fields(type(entity))
            for p in (getattr(entity, f) or ())
            if isinstance(getattr(entity, f), tuple)
            for n in PARTITION_NAMES
            if n in field_names(type(p))
        ]
        if label is not None:
            topics.append(f"{label}[{','.join(parts)}]" if parts else label)
            return
    for f in nested_fields(type(entity)):
        value = getattr(entity, f)
        items = value if isinstance(value, tuple) else (value,) if value is not None else ()
        for item in items:
            _collect(item, fields, topics, in_topics="topic" in f)


def _show(value: Any) -> str:
    if isinstance(value, tuple):
        return "|".join(map(str, value))
    return str(value)


def _errors(api_key: int, version: int, frame: bytes) -> str:
    try:
        cls = load_response_schema(api_key, version)
        body = read_body(cls, frame, response_body_start(api_key, version, frame))
    except Exception:
        return f"({len(frame)} bytes, not decoded)"
    codes: Counter[str] = Counter()
    _codes(body, codes)
    if not codes:
        return "ok"
    return "errors: " + ", ".join(f"{n} x{c}" if c > 1 else n for n, c in codes.items())


def _codes(entity: Any, codes: Counter[str]) -> None:
    for f in dataclasses.fields(entity):
        value = getattr(entity, f.name)
        if isinstance(value, ErrorCode):
            if value != ErrorCode.none:
                codes[value.name.upper()] += 1
        elif isinstance(value, tuple):
            for item in value:
                if dataclasses.is_dataclass(item):
                    _codes(item, codes)
        elif dataclasses.is_dataclass(value):
            _codes(value, codes)


def _endpoints(api_key: int, version: int, frame: bytes) -> str:
    try:
        decoded = rewrite.decode(api_key, version, frame)
    except Exception:
        return "(not decoded)"
    return ", ".join(
        f"{'' if e.node_id is None else f'{e.node_id}='}{e.host}:{e.port}"
        for e in decoded.endpoints
    )


def main(paths: list[str]) -> int:
    import sys

    status = 0
    for i, text in enumerate(paths):
        path = Path(text)
        try:
            rec = read(path)
        except (OSError, RecordingError) as exc:
            print(f"kafkad: {exc}", file=sys.stderr)
            status = 1
            continue
        if i:
            print()
        for line in timeline(rec, path.name):
            print(line)
    return status
