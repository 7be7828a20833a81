"""Records to Spark's Kafka row schema (no Spark session, no broker): what Spark gives for a
record without headers and one without a timestamp type."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from pipeline.source import to_arrow

# pipeline.source.schema_ddl(include_headers=True), built without a session
SCHEMA = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
        StructField(
            "headers",
            ArrayType(
                StructType([StructField("key", StringType()), StructField("value", BinaryType())])
            ),
        ),
    ]
)


@dataclass
class Record:  # the parts of confluent_kafka.Message that to_arrow reads
    ts: tuple[int, int]
    hs: list[tuple[str, bytes]] | None = None
    off: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def key(self) -> bytes:
        return b"k"

    def value(self) -> bytes:
        return b"v"

    def topic(self) -> str:
        return "t"

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return self.off

    def timestamp(self) -> tuple[int, int]:
        return self.ts

    def headers(self) -> list[tuple[str, bytes]] | None:
        return self.hs


def _rows(records: list[Record]) -> list[dict[str, Any]]:
    batch = to_arrow(records, to_arrow_schema(SCHEMA, timezone="UTC"), True)  # type: ignore[arg-type]
    return pa.Table.from_batches([batch]).to_pylist()


def test_headers_null_without_headers_and_a_list_with() -> None:
    rows = _rows([Record((1, 5), None), Record((1, 5), [("h", b"1")]), Record((1, 5), [])])
    assert [r["headers"] for r in rows] == [None, [{"key": "h", "value": b"1"}], None]


def test_timestamp_types_as_spark_gives_them() -> None:
    create, append, none = _rows([Record((1, 5)), Record((2, 7)), Record((0, 0))])
    assert (create["timestampType"], append["timestampType"], none["timestampType"]) == (0, 1, -1)
    assert create["timestamp"].timestamp() == 0.005
    # no timestamp type: the Java client's timestamp -1, i.e. 1 ms before the epoch
    assert none["timestamp"].timestamp() == -0.001
