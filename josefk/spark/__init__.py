"""A PySpark data source (format ``josefk``) built on josefk.client.

Owns the public entry points: ``JosefkDataSource`` and ``register(spark)``. Usage::

    from josefk.spark import JosefkDataSource
    spark.dataSource.register(JosefkDataSource)
    df = (spark.read.format("josefk")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "events").load())

Needs pyspark>=4.0 and pyarrow (``pip install "josefk[spark]"``); importing this package
imports pyspark. Imports josefk.spark's modules only.
"""

from __future__ import annotations

from typing import Any

from josefk.spark.kafka_io import DataLossError
from josefk.spark.options import OptionError
from josefk.spark.session import local_session
from josefk.spark.source import JosefkDataSource, source_schema

__all__ = [
    "DataLossError",
    "JosefkDataSource",
    "OptionError",
    "local_session",
    "register",
    "source_schema",
]


def register(spark: Any) -> None:
    """Make ``format("josefk")`` available in ``spark`` (a SparkSession)."""
    spark.dataSource.register(JosefkDataSource)
