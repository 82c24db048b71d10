"""Build hook for the optional C extensions (decoder, records, file maps); all metadata lives in pyproject.toml.

``optional=True``: without a working C compiler the build of the extension is skipped and
josefk installs as pure Python (josefk.protocol.compiler then uses the generated Python
decoders).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "josefk.protocol._cdecode",
            ["josefk/protocol/_cdecode.c"],
            optional=True,
        ),
        Extension(
            "josefk.records._crecords",
            ["josefk/records/_crecords.c"],
            optional=True,
        ),
        Extension(
            "josefk.fileio._cmap",
            ["josefk/fileio/_cmap.c"],
            optional=True,
        ),
    ]
)
