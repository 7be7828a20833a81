"""Error replies in an API's own response shape, for a request whose handler failed.

Kafka answers such a request with ``AbstractRequest.getErrorResponse``: every topic or
partition the request named comes back carrying the error, so the client can tell which items
failed. ``error_reply`` does the same for the APIs whose responses list the request's items;
for the rest, ``error_response`` fills every error code and leaves every list empty.
"""

from __future__ import annotations

import dataclasses
import datetime
import sys
import types
import typing
from collections.abc import Callable
from functools import cache
from typing import Any

from kio.schema.errors import ErrorCode

from wire.codec import RequestHeader, response_class


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def error_response(cls: type, code: ErrorCode) -> Any:
    """A response of ``cls`` with every error code set to ``code`` and every list empty."""
    kwargs: dict[str, Any] = {}
    hints = _hints(cls)
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING:
            if f.metadata.get("kafka_type") == "error_code":
                kwargs[f.name] = code
            continue
        kafka_type = f.metadata.get("kafka_type", "")
        hint = hints[f.name]
        if kafka_type == "error_code":
            kwargs[f.name] = code
        elif typing.get_origin(hint) in (types.UnionType, typing.Union) and type(None) in (
            typing.get_args(hint)
        ):
            kwargs[f.name] = None
        elif typing.get_origin(hint) is tuple:
            kwargs[f.name] = ()
        elif kafka_type.startswith("timedelta"):
            kwargs[f.name] = datetime.timedelta(0)
        elif kafka_type == "string":
            kwargs[f.name] = ""
        elif kafka_type == "bool":
            kwargs[f.name] = False
        elif kafka_type in ("bytes", "records"):
            kwargs[f.name] = b""
        elif dataclasses.is_dataclass(hint):
            kwargs[f.name] = error_response(hint, code)  # type: ignore[arg-type]
        else:
            kwargs[f.name] = -1 if kafka_type == "int64" else 0
    return cls(**kwargs)


class _Echo:
    """``e.Name(**keys)``: an error entity of class ``Name`` carrying the given key fields."""

    def __init__(self, module: types.ModuleType, code: ErrorCode) -> None:
        self._module, self._code = module, code

    def __getattr__(self, name: str) -> Callable[..., Any]:
        cls = getattr(self._module, name)
        names = {f.name for f in dataclasses.fields(cls)}

        def build(**keys: Any) -> Any:
            base = error_response(cls, self._code)
            return dataclasses.replace(base, **{k: v for k, v in keys.items() if k in names})

        return build


def _produce(e: _Echo, req: Any) -> dict[str, Any]:
    return {
        "responses": tuple(
            e.TopicProduceResponse(
                name=t.name,
                partition_responses=tuple(
                    e.PartitionProduceResponse(index=p.index) for p in t.partition_data
                ),
            )
            for t in req.topic_data
        )
    }


def _list_offsets(e: _Echo, req: Any) -> dict[str, Any]:
    return {
        "topics": tuple(
            e.ListOffsetsTopicResponse(
                name=t.name,
                partitions=tuple(
                    e.ListOffsetsPartitionResponse(partition_index=p.partition_index)
                    for p in t.partitions
                ),
            )
            for t in req.topics
        )
    }


def _create_topics(e: _Echo, req: Any) -> dict[str, Any]:
    return {"topics": tuple(e.CreatableTopicResult(name=t.name) for t in req.topics)}


def _delete_topics(e: _Echo, req: Any) -> dict[str, Any]:
    names = getattr(req, "topic_names", None)
    if names is None:  # v6+: topics by name or id
        names = tuple(t.name for t in req.topics)
    return {"responses": tuple(e.DeletableTopicResult(name=n) for n in names)}


def _delete_records(e: _Echo, req: Any) -> dict[str, Any]:
    topics = _topic_partitions(
        e, "DeleteRecordsTopicResult", "DeleteRecordsPartitionResult", req.topics
    )
    return {"topics": topics}


def _create_partitions(e: _Echo, req: Any) -> dict[str, Any]:
    return {"results": tuple(e.CreatePartitionsTopicResult(name=t.name) for t in req.topics)}


def _describe_configs(e: _Echo, req: Any) -> dict[str, Any]:
    return {
        "results": tuple(
            e.DescribeConfigsResult(resource_type=r.resource_type, resource_name=r.resource_name)
            for r in req.resources
        )
    }


def _alter_configs(e: _Echo, req: Any) -> dict[str, Any]:
    return {
        "responses": tuple(
            e.AlterConfigsResourceResponse(
                resource_type=r.resource_type, resource_name=r.resource_name
            )
            for r in req.resources
        )
    }


def _fetch(e: _Echo, req: Any) -> dict[str, Any]:
    return {
        "responses": tuple(
            e.FetchableTopicResponse(
                topic=getattr(t, "topic", None),
                topic_id=getattr(t, "topic_id", None),
                partitions=tuple(
                    e.PartitionData(partition_index=p.partition) for p in t.partitions
                ),
            )
            for t in req.topics
        )
    }


def _metadata(e: _Echo, req: Any) -> dict[str, Any]:
    return {
        "topics": tuple(
            e.MetadataResponseTopic(  # as Kafka: a topic asked for by id gets name ""
                name="" if t.name is None else t.name, topic_id=getattr(t, "topic_id", None)
            )
            for t in req.topics or ()
        )
    }


def _find_coordinator(e: _Echo, req: Any) -> dict[str, Any]:
    keys = getattr(req, "coordinator_keys", None)
    if keys is None:  # v0-3: one coordinator at the top level
        return {"node_id": -1, "port": -1}
    return {"coordinators": tuple(e.Coordinator(key=k, node_id=-1, port=-1) for k in keys)}


def _topic_partitions(
    e: _Echo, topic_cls: str, partition_cls: str, topics: Any, partitions: str = "partitions"
) -> tuple[Any, ...]:
    return tuple(
        getattr(e, topic_cls)(
            name=getattr(t, "name", None),
            topic_id=getattr(t, "topic_id", None),  # OffsetCommit v10+
            **{
                partitions: tuple(
                    getattr(e, partition_cls)(partition_index=p.partition_index)
                    for p in t.partitions
                )
            },
        )
        for t in topics
    )


def _offset_commit(e: _Echo, req: Any) -> dict[str, Any]:
    topics = _topic_partitions(
        e, "OffsetCommitResponseTopic", "OffsetCommitResponsePartition", req.topics
    )
    return {"topics": topics}


def _txn_offset_commit(e: _Echo, req: Any) -> dict[str, Any]:
    topics = _topic_partitions(
        e, "TxnOffsetCommitResponseTopic", "TxnOffsetCommitResponsePartition", req.topics
    )
    return {"topics": topics}


def _add_partitions_to_txn(e: _Echo, req: Any) -> dict[str, Any]:
    def results(topics: Any) -> tuple[Any, ...]:
        return tuple(
            e.AddPartitionsToTxnTopicResult(
                name=t.name,
                results_by_partition=tuple(
                    e.AddPartitionsToTxnPartitionResult(partition_index=p) for p in t.partitions
                ),
            )
            for t in topics
        )

    transactions = getattr(req, "transactions", None)
    if transactions is None or getattr(req, "v3_and_below_topics", None):  # v0-3, or a client
        return {"results_by_topic_v3_and_below": results(req.v3_and_below_topics)}
    return {
        "results_by_transaction": tuple(
            e.AddPartitionsToTxnResult(
                transactional_id=t.transactional_id, topic_results=results(t.topics)
            )
            for t in transactions
        )
    }


ECHOES: dict[int, Callable[[_Echo, Any], dict[str, Any]]] = {
    0: _produce,
    1: _fetch,
    2: _list_offsets,
    3: _metadata,
    8: _offset_commit,
    10: _find_coordinator,
    24: _add_partitions_to_txn,
    28: _txn_offset_commit,
    19: _create_topics,
    20: _delete_topics,
    21: _delete_records,
    32: _describe_configs,
    33: _alter_configs,
    37: _create_partitions,
    44: _alter_configs,
}


def error_reply(header: RequestHeader, req: Any, code: ErrorCode) -> Any:
    cls = response_class(header.api_key, header.api_version)
    resp = error_response(cls, code)
    echo = ECHOES.get(header.api_key)
    if echo is None:
        return resp
    return dataclasses.replace(resp, **echo(_Echo(sys.modules[cls.__module__], code), req))
