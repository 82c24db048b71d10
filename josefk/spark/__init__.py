"""A PySpark data source (format ``josefk``) built on josefk.client."""
