"""A small local SparkSession for tests, examples and benchmarks.

Owns ``local_session``: Spark in local mode bound to the loopback interface with the web UI
off and few shuffle partitions, so it starts quickly on a 2-core machine without a network,
and with ``josefk`` registered. Python workers run this interpreter (``PYSPARK_PYTHON``)
so they import the same josefk. Imports pyspark and josefk.spark.source only.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from pyspark.sql import SparkSession

from josefk.spark.source import JosefkDataSource


def local_session(
    app_name: str = "josefk",
    *,
    cores: int = 2,
    shuffle_partitions: int = 2,
    conf: Mapping[str, str] | None = None,
    log_level: str = "ERROR",
) -> SparkSession:
    """``local[cores]`` on 127.0.0.1, UI off, ``format("josefk")`` registered."""
    # No network: Spark would otherwise pick the first non-loopback interface.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName(app_name)
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.default.parallelism", str(cores))
        .config("spark.sql.adaptive.enabled", "false")
        .config("spark.sql.streaming.stopGracefullyOnShutdown", "true")
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    spark.dataSource.register(JosefkDataSource)
    return spark
