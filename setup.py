"""Packaging for `scrapyd-deploy` (it builds an egg from this) and `pip install -e .`."""

from setuptools import find_packages, setup

setup(
    name="cannaspider",
    version="0.1.0",
    packages=find_packages(include=["cannaspider", "cannaspider.*"]),
    package_data={"cannaspider.sandbox": ["*.json", "*.html"], "cannaspider.web": ["templates/*.html"]},
    python_requires=">=3.11",
    entry_points={"scrapy": ["settings = cannaspider.settings"]},
)
