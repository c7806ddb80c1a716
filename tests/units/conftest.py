"""Fixtures of the unit tests that run on the real database: a store, as the pipeline tests make it."""

from tests.pipelines.conftest import dispensary

__all__ = ["dispensary"]
