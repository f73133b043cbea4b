"""The one thing pyproject.toml cannot declare with the setuptools this project supports: the C extensions,
the record walk of the produce path (protocol/_records.c) and the schema machine that decodes and encodes
messages (protocol/_codec.c)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("odradek.protocol._records", ["protocol/_records.c"], extra_compile_args=["-O2"]),
        Extension("odradek.protocol._codec", ["protocol/_codec.c"], extra_compile_args=["-O2"]),
    ]
)
