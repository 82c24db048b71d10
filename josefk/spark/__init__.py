"""A PySpark data source (format ``josefk``) built on josefk.client.

Owns the public entry points: ``JosefkDataSource``, ``register(spark)`` and
``local_session()``. Usage::

    from josefk.spark import JosefkDataSource
    spark.dataSource.register(JosefkDataSource)
    df = (spark.read.format("josefk")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "events").load())

Needs pyspark>=4.0 and pyarrow (``pip install "josefk[spark]"``). The names that need
pyspark are imported on first use, so the pure modules (``josefk.spark.options``,
``josefk.spark.planning``) import without it. Imports josefk.spark's modules only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from josefk.spark.options import OptionError

if TYPE_CHECKING:
    from josefk.spark.kafka_io import DataLossError
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

_LAZY = {
    "DataLossError": "josefk.spark.kafka_io",
    "JosefkDataSource": "josefk.spark.source",
    "source_schema": "josefk.spark.source",
    "local_session": "josefk.spark.session",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'josefk.spark' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


def register(spark: Any) -> None:
    """Make ``format("josefk")`` available in ``spark`` (a SparkSession)."""
    from josefk.spark.source import JosefkDataSource

    spark.dataSource.register(JosefkDataSource)
