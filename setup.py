"""The optional C kernels (fmetrics/_native.c); everything else is configured in pyproject.toml.

``optional=True``: without a C compiler the build goes on and fmetrics runs its numpy paths instead.
"""
from setuptools import Extension, setup

setup(ext_modules=[Extension("fmetrics._native", ["fmetrics/_native.c"], optional=True)])
