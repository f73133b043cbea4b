"""A local SparkSession for odradek's pipelines and tests, with Spark's Kafka connector when it can be had.

Spark's built-in Kafka source and sink ship outside PySpark, in ``spark-sql-kafka-0-10``. A machine with
Maven access loads it through ``spark.jars.packages``; one without gets the jar files by hand. Two
environment variables choose (the pipeline's ``--packages``/``--jars`` flags do the same):

* ``ODRADEK_SPARK_PACKAGES=1``: ``spark.jars.packages`` with :data:`KAFKA_CONNECTOR_PACKAGE`, which brings
  its dependencies along.
* ``ODRADEK_SPARK_KAFKA_JARS=a.jar,b.jar,...``: ``spark.jars`` with these files, which must be the
  connector and its dependencies (see :data:`KAFKA_CONNECTOR_JARS`).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Mapping

PYSPARK_VERSION = "4.0.0"
KAFKA_CONNECTOR_PACKAGE = f"org.apache.spark:spark-sql-kafka-0-10_2.13:{PYSPARK_VERSION}"
KAFKA_CONNECTOR_JARS = (
    f"spark-sql-kafka-0-10_2.13-{PYSPARK_VERSION}.jar",
    f"spark-token-provider-kafka-0-10_2.13-{PYSPARK_VERSION}.jar",
    "kafka-clients-3.9.0.jar",
    "commons-pool2-2.12.0.jar",
)
"""The jars ``spark.jars.packages`` would fetch for the connector (its POM's runtime dependencies)."""

PACKAGES_ENV = "ODRADEK_SPARK_PACKAGES"
JARS_ENV = "ODRADEK_SPARK_KAFKA_JARS"
HOW_TO_ENABLE_KAFKA = (
    f"Spark's Kafka connector is not configured: set {PACKAGES_ENV}=1 on a machine with Maven access, or "
    f"{JARS_ENV} to the comma-separated paths of {', '.join(KAFKA_CONNECTOR_JARS)}"
)

LOCAL_CONF = {
    "spark.master": "local[2]",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.sql.session.timeZone": "UTC",
    # Only loopback: nothing a local session does needs another interface.
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.sql.streaming.forceDeleteTempCheckpointLocation": "true",
}
"""Small and quiet: two cores, few shuffle partitions, no web UI."""


def kafka_connector_conf(*, packages: bool | None = None, jars: str | None = None) -> dict[str, str] | None:
    """The Spark settings that load the Kafka connector, or None when neither way is configured.

    Arguments left unset come from the environment variables.
    """
    if packages is None:
        packages = os.environ.get(PACKAGES_ENV) == "1"
    if jars is None:
        jars = os.environ.get(JARS_ENV) or None
    if packages:
        return {"spark.jars.packages": KAFKA_CONNECTOR_PACKAGE}
    if jars:
        return {"spark.jars": jars}
    return None


def connector_jars_in(directory: Path) -> str:
    """The ``spark.jars`` value naming :data:`KAFKA_CONNECTOR_JARS` in ``directory`` (a folder Maven filled
    with the connector's dependencies, such as the tests' ``.cache/jvm/spark-kafka``).

    Only those jars: the folder also holds Scala, Hadoop and compression jars PySpark already ships, and a
    second copy of a class on the classpath is asking for trouble. Raises FileNotFoundError naming the
    missing ones.
    """
    paths = [directory.resolve() / name for name in KAFKA_CONNECTOR_JARS]
    missing = [path.name for path in paths if not path.is_file()]
    if missing:
        raise FileNotFoundError(f"{directory} lacks {', '.join(missing)}")
    return ",".join(str(path) for path in paths)


def build_session(app_name: str, conf: Mapping[str, str] | None = None) -> Any:
    """A local SparkSession (or the running one: Spark keeps one per process) with :data:`LOCAL_CONF`.

    Python workers run this interpreter, so they import the same odradek as the driver.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    for key, value in {**LOCAL_CONF, **(conf or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
