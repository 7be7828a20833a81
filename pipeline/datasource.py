"""`KafkadDataSource`: the `kafkad` format for Spark's Python Data Source API.

Register it once per session (`pipeline.register(spark)`), then use it where Spark's Kafka
connector would be used: `spark.readStream.format("kafkad").option("subscribe", "t")...`.
Options are checked when the reader or writer is made (`pipeline.options`); the row schema is
Spark's Kafka schema (`pipeline.source.SCHEMA`, plus `headers` with includeHeaders=true).
"""

from __future__ import annotations

from collections.abc import Mapping

from confluent_kafka import Consumer, Producer
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from pipeline.kafka_io import check_client_config, consumer_config
from pipeline.options import (
    OptionError,
    ReadOptions,
    WriteOptions,
    check_sink_columns,
    parse_read_options,
    parse_write_options,
)
from pipeline.sink import KafkaBatchWriter, KafkaStreamWriter
from pipeline.source import KafkaBatchReader, KafkaStreamReader, schema_ddl


class KafkadDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "kafkad"

    def schema(self) -> str:
        raw = str(self.options.get("includeheaders", "false")).strip().lower()
        if raw not in ("true", "false"):
            raise OptionError(f"option 'includeHeaders' must be true or false, got {raw!r}")
        return schema_ddl(raw == "true")

    def reader(self, schema: StructType) -> DataSourceReader:
        opts = parse_read_options(self.options, streaming=False)
        _check_consumer(opts)
        return KafkaBatchReader(opts, schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        opts = parse_read_options(self.options, streaming=True)
        _check_consumer(opts)
        return KafkaStreamReader(opts, schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return KafkaBatchWriter(_write_options(self.options, schema))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return KafkaStreamWriter(_write_options(self.options, schema))


def _check_consumer(opts: ReadOptions) -> None:
    check_client_config(consumer_config(opts), lambda c: Consumer(c).close())


def _write_options(options: Mapping[str, str], schema: StructType) -> WriteOptions:
    opts = parse_write_options(options)
    check_sink_columns({f.name: f.dataType.simpleString() for f in schema.fields}, opts)
    config = {**opts.client, "bootstrap.servers": opts.bootstrap_servers, "transactional.id": "c"}
    check_client_config(config, Producer)
    return opts
