"""josefk: a Kafka-compatible broker written in Python.

The package is layered; an import never points upward:

    records   <- storage  <- broker
    records   <- protocol <- broker, client
    config, metrics       <- broker, cli

See docs/ARCHITECTURE.md for the whole picture.
"""

__version__ = "0.1.0"
