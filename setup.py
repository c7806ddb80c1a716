"""`scrapyd-deploy` runs `python setup.py bdist_egg` to build the egg it uploads; everything the egg
holds is declared in pyproject.toml ([project], [tool.setuptools]): the cannaspider package, its
templates and data, and the `scrapy` settings entry point. The sandbox is not in it (sandbox/ is a
development-only distribution of its own)."""

from setuptools import setup

setup()
