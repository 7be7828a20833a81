"""kafkad's Spark connector: the `kafkad` data source (PySpark's Python Data Source API),
a reader for batch and streaming queries and an exactly-once streaming sink. See
`pipeline/README.md`; `pipeline.register(spark)` makes the format known to a session.

Importing this package needs neither pyspark nor a Kafka client; `register` does.
"""

from __future__ import annotations

from typing import Any


def register(spark: Any) -> None:
    """Make `format("kafkad")` available in this SparkSession."""
    from pipeline.datasource import KafkadDataSource

    spark.dataSource.register(KafkadDataSource)
