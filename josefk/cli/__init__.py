"""The ``josefk`` command line."""
