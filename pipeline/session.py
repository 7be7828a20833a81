"""A local SparkSession with the `kafkad` format registered, for the example job and tests.

Sets what Spark's Python workers need to find this interpreter and this package: PYSPARK_PYTHON
(this interpreter), PYTHONPATH (the checkout, so workers import the same `pipeline` even when
the project is not installed), SPARK_LOCAL_IP (loopback: no DNS lookups of the host name) and
JAVA_HOME when unset (derived from the `java` on PATH). Existing values win except PYTHONPATH,
which gets the checkout prepended.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def spark_env() -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(ROOT) not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), *paths])
    if "JAVA_HOME" not in os.environ:
        java = shutil.which("java")
        if java is not None:  # .../bin/java -> ...
            os.environ["JAVA_HOME"] = str(Path(java).resolve().parent.parent)


# A short-lived local driver spends much of its life starting up; the C1 JIT alone and the
# serial collector start it in about two thirds of the time on a busy 2-core machine.
QUICK_START_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"

# In local mode the executor lives in the driver's JVM. After a shuffle fetch failure Spark
# drops that executor's block manager, and from then on every heartbeat asks it to re-register
# through the `CoarseGrainedScheduler` endpoint, which a local driver does not have: each
# heartbeat fails, and after `spark.executor.heartbeat.maxFailures` of them (60, ten minutes at
# the 10 s interval) the executor calls System.exit(56), taking the driver, the session and any
# running query with it. A local session has no remote executor whose heartbeats mean anything.
LOCAL_HEARTBEAT_MAX_FAILURES = 1_000_000


def local_spark(
    app: str = "kafkad",
    cores: int = 2,
    shuffle_partitions: int = 2,
    quick_start: bool = True,
    max_failures: int = 1,
    conf: dict[str, str] | None = None,
) -> Any:
    """getOrCreate a local[cores] session (quiet: ERROR logs only) with `kafkad` registered.
    quick_start: JVM flags for fast start-up over peak throughput (tests, examples).
    max_failures: attempts per task (local mode's default, 1, fails the job on the first).
    conf: further Spark configs."""
    spark_env()
    from pyspark.sql import SparkSession

    import pipeline

    builder = (
        SparkSession.builder.master(f"local[{cores},{max_failures}]")
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.default.parallelism", str(cores))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.extraJavaOptions", QUICK_START_JVM if quick_start else "")
        .config("spark.executor.heartbeat.maxFailures", str(LOCAL_HEARTBEAT_MAX_FAILURES))
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    pipeline.register(spark)
    return spark
