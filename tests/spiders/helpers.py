"""Moved to tests/helpers.py; re-exported here until the tests that still import this module
(tests/spiders/test_products.py, test_database_restart.py, tests/test_scrapyd.py) import from tests.helpers."""

from tests.helpers import add_store, products_of, runs_of

__all__ = ["add_store", "products_of", "runs_of"]
