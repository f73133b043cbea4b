"""The one thing pyproject.toml cannot declare with the setuptools this project supports: the C extension
that walks records on the produce path (protocol/_records.c)."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("odradek.protocol._records", ["protocol/_records.c"], extra_compile_args=["-O2"])])
